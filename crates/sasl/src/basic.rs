//! HTTP Basic credentials (RFC 7617): `Basic base64(user:password)` in an `Authorization`
//! header, as the admin port takes them. The scheme is case-insensitive; the user name ends
//! at the first colon (so it cannot hold one), the password may hold any.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

/// The user name and password of an `Authorization` header's value, or `None` if it is not
/// HTTP Basic credentials (another scheme, bad base64, not UTF-8, no colon).
pub fn parse_basic_header(header: &[u8]) -> Option<(String, String)> {
    let text = std::str::from_utf8(header).ok()?.trim();
    let (scheme, encoded) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = STANDARD.decode(encoded.trim()).ok()?;
    let pair = String::from_utf8(decoded).ok()?;
    let (user, password) = pair.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

/// The `Authorization` header's value for `user` and `password`.
pub fn basic_header(user: &str, password: &str) -> String {
    format!("Basic {}", STANDARD.encode(format!("{user}:{password}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_7617s_example_and_what_is_not_basic() {
        assert_eq!(
            basic_header("Aladdin", "open sesame"),
            "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
        assert_eq!(
            parse_basic_header(b"basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="),
            Some(("Aladdin".into(), "open sesame".into()))
        );
        assert_eq!(
            parse_basic_header(basic_header("u", "a:b").as_bytes()),
            Some(("u".into(), "a:b".into()))
        );
        for bad in [
            &b""[..],
            b"Basic",
            b"Bearer abc",
            b"Basic !!!",
            b"Basic YWJj",
            b"\xff\xfe",
        ] {
            assert_eq!(parse_basic_header(bad), None, "{bad:?}");
        }
    }

    /// The fuzz target's checks (`fuzz/fuzz_targets/http_basic.rs`) on seeded random input,
    /// so they run in every test run too.
    #[test]
    fn random_headers_never_panic_and_what_parses_round_trips() {
        use rand::{Rng, RngCore, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7617);
        for i in 0..20_000 {
            let len = rng.gen_range(0..64);
            let mut bytes = vec![0u8; len];
            rng.fill_bytes(&mut bytes);
            if i % 2 == 0 {
                // Half of them well-formed around random bytes, so the parser's inside runs.
                let inner = STANDARD.encode(&bytes);
                bytes = format!("Basic {inner}").into_bytes();
            }
            if let Some((user, password)) = parse_basic_header(&bytes) {
                assert!(!user.contains(':'));
                let again = parse_basic_header(basic_header(&user, &password).as_bytes());
                assert_eq!(again, Some((user, password)));
            }
        }
    }
}
