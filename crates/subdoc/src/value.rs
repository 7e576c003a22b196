//! What JSON is accepted: the document a path operation works on, and the values a mutation
//! inserts.

use crate::path::PATH_COMPONENTS_MAX;
use crate::scan::{self, Kind};
use crate::SubdocError;
use serde::de::IgnoredAny;

/// The document must be JSON, nested no deeper than a path can reach.
pub fn check_document(text: &[u8]) -> Result<(), SubdocError> {
    if let Err(e) = serde_json::from_slice::<IgnoredAny>(text) {
        // serde_json stops at 128 levels; deeper than 32 is refused below anyway.
        return Err(match e.to_string().contains("recursion limit") {
            true => SubdocError::DocE2deep,
            false => SubdocError::DocNotJson,
        });
    }
    if scan::depth(text) > PATH_COMPONENTS_MAX {
        return Err(SubdocError::DocE2deep);
    }
    Ok(())
}

/// One JSON value (dict_add, dict_upsert, replace), to be placed at `depth` components.
pub fn single(value: &[u8], depth: usize) -> Result<(), SubdocError> {
    if serde_json::from_slice::<IgnoredAny>(value).is_err() {
        return Err(SubdocError::ValueCantInsert);
    }
    fits(value, depth)
}

/// One or more comma-separated JSON values (array pushes and inserts), to be placed inside
/// an array at `depth` components.
pub fn list(value: &[u8], depth: usize) -> Result<(), SubdocError> {
    let mut wrapped = Vec::with_capacity(value.len() + 2);
    wrapped.push(b'[');
    wrapped.extend_from_slice(value);
    wrapped.push(b']');
    match serde_json::from_slice::<Vec<IgnoredAny>>(&wrapped) {
        Ok(v) if !v.is_empty() => fits(value, depth + 1),
        _ => Err(SubdocError::ValueCantInsert),
    }
}

/// One JSON value that is not an object or an array (array_add_unique).
pub fn primitive(value: &[u8], depth: usize) -> Result<(), SubdocError> {
    single(value, depth)?;
    let at = scan::skip_ws(value, 0);
    match scan::kind(value, at) {
        Kind::Object | Kind::Array => Err(SubdocError::ValueCantInsert),
        _ => Ok(()),
    }
}

/// The value's own nesting, placed `depth` levels down, stays within the limit.
fn fits(value: &[u8], depth: usize) -> Result<(), SubdocError> {
    match depth + scan::depth(value) > PATH_COMPONENTS_MAX {
        true => Err(SubdocError::ValueEtoodeep),
        false => Ok(()),
    }
}

/// The value trimmed of surrounding whitespace (what is spliced in).
pub fn trimmed(value: &[u8]) -> &[u8] {
    let start = scan::skip_ws(value, 0);
    let mut end = value.len();
    while end > start && matches!(value.get(end - 1), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        end -= 1;
    }
    value.get(start..end).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_accepted() {
        assert_eq!(check_document(b"{\"a\":1}"), Ok(()));
        assert_eq!(check_document(b" [1,2] "), Ok(()));
        assert_eq!(check_document(b"{\"a\":1"), Err(SubdocError::DocNotJson));
        assert_eq!(check_document(b"hello"), Err(SubdocError::DocNotJson));
        let deep = format!("{}{}", "[".repeat(33), "]".repeat(33));
        assert_eq!(check_document(deep.as_bytes()), Err(SubdocError::DocE2deep));
        let very = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(check_document(very.as_bytes()), Err(SubdocError::DocE2deep));
        let ok = format!("{}{}", "[".repeat(32), "]".repeat(32));
        assert_eq!(check_document(ok.as_bytes()), Ok(()));

        assert_eq!(single(b"1", 1), Ok(()));
        assert_eq!(single(b" {\"x\":[]} ", 1), Ok(()));
        assert_eq!(single(b"", 1), Err(SubdocError::ValueCantInsert));
        assert_eq!(single(b"1,2", 1), Err(SubdocError::ValueCantInsert));
        assert_eq!(single(b"{", 1), Err(SubdocError::ValueCantInsert));
        assert_eq!(single(b"[[]]", 31), Err(SubdocError::ValueEtoodeep));
        assert_eq!(single(b"[[]]", 30), Ok(()));

        assert_eq!(list(b"1,2,\"x\"", 1), Ok(()));
        assert_eq!(list(b"", 1), Err(SubdocError::ValueCantInsert));
        assert_eq!(list(b"1,", 1), Err(SubdocError::ValueCantInsert));
        assert_eq!(list(b"],[", 1), Err(SubdocError::ValueCantInsert));

        assert_eq!(primitive(b"\"x\"", 1), Ok(()));
        assert_eq!(primitive(b"null", 1), Ok(()));
        assert_eq!(primitive(b"[1]", 1), Err(SubdocError::ValueCantInsert));
        assert_eq!(primitive(b"{}", 1), Err(SubdocError::ValueCantInsert));

        assert_eq!(trimmed(b"  1 \n"), b"1");
        assert_eq!(trimmed(b"   "), b"");
    }
}
