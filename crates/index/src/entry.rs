//! The entry a document gives an index.
//!
//! At most one per document: array indexing (`DISTINCT ARRAY … FOR … END`), which gives
//! several, is not offered. A key's DESC only matters to a scan's order, and scans here
//! always run ascending (the query pipeline sorts), so entries are encoded ascending alike.

use sluice_query::index_key::{encode_key, IndexKeyError};
use sluice_query::{evaluate_row, Params, Row, Value};

use crate::definition::IndexDef;

/// What the feeder knows of a live document.
#[derive(Debug, Clone, Copy)]
pub struct Doc<'a> {
    pub key: &'a [u8],
    /// The parsed body; `None` when it is not JSON (only a primary index holds those).
    pub body: Option<&'a serde_json::Value>,
    pub meta: sluice_query::DocMeta,
}

/// The bytes of `doc`'s entry in `def`, or `None` when the index leaves it out:
/// - a secondary index leaves out documents whose leading key is MISSING (unless it is
///   declared `INCLUDE MISSING`), as GSI does, and those its condition does not hold for;
/// - a key that cannot be evaluated (an error, not MISSING) counts as MISSING.
///
/// An error means the values do not fit an entry (over the key size limit or nested too
/// deep): the caller leaves the document out too, and counts it.
pub fn entry_of(def: &IndexDef, doc: Doc<'_>) -> Result<Option<Vec<u8>>, IndexKeyError> {
    if def.primary {
        return Ok(Some(doc.key.to_vec()));
    }
    let Some(body) = doc.body else {
        // Every key of a non-JSON document is MISSING, the leading one included.
        return Ok(match def.keys.first() {
            Some(k) if k.include_missing => {
                Some(encode_key(&vec![Value::Missing; def.keys.len()], doc.key)?)
            }
            _ => None,
        });
    };
    let row = Row {
        key: String::from_utf8_lossy(doc.key).into_owned(),
        meta: doc.meta,
        doc: body.clone(),
    };
    let alias = def.alias();
    let params = Params::new();
    let eval = |e| evaluate_row(e, &alias, &row, &params).unwrap_or(Value::Missing);
    if let Some(cond) = &def.condition {
        if !eval(cond).truthy() {
            return Ok(None);
        }
    }
    let values: Vec<Value> = def.keys.iter().map(|k| eval(&k.expr)).collect();
    match (values.first(), def.keys.first()) {
        (Some(Value::Missing), Some(k)) if !k.include_missing => Ok(None),
        (None, _) => Ok(None),
        _ => encode_key(&values, doc.key).map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definition::{IndexId, IndexState};
    use serde_json::json;
    use sluice_query::ast::IndexKey;
    use sluice_query::index_key::decode_key;

    fn def(keys: &[(&str, bool)], condition: Option<&str>) -> IndexDef {
        let parse = |t: &str| sluice_query::parse_expression(t).expect("parses");
        IndexDef {
            id: IndexId(1),
            name: "i".into(),
            bucket: "default".into(),
            scope: "_default".into(),
            collection: "_default".into(),
            collection_id: sluice_types::CollectionId::DEFAULT,
            keys: keys
                .iter()
                .map(|(t, missing)| IndexKey {
                    expr: parse(t),
                    descending: false,
                    include_missing: *missing,
                })
                .collect(),
            condition: condition.map(parse),
            primary: keys.is_empty(),
            state: IndexState::Online,
        }
    }

    fn doc<'a>(key: &'a [u8], body: Option<&'a serde_json::Value>) -> Doc<'a> {
        Doc {
            key,
            body,
            meta: sluice_query::DocMeta {
                is_json: body.is_some(),
                ..Default::default()
            },
        }
    }

    fn values(entry: Option<Vec<u8>>) -> Option<(Vec<serde_json::Value>, Vec<u8>)> {
        entry.map(|e| {
            let (vals, key) = decode_key(&e).expect("decodes");
            let vals = vals.into_iter().map(Value::into_json_or_null).collect();
            (vals, key)
        })
    }

    #[test]
    fn secondary_entries_hold_the_key_values_then_the_document_key() {
        let d = def(&[("status", false), ("address.city", false)], None);
        let body = json!({"status": "open", "address": {"city": "Oslo"}});
        let got = values(entry_of(&d, doc(b"k1", Some(&body))).expect("fits"));
        assert_eq!(
            got,
            Some((vec![json!("open"), json!("Oslo")], b"k1".to_vec()))
        );
        // A trailing key may be MISSING; the entry still exists.
        let body = json!({"status": "open"});
        let (vals, _) = values(entry_of(&d, doc(b"k2", Some(&body))).expect("fits")).expect("some");
        assert_eq!(vals, vec![json!("open"), serde_json::Value::Null]);
    }

    #[test]
    fn a_missing_leading_key_leaves_the_document_out_unless_include_missing() {
        let body = json!({"other": 1});
        let d = def(&[("status", false)], None);
        assert_eq!(entry_of(&d, doc(b"k", Some(&body))).expect("fits"), None);
        let d = def(&[("status", true)], None);
        assert!(entry_of(&d, doc(b"k", Some(&body)))
            .expect("fits")
            .is_some());
        // null is a value, not MISSING.
        let body = json!({"status": null});
        let d = def(&[("status", false)], None);
        assert!(entry_of(&d, doc(b"k", Some(&body)))
            .expect("fits")
            .is_some());
    }

    #[test]
    fn a_partial_index_holds_only_documents_its_condition_is_true_for() {
        let d = def(&[("name", false)], Some("type = \"hotel\""));
        let hotel = json!({"type": "hotel", "name": "Ritz"});
        let inn = json!({"type": "inn", "name": "Inn"});
        assert!(entry_of(&d, doc(b"h", Some(&hotel)))
            .expect("fits")
            .is_some());
        assert_eq!(entry_of(&d, doc(b"i", Some(&inn))).expect("fits"), None);
    }

    #[test]
    fn non_json_documents_are_in_the_primary_index_only() {
        assert_eq!(
            entry_of(&def(&[], None), doc(b"bin", None)).expect("fits"),
            Some(b"bin".to_vec())
        );
        assert_eq!(
            entry_of(&def(&[("a", false)], None), doc(b"bin", None)).expect("fits"),
            None
        );
    }

    #[test]
    fn keys_may_read_meta_and_call_functions() {
        let d = def(&[("LOWER(name)", false), ("META().id", false)], None);
        let body = json!({"name": "ÅSE"});
        let got = values(entry_of(&d, doc(b"doc-1", Some(&body))).expect("fits"));
        assert_eq!(
            got,
            Some((vec![json!("åse"), json!("doc-1")], b"doc-1".to_vec()))
        );
    }

    #[test]
    fn values_over_the_entry_limit_are_an_error_the_caller_counts() {
        let d = def(&[("big", false)], None);
        let body = json!({"big": "x".repeat(70_000)});
        assert!(entry_of(&d, doc(b"k", Some(&body))).is_err());
    }
}
