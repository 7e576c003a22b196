//! Extended attributes: the section a value starts with when its datatype has the XATTR bit.
//!
//! ```text
//! u32 total                      bytes that follow, up to the body
//! repeat:
//!   u32 pair_len                 len(key) + 1 + len(value) + 1
//!   key, 0x00, value (JSON), 0x00
//! body
//! ```
//!
//! Keys starting with `_` are system xattrs, the others user xattrs; `$` names the virtual
//! ones (never stored). A sub-document path with the xattr flag works on the xattrs as if
//! they were one JSON object, `{"key": value, …}`: its first component is the xattr's key.

use crate::document::Document;
use crate::scan;

/// The longest xattr key, in bytes (Couchbase's limit).
pub const XATTR_KEY_BYTES_MAX: usize = 16;

/// Why an xattr section or key is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum XattrError {
    #[error("the xattr section is truncated or its lengths do not add up")]
    Malformed,
    #[error("an xattr key is empty, too long, not UTF-8, has control characters or a NUL")]
    BadKey,
    #[error("an xattr value is not JSON")]
    BadValue,
    #[error("an xattr key appears twice")]
    Duplicate,
}

/// The xattrs of one document, in their stored order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Xattrs {
    pairs: Vec<(String, Vec<u8>)>,
}

/// Where the body starts in a value with the XATTR bit: after the section's length prefix
/// and the section.
pub fn body_offset(value: &[u8]) -> Result<usize, XattrError> {
    let (len, _) = be32(value).ok_or(XattrError::Malformed)?;
    4usize
        .checked_add(len as usize)
        .filter(|&end| end <= value.len())
        .ok_or(XattrError::Malformed)
}

fn be32(b: &[u8]) -> Option<(u32, &[u8])> {
    let (head, rest) = b.split_first_chunk::<4>()?;
    Some((u32::from_be_bytes(*head), rest))
}

/// Whether `key` may be stored as an xattr key: 1 to 16 bytes, no control characters, and
/// not starting with punctuation other than `_` (Couchbase reserves those; `$` names the
/// virtual xattrs, never stored).
pub fn valid_key(key: &str) -> bool {
    let first_ok = key
        .chars()
        .next()
        .is_some_and(|c| c == '_' || !c.is_ascii_punctuation());
    first_ok && key.len() <= XATTR_KEY_BYTES_MAX && !key.chars().any(|c| c.is_control())
}

impl Xattrs {
    /// Decodes a section (its length prefix included, nothing after it).
    pub fn decode(section: &[u8]) -> Result<Xattrs, XattrError> {
        let (total, mut rest) = be32(section).ok_or(XattrError::Malformed)?;
        if total as usize != rest.len() {
            return Err(XattrError::Malformed);
        }
        let mut pairs: Vec<(String, Vec<u8>)> = Vec::new();
        while !rest.is_empty() {
            let (len, after) = be32(rest).ok_or(XattrError::Malformed)?;
            let (pair, after) = after
                .split_at_checked(len as usize)
                .ok_or(XattrError::Malformed)?;
            rest = after;
            let (key, value) = split_pair(pair)?;
            let key = std::str::from_utf8(key).map_err(|_| XattrError::BadKey)?;
            if !valid_key(key) {
                return Err(XattrError::BadKey);
            }
            if serde_json::from_slice::<serde::de::IgnoredAny>(value).is_err() {
                return Err(XattrError::BadValue);
            }
            if pairs.iter().any(|(k, _)| k == key) {
                return Err(XattrError::Duplicate);
            }
            // Whitespace around a value is not kept (paths would drop it anyway).
            pairs.push((key.to_string(), crate::value::trimmed(value).to_vec()));
        }
        Ok(Xattrs { pairs })
    }

    /// The section, length prefix included; empty when there are no xattrs (the value then
    /// has no XATTR bit).
    pub fn encode(&self) -> Vec<u8> {
        if self.pairs.is_empty() {
            return Vec::new();
        }
        encode_pairs(self.pairs.iter().map(|(k, v)| (k.as_bytes(), v.as_slice())))
    }

