//! The SCRAM key-derivation maths for each supported hash (RFC 5802 §3).
//!
//! Dispatch is an enum rather than generics so sessions stay plain, object-safe data
//! (they live in per-connection state of the server) and so the one place that knows
//! about concrete digest types is this file.

use hmac::{Hmac, Mac};
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha512};

/// The hash function behind a SCRAM mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScramHash {
    /// SHA-1 (20-byte digests).
    Sha1,
    /// SHA-256 (32-byte digests).
    Sha256,
    /// SHA-512 (64-byte digests).
    Sha512,
}

/// Runs `$body` with `$d` bound to the concrete digest type of `$hash`.
macro_rules! with_digest {
    ($hash:expr, $d:ident => $body:expr) => {
        match $hash {
            ScramHash::Sha1 => {
                type $d = Sha1;
                $body
            }
            ScramHash::Sha256 => {
                type $d = Sha256;
                $body
            }
            ScramHash::Sha512 => {
                type $d = Sha512;
                $body
            }
        }
    };
}

impl ScramHash {
    /// Digest length in bytes; proofs, signatures and keys all have this length.
    pub fn output_len(self) -> usize {
        match self {
            ScramHash::Sha1 => 20,
            ScramHash::Sha256 => 32,
            ScramHash::Sha512 => 64,
        }
    }

    /// `H(data)`.
    pub(crate) fn digest(self, data: &[u8]) -> Vec<u8> {
        with_digest!(self, D => D::digest(data).to_vec())
    }

    /// `HMAC(key, parts[0] || parts[1] || ...)`; taking parts avoids building the
    /// AuthMessage string twice.
    pub(crate) fn hmac(self, key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
        with_digest!(self, D => {
            // HMAC accepts keys of any length (long keys are hashed), so this cannot fail.
            let mut mac = <Hmac<D> as Mac>::new_from_slice(key)
                .expect("HMAC accepts keys of any length");
            for part in parts {
                mac.update(part);
            }
            mac.finalize().into_bytes().to_vec()
        })
    }

    /// `Hi(password, salt, i)` = PBKDF2-HMAC with a digest-length output. This is the
    /// deliberately slow step; servers run it once per user, not once per login.
    pub(crate) fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0u8; self.output_len()];
        with_digest!(self, D => pbkdf2::pbkdf2_hmac::<D>(password, salt, iterations, &mut out));
        out
    }

    /// `ClientKey = HMAC(SaltedPassword, "Client Key")`.
    pub(crate) fn client_key(self, salted_password: &[u8]) -> Vec<u8> {
        self.hmac(salted_password, &[b"Client Key"])
    }

    /// `ServerKey = HMAC(SaltedPassword, "Server Key")`.
    pub(crate) fn server_key(self, salted_password: &[u8]) -> Vec<u8> {
        self.hmac(salted_password, &[b"Server Key"])
    }
}

/// `a XOR b` for equal-length digests.
pub(crate) fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_lengths_match_digests() {
        for h in [ScramHash::Sha1, ScramHash::Sha256, ScramHash::Sha512] {
            assert_eq!(h.digest(b"x").len(), h.output_len());
            assert_eq!(h.hmac(b"k", &[b"x"]).len(), h.output_len());
            assert_eq!(h.salted_password(b"p", b"s", 2).len(), h.output_len());
        }
    }

    #[test]
    fn hmac_parts_concatenate() {
        let h = ScramHash::Sha256;
        assert_eq!(h.hmac(b"k", &[b"ab", b"c"]), h.hmac(b"k", &[b"abc"]));
    }

    #[test]
    fn rfc6070_pbkdf2_sha1_vector() {
        // RFC 6070 test vector 2: "password"/"salt", 2 iterations.
        let out = ScramHash::Sha1.salted_password(b"password", b"salt", 2);
        let expected = [
            0xea, 0x6c, 0x01, 0x4d, 0xc7, 0x2d, 0x6f, 0x8c, 0xcd, 0x1e, 0xd9, 0x2a, 0xce, 0x1d,
            0x41, 0xf0, 0xd8, 0xde, 0x89, 0x57,
        ];
        assert_eq!(out, expected);
    }
}
