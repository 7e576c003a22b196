//! Lowercase hex, for secrets and verifiers kept as text.

/// `bytes` as lowercase hex, two digits a byte. Written digit by digit, not formatted: the
/// query service writes a request ID with it into every answer.
pub fn encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// The bytes `text` spells in hex (either case), or `None` if it is not an even number of
/// hex digits.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trips_and_refuses_what_is_not_hex() {
        assert_eq!(super::encode(&[0, 1, 0xab, 0xff]), "0001abff");
        assert_eq!(super::decode("0001abff"), Some(vec![0, 1, 0xab, 0xff]));
        assert_eq!(super::decode("abc"), None);
        assert_eq!(super::decode("zz"), None);
    }
}
