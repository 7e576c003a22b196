//! Bytes back to values and index entries. Accepts only what the encoder writes (the
//! canonical form), so a decoded entry re-encodes to the very bytes it came from; refuses
//! anything else with an error, never a panic, and recurses at most [`MAX_DEPTH`] deep.

use serde_json::{Map, Value as J};

use super::number::{decode_number, BODY_LEN};
use super::{tag, IndexKeyError, MAX_DEPTH, MAX_KEY_BYTES};
use crate::value::Value;

/// An index entry's values and document key.
pub fn decode_key(bytes: &[u8]) -> Result<(Vec<Value>, Vec<u8>), IndexKeyError> {
    check_len(bytes)?;
    let mut r = Reader { bytes, at: 0 };
    let mut values = Vec::new();
    loop {
        let at = r.at;
        match r.byte()? {
            tag::DOC_KEY => break,
            tag::MISSING => values.push(Value::Missing),
            t => values.push(Value::Json(r.json(t, at, 0)?)),
        }
    }
    Ok((values, r.rest().to_vec()))
}

/// One value's encoding, all of `bytes` (as [`super::encode_value`] writes it).
pub fn decode_value(bytes: &[u8]) -> Result<Value, IndexKeyError> {
    check_len(bytes)?;
    let mut r = Reader { bytes, at: 0 };
    let value = match r.byte()? {
        tag::MISSING => Value::Missing,
        t => Value::Json(r.json(t, 0, 0)?),
    };
    match r.rest().len() {
        0 => Ok(value),
        extra => Err(IndexKeyError::TrailingBytes { extra }),
    }
}

fn check_len(bytes: &[u8]) -> Result<(), IndexKeyError> {
    if bytes.len() > MAX_KEY_BYTES {
        return Err(IndexKeyError::TooLong { len: bytes.len() });
    }
    Ok(())
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Result<u8, IndexKeyError> {
        let b = *self
            .bytes
            .get(self.at)
            .ok_or(IndexKeyError::Truncated { at: self.at })?;
        self.at += 1;
        Ok(b)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], IndexKeyError> {
        let end = self.at.saturating_add(n);
        let taken = self
            .bytes
            .get(self.at..end)
            .ok_or(IndexKeyError::Truncated {
                at: self.bytes.len(),
            })?;
        self.at = end;
        Ok(taken)
    }

    fn rest(&self) -> &'a [u8] {
        self.bytes.get(self.at..).unwrap_or_default()
    }

    /// The JSON value whose tag `t` (at byte `at`) was just read, `depth` containers in.
    fn json(&mut self, t: u8, at: usize, depth: usize) -> Result<J, IndexKeyError> {
        Ok(match t {
            tag::NULL => J::Null,
            tag::FALSE => J::Bool(false),
            tag::TRUE => J::Bool(true),
            tag::ZERO => J::Number(0u64.into()),
            tag::NEGATIVE | tag::POSITIVE => {
                let mut body = [0; BODY_LEN];
                body.copy_from_slice(self.take(BODY_LEN)?);
                let n = decode_number(t == tag::NEGATIVE, &body)
                    .ok_or(IndexKeyError::BadNumber { at })?;
                J::Number(n)
            }
            tag::STRING => J::String(self.unescape()?),
            tag::ARRAY => {
                let depth = nested(depth)?;
                let mut items = Vec::new();
                loop {
                    let at = self.at;
                    match self.byte()? {
                        tag::ARRAY_END => break,
                        t => items.push(self.json(t, at, depth)?),
                    }
                }
                J::Array(items)
            }
            tag::OBJECT => {
                let depth = nested(depth)?;
                let mut count = [0; 4];
                count.copy_from_slice(self.take(4)?);
                let count = u32::from_be_bytes(count);
                // No preallocation from the count: it is untrusted until the fields are read.
                let mut fields = Map::new();
                for _ in 0..count {
                    let name_at = self.at;
                    let name = self.unescape()?;
                    // Names come in ascending order, once each: the one encoding there is.
                    let last = fields.keys().next_back();
                    if last.is_some_and(|p: &String| p.as_bytes() >= name.as_bytes()) {
                        return Err(IndexKeyError::UnsortedNames { at: name_at });
                    }
                    let at = self.at;
                    let t = self.byte()?;
                    let value = self.json(t, at, depth)?;
                    fields.insert(name, value);
                }
                J::Object(fields)
            }
            // MISSING is no JSON value: it is a tuple element only.
            other => return Err(IndexKeyError::BadTag { tag: other, at }),
        })
    }

    /// Escaped bytes up to and including the terminator, as a string.
    fn unescape(&mut self) -> Result<String, IndexKeyError> {
        let mut out = Vec::new();
        loop {
            match self.byte()? {
                tag::ESCAPE => match self.byte()? {
                    tag::TERMINATOR => break,
                    tag::ESCAPED_ZERO => out.push(0),
                    byte => {
                        return Err(IndexKeyError::BadEscape {
                            byte,
                            at: self.at - 1,
                        })
                    }
                },
                b => out.push(b),
            }
        }
        String::from_utf8(out).map_err(|_| IndexKeyError::NotUtf8 { at: self.at })
    }
}

/// The depth inside one more array/object, if allowed.
fn nested(depth: usize) -> Result<usize, IndexKeyError> {
    if depth >= MAX_DEPTH {
        return Err(IndexKeyError::TooDeep);
    }
    Ok(depth + 1)
}
