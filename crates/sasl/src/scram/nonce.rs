//! Nonce generation and validation.
//!
//! RFC 5802 restricts nonces to printable ASCII without commas and *without spaces*, but
//! the Couchbase C++ SDK sends client nonces like `0x02 0xffffff9b 0x05 0x6a ...`. The
//! server only ever echoes the client nonce back and compares it byte for byte, so we
//! treat it as opaque text: any printable ASCII including space, just no comma (the
//! attribute separator).

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rand::{CryptoRng, RngCore};

/// Random bytes behind a generated nonce: 24 bytes = 192 bits, 32 base64 chars (no `=`
/// padding, and the base64 alphabet never contains a comma).
pub(crate) const NONCE_RANDOM_BYTES: usize = 24;

/// A fresh nonce: base64 of [`NONCE_RANDOM_BYTES`] random bytes.
pub(crate) fn generate_nonce<R: RngCore + CryptoRng + ?Sized>(rng: &mut R) -> String {
    let mut bytes = [0u8; NONCE_RANDOM_BYTES];
    rng.fill_bytes(&mut bytes);
    STANDARD.encode(bytes)
}

/// Whether `nonce` is acceptable as (part of) a SCRAM nonce: non-empty, printable ASCII
/// (space allowed for C++ SDK interop), no comma.
pub(crate) fn is_valid_nonce(nonce: &str) -> bool {
    !nonce.is_empty()
        && nonce
            .bytes()
            .all(|b| (0x20..=0x7e).contains(&b) && b != b',')
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn generated_nonces_are_valid_and_distinct() {
        let mut rng = StdRng::seed_from_u64(7);
        let a = generate_nonce(&mut rng);
        let b = generate_nonce(&mut rng);
        assert!(is_valid_nonce(&a));
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }

    #[test]
    fn validity_rules() {
        assert!(is_valid_nonce("fyko+d2lbbFgONRv9qkxdawL"));
        assert!(is_valid_nonce("0x02 0xffffff9b 0x05 0x6a"));
        assert!(is_valid_nonce("%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"));
        assert!(!is_valid_nonce(""));
        assert!(!is_valid_nonce("a,b"));
        assert!(!is_valid_nonce("tab\there"));
        assert!(!is_valid_nonce("nül"));
    }
}
