//! SCRAM `saslname` escaping (RFC 5802 §5.1).
//!
//! Commas delimit SCRAM attributes, so a username containing `,` is sent as `=2C` and
//! `=` itself as `=3D`. Any other use of `=` is invalid; rejecting it (instead of passing
//! it through) keeps two spellings from mapping to the same user.

use crate::error::ParseError;

/// Decodes a wire `saslname` into the actual name.
pub fn decode_saslname(raw: &str) -> Result<String, ParseError> {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(pos) = rest.find('=') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(tail) = after.strip_prefix("2C") {
            out.push(',');
            rest = tail;
        } else if let Some(tail) = after.strip_prefix("3D") {
            out.push('=');
            rest = tail;
        } else {
            return Err(ParseError::BadSaslName);
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Encodes a name for the wire: `=` → `=3D`, `,` → `=2C`.
pub fn encode_saslname(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '=' => out.push_str("=3D"),
            ',' => out.push_str("=2C"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_escapes() {
        assert_eq!(decode_saslname("a=2Cb=3Dc").as_deref(), Ok("a,b=c"));
        assert_eq!(decode_saslname("plain").as_deref(), Ok("plain"));
        assert_eq!(decode_saslname("=3D=3D").as_deref(), Ok("=="));
    }

    #[test]
    fn rejects_bad_escapes() {
        for bad in ["=", "a=", "=2", "=2c", "=3d", "=41", "x=ZZ"] {
            assert_eq!(decode_saslname(bad), Err(ParseError::BadSaslName), "{bad}");
        }
    }

    #[test]
    fn roundtrip() {
        for name in ["user", "a,b", "=,=", "ünïcode,=x", ""] {
            assert_eq!(decode_saslname(&encode_saslname(name)).as_deref(), Ok(name));
        }
    }
}
