//! Datatype rules for stored values: Snappy validation and JSON detection.

use crate::error::EngineError;
use sluice_types::Datatype;

/// Checks a value as the client sent it and returns the datatype to store.
///
/// - A Snappy value must decompress, and its inflated size counts against `value_bytes_max`.
/// - The JSON bit is set when the (inflated) value is valid JSON, whatever the client said:
///   readers rely on the bit being true.
pub fn classify(
    value: &[u8],
    sent: Datatype,
    value_bytes_max: usize,
) -> Result<Datatype, EngineError> {
    let inflated;
    let body: &[u8] = if sent.is_snappy() {
        let len = snap::raw::decompress_len(value)
            .map_err(|_| EngineError::Invalid("bad snappy value"))?;
        if len > value_bytes_max {
            return Err(EngineError::TooBig);
        }
        inflated = snap::raw::Decoder::new()
            .decompress_vec(value)
            .map_err(|_| EngineError::Invalid("bad snappy value"))?;
        &inflated
    } else {
        if value.len() > value_bytes_max {
            return Err(EngineError::TooBig);
        }
        value
    };
    // An xattr section is checked whole (keys, JSON values, lengths): readers and
    // sub-document commands rely on a stored one decoding.
    let body_start = if sent.is_xattr() {
        let end = sluice_subdoc::xattr::body_offset(body).map_err(|_| {
            EngineError::XattrInvalid("the section is truncated or longer than the value")
        })?;
        sluice_subdoc::Xattrs::decode(&body[..end]).map_err(|_| {
            EngineError::XattrInvalid("a pair is malformed, a key invalid or a value not JSON")
        })?;
        end
    } else {
        0
    };
    let json = is_json(&body[body_start..]);
    let base = sent.without(Datatype::JSON);
    Ok(if json {
        base.with(Datatype::JSON)
    } else {
        base
    })
}

/// A stored value (inflated) split into its xattr section (empty without the XATTR bit)
/// and its body. The section was checked when it was stored.
pub(crate) fn split_xattrs(datatype: Datatype, value: &[u8]) -> (&[u8], &[u8]) {
    let end = match datatype.is_xattr() {
        true => sluice_subdoc::xattr::body_offset(value).unwrap_or(0),
        false => 0,
    };
    value.split_at(end)
}

/// Valid JSON text. A cheap first-byte test skips the parser for most binary values.
pub fn is_json(body: &[u8]) -> bool {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    match first {
        Some(b'{' | b'[' | b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n') => {
            serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok()
        }
        _ => false,
    }
}

/// The value as a client without Snappy must see it.
pub fn inflate(value: &[u8]) -> Result<Vec<u8>, EngineError> {
    snap::raw::Decoder::new()
        .decompress_vec(value)
        .map_err(|_| EngineError::Invalid("stored snappy value does not decompress"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_json_and_validates_snappy() {
        assert_eq!(
            classify(b"{\"a\":1}", Datatype::RAW, 100).unwrap(),
            Datatype(Datatype::JSON)
        );
        assert_eq!(classify(b"12x", Datatype::RAW, 100).unwrap(), Datatype::RAW);
        assert_eq!(
            classify(b"xyz", Datatype(Datatype::JSON), 100).unwrap(),
            Datatype::RAW
        );
        let z = snap::raw::Encoder::new().compress_vec(b"[1,2,3]").unwrap();
        assert_eq!(
            classify(&z, Datatype(Datatype::SNAPPY), 100).unwrap(),
            Datatype(Datatype::SNAPPY | Datatype::JSON)
        );
        assert!(classify(b"\xff\xff\xff", Datatype(Datatype::SNAPPY), 100).is_err());
        assert_eq!(
            classify(&[0u8; 101], Datatype::RAW, 100),
            Err(EngineError::TooBig)
        );
    }
}