    pub fn get(&self, key: &str) -> Option<&[u8]> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_slice())
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.pairs.iter().map(|(k, _)| k.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// Only the system xattrs (what a deletion keeps).
    pub fn system_only(&self) -> Xattrs {
        Xattrs {
            pairs: self
                .pairs
                .iter()
                .filter(|(k, _)| k.starts_with('_'))
                .cloned()
                .collect(),
        }
    }

    /// The xattrs as one JSON object, for paths to work on.
    pub fn to_document(&self) -> Document {
        let mut text = b"{".to_vec();
        for (i, (k, v)) in self.pairs.iter().enumerate() {
            if i > 0 {
                text.push(b',');
            }
            text.extend_from_slice(&serde_json::to_vec(k).expect("a string serialises"));
            text.push(b':');
            text.extend_from_slice(v);
        }
        text.push(b'}');
        Document::parse(&text).expect("stored xattrs are JSON within the depth limit")
    }

    /// The xattrs a JSON object (as `to_document` made it, then mutated) holds.
    pub fn from_document(doc: &Document) -> Result<Xattrs, XattrError> {
        let text = doc.as_bytes();
        let root = scan::root(text);
        if scan::kind(text, root.start) != scan::Kind::Object {
            return Err(XattrError::Malformed);
        }
        let mut pairs = Vec::new();
        for e in scan::entries(text, root) {
            let quoted = e.key.ok_or(XattrError::Malformed)?;
            let key: String =
                serde_json::from_slice(quoted.of(text)).map_err(|_| XattrError::BadKey)?;
            if !valid_key(&key) {
                return Err(XattrError::BadKey);
            }
            pairs.push((key, e.value.of(text).to_vec()));
        }
        Ok(Xattrs { pairs })
    }
}

/// A section of these pairs, as they are: nothing is checked (`Xattrs::encode` writes only
/// valid ones; tests and fuzz seeds also write invalid ones).
pub fn encode_pairs<'a>(pairs: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> Vec<u8> {
    let mut out = vec![0; 4];
    for (k, v) in pairs {
        let len = (k.len() + 1 + v.len() + 1) as u32;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(k);
        out.push(0);
        out.extend_from_slice(v);
        out.push(0);
    }
    let total = (out.len() - 4) as u32;
    out[..4].copy_from_slice(&total.to_be_bytes());
    out
}

/// `key NUL value NUL`; neither part may hold a NUL.
fn split_pair(pair: &[u8]) -> Result<(&[u8], &[u8]), XattrError> {
    let (last, inner) = pair.split_last().ok_or(XattrError::Malformed)?;
    if *last != 0 {
        return Err(XattrError::Malformed);
    }
    let nul = inner
        .iter()
        .position(|&b| b == 0)
        .ok_or(XattrError::Malformed)?;
    let (key, value) = (&inner[..nul], &inner[nul + 1..]);
    if value.contains(&0) {
        return Err(XattrError::Malformed);
    }
    Ok((key, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(pairs: &[(&[u8], &[u8])]) -> Vec<u8> {
        encode_pairs(pairs.iter().copied())
    }

    #[test]
    fn round_trips_and_layout() {
        let s = section(&[(b"_sync", b"{\"rev\":1}"), (b"meta", b"[1,2]")]);
        let x = Xattrs::decode(&s).unwrap();
        assert_eq!(x.get("_sync"), Some(&b"{\"rev\":1}"[..]));
        assert_eq!(x.keys().collect::<Vec<_>>(), ["_sync", "meta"]);
        assert_eq!(x.encode(), s);
        assert_eq!(x.system_only().keys().collect::<Vec<_>>(), ["_sync"]);
        assert_eq!(
            x.to_document().as_bytes(),
            br#"{"_sync":{"rev":1},"meta":[1,2]}"#
        );
        assert_eq!(Xattrs::from_document(&x.to_document()), Ok(x));
        assert_eq!(Xattrs::default().encode(), Vec::<u8>::new());
        let mut value = s.clone();
        value.extend_from_slice(b"{}");
        assert_eq!(body_offset(&value), Ok(s.len()));
    }

    #[test]
    fn refusals() {
        let rows: Vec<(Vec<u8>, XattrError)> = vec![
            (vec![], XattrError::Malformed),
            (vec![0, 0, 0, 5, 1], XattrError::Malformed),
            (section(&[(b"", b"1")]), XattrError::BadKey),
            (section(&[(b"$document", b"1")]), XattrError::BadKey),
            (section(&[(b"k\x01", b"1")]), XattrError::BadKey),
            (section(&[(b"#tag", b"1")]), XattrError::BadKey),
            (section(&[(b".x", b"1")]), XattrError::BadKey),
            (section(&[(b"seventeen_bytes_k", b"1")]), XattrError::BadKey),
            (section(&[(b"\xff", b"1")]), XattrError::BadKey),
            (section(&[(b"k", b"{")]), XattrError::BadValue),
            (
                section(&[(b"k", b"1"), (b"k", b"2")]),
                XattrError::Duplicate,
            ),
            (section(&[(b"k\x00j", b"1")]), XattrError::Malformed),
        ];
        for (bytes, want) in rows {
            assert_eq!(Xattrs::decode(&bytes), Err(want), "{bytes:?}");
        }
        // A pair length past the section, and a pair without its final NUL.
        let mut s = section(&[(b"k", b"1")]);
        s[7] += 1;
        assert_eq!(Xattrs::decode(&s), Err(XattrError::Malformed));
        assert_eq!(body_offset(&[0, 0, 0, 9, 1]), Err(XattrError::Malformed));
    }
}
