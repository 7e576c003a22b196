//! Values and index entries to bytes (the format is in the module doc).

use serde_json::Value as J;

use super::number::encode_number;
use super::{tag, IndexKeyError, MAX_DEPTH, MAX_KEY_BYTES};
use crate::value::Value;

/// Appends the encoding of one value. Refuses (appending nothing) a value nested deeper
/// than [`MAX_DEPTH`], which no entry may hold.
pub fn encode_value(v: &Value, out: &mut Vec<u8>) -> Result<(), IndexKeyError> {
    let start = out.len();
    let written = match v {
        Value::Missing => {
            out.push(tag::MISSING);
            Ok(())
        }
        Value::Json(j) => encode_json(j, 0, out),
    };
    if written.is_err() {
        out.truncate(start);
    }
    written
}

/// The encodings of the values one after another: the prefix every entry whose tuple
/// starts with them shares.
pub fn encode_values(values: &[Value]) -> Result<Vec<u8>, IndexKeyError> {
    let mut out = Vec::new();
    for v in values {
        encode_value(v, &mut out)?;
    }
    Ok(out)
}

/// The index entry for a document whose index keys are `values`: their encodings, the
/// marker `0x01`, then `doc_key`. Refuses entries over [`MAX_KEY_BYTES`], which the index
/// cannot store (and so must treat as Couchbase treats an oversized key: not indexed).
pub fn encode_key(values: &[Value], doc_key: &[u8]) -> Result<Vec<u8>, IndexKeyError> {
    let mut out = encode_values(values)?;
    out.push(tag::DOC_KEY);
    out.extend_from_slice(doc_key);
    if out.len() > MAX_KEY_BYTES {
        return Err(IndexKeyError::TooLong { len: out.len() });
    }
    Ok(out)
}

fn encode_json(j: &J, depth: usize, out: &mut Vec<u8>) -> Result<(), IndexKeyError> {
    match j {
        J::Null => out.push(tag::NULL),
        J::Bool(false) => out.push(tag::FALSE),
        J::Bool(true) => out.push(tag::TRUE),
        J::Number(n) => encode_number(n, out),
        J::String(s) => {
            out.push(tag::STRING);
            escape(s.as_bytes(), out);
        }
        J::Array(items) => {
            if depth >= MAX_DEPTH {
                return Err(IndexKeyError::TooDeep);
            }
            out.push(tag::ARRAY);
            for item in items {
                encode_json(item, depth + 1, out)?;
            }
            out.push(tag::ARRAY_END);
        }
        J::Object(fields) => {
            if depth >= MAX_DEPTH {
                return Err(IndexKeyError::TooDeep);
            }
            out.push(tag::OBJECT);
            // An object that does not fit a u32 count cannot fit an entry either.
            let count = u32::try_from(fields.len())
                .map_err(|_| IndexKeyError::TooLong { len: fields.len() })?;
            out.extend_from_slice(&count.to_be_bytes());
            // serde_json's map iterates in name order already (a BTreeMap without the
            // `preserve_order` feature); sorting keeps the bytes right if that changes.
            let mut sorted: Vec<_> = fields.iter().collect();
            sorted.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            for (name, value) in sorted {
                escape(name.as_bytes(), out);
                encode_json(value, depth + 1, out)?;
            }
        }
    }
    Ok(())
}

/// Appends bytes with `0x00` as `00 FF`, then the terminator `00 01`.
fn escape(bytes: &[u8], out: &mut Vec<u8>) {
    for chunk in bytes.split_inclusive(|b| *b == 0) {
        out.extend_from_slice(chunk);
        if chunk.last() == Some(&0) {
            out.push(tag::ESCAPED_ZERO);
        }
    }
    out.push(tag::ESCAPE);
    out.push(tag::TERMINATOR);
}
