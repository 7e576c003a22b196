//! What the server stores per user.
//!
//! SCRAM only needs `StoredKey` and `ServerKey` (RFC 5802 §3), both derived from the
//! password through PBKDF2. PBKDF2 at 4096+ iterations is deliberately slow, so we run it
//! once per user and mechanism when the user is created and keep the results; a login
//! then costs a handful of HMACs. The password itself is not retained: PLAIN is verified
//! against a salted HMAC digest instead (a cheap check, the same trade-off Couchbase
//! makes for its PLAIN hash).

use std::fmt;

use rand::{CryptoRng, RngCore};

use crate::ct::ct_eq;
use crate::error::CredentialError;
use crate::scram::hash::ScramHash;

/// PBKDF2 iteration count used when none is given: RFC 7677's minimum recommendation.
pub const DEFAULT_ITERATIONS: u32 = 4096;

/// Length of generated salts in bytes (128 bits, as RFC 5802 examples and NIST suggest).
pub const DEFAULT_SALT_LEN: usize = 16;

/// Derived SCRAM verifier for one hash: everything the server needs, nothing that lets
/// someone log in directly (knowing `StoredKey` does not yield a valid proof).
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredentials {
    hash: ScramHash,
    salt: Vec<u8>,
    iterations: u32,
    stored_key: Vec<u8>,
    server_key: Vec<u8>,
}

impl ScramCredentials {
    /// Runs PBKDF2 and derives the keys. Slow by design; call once per user.
    pub fn derive(
        hash: ScramHash,
        password: &str,
        salt: &[u8],
        iterations: u32,
    ) -> Result<Self, CredentialError> {
        check_password(password)?;
        check_params(salt, iterations)?;
        let salted = hash.salted_password(password.as_bytes(), salt, iterations);
        let client_key = hash.client_key(&salted);
        Ok(Self {
            hash,
            salt: salt.to_vec(),
            iterations,
            stored_key: hash.digest(&client_key),
            server_key: hash.server_key(&salted),
        })
    }

    /// Rebuilds credentials from persisted keys (e.g. a password file), without the
    /// password.
    pub fn from_keys(
        hash: ScramHash,
        salt: Vec<u8>,
        iterations: u32,
        stored_key: Vec<u8>,
        server_key: Vec<u8>,
    ) -> Result<Self, CredentialError> {
        check_params(&salt, iterations)?;
        if stored_key.len() != hash.output_len() || server_key.len() != hash.output_len() {
            return Err(CredentialError::KeyLength);
        }
        Ok(Self {
            hash,
            salt,
            iterations,
            stored_key,
            server_key,
        })
    }

    /// The hash these keys were derived with.
    pub fn hash(&self) -> ScramHash {
        self.hash
    }

    /// The salt sent to clients in server-first.
    pub fn salt(&self) -> &[u8] {
        &self.salt
    }

    /// The PBKDF2 iteration count sent to clients in server-first.
    pub fn iterations(&self) -> u32 {
        self.iterations
    }

    /// `StoredKey = H(ClientKey)`.
    pub fn stored_key(&self) -> &[u8] {
        &self.stored_key
    }

    /// `ServerKey = HMAC(SaltedPassword, "Server Key")`.
    pub fn server_key(&self) -> &[u8] {
        &self.server_key
    }
}

/// Keys are secret-equivalent for impersonating the server; keep them out of logs.
impl fmt::Debug for ScramCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScramCredentials")
            .field("hash", &self.hash)
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// Verifier for PLAIN: `HMAC-SHA256(salt, password)`.
#[derive(Clone, PartialEq, Eq)]
pub struct PlainCredentials {
    salt: Vec<u8>,
    digest: Vec<u8>,
}

impl PlainCredentials {
    /// Computes the salted digest of `password`.
    pub fn derive(password: &str, salt: &[u8]) -> Result<Self, CredentialError> {
        check_password(password)?;
        if salt.is_empty() {
            return Err(CredentialError::EmptySalt);
        }
        Ok(Self {
            salt: salt.to_vec(),
            digest: plain_digest(salt, password),
        })
    }

    /// Rebuilds the verifier from a kept salt and digest, without the password.
    pub fn from_digest(salt: Vec<u8>, digest: Vec<u8>) -> Result<Self, CredentialError> {
        if salt.is_empty() {
            return Err(CredentialError::EmptySalt);
        }
        if digest.len() != ScramHash::Sha256.output_len() {
            return Err(CredentialError::KeyLength);
        }
        Ok(Self { salt, digest })
    }

    /// The salt.
    pub fn salt(&self) -> &[u8] {
        &self.salt
    }

    /// The salted digest.
    pub fn digest(&self) -> &[u8] {
        &self.digest
    }

    /// Whether `password` matches, compared in constant time.
    pub fn verify(&self, password: &str) -> bool {
        ct_eq(&plain_digest(&self.salt, password), &self.digest)
    }
}

impl fmt::Debug for PlainCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlainCredentials").finish_non_exhaustive()
    }
}

fn plain_digest(salt: &[u8], password: &str) -> Vec<u8> {
    ScramHash::Sha256.hmac(salt, &[password.as_bytes()])
}

/// A user with credentials for every mechanism in [`crate::mechanisms_list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserCredentials {
    username: String,
    sha512: ScramCredentials,
    sha256: ScramCredentials,
    sha1: ScramCredentials,
    plain: PlainCredentials,
}

impl UserCredentials {
    /// Creates a user with [`DEFAULT_ITERATIONS`] and fresh random salts.
    pub fn new<R: RngCore + CryptoRng + ?Sized>(
        username: &str,
        password: &str,
        rng: &mut R,
    ) -> Result<Self, CredentialError> {
        Self::with_iterations(username, password, DEFAULT_ITERATIONS, rng)
    }

    /// Creates a user with the given PBKDF2 iteration count and fresh random salts
    /// (one per mechanism, so the SHA-1 and SHA-256 verifiers are unrelated).
    pub fn with_iterations<R: RngCore + CryptoRng + ?Sized>(
        username: &str,
        password: &str,
        iterations: u32,
        rng: &mut R,
    ) -> Result<Self, CredentialError> {
        check_username(username)?;
        check_password(password)?;
        let mut salt = || {
            let mut s = vec![0u8; DEFAULT_SALT_LEN];
            rng.fill_bytes(&mut s);
            s
        };
        let (s512, s256, s1, sp) = (salt(), salt(), salt(), salt());
        Ok(Self {
            username: username.to_owned(),
            sha512: ScramCredentials::derive(ScramHash::Sha512, password, &s512, iterations)?,
            sha256: ScramCredentials::derive(ScramHash::Sha256, password, &s256, iterations)?,
            sha1: ScramCredentials::derive(ScramHash::Sha1, password, &s1, iterations)?,
            plain: PlainCredentials::derive(password, &sp)?,
        })
    }

    /// Assembles a user from pre-computed verifiers. Each `ScramCredentials` must have
    /// the hash its position names.
    pub fn from_parts(
        username: &str,
        sha512: ScramCredentials,
        sha256: ScramCredentials,
        sha1: ScramCredentials,
        plain: PlainCredentials,
    ) -> Result<Self, CredentialError> {
        check_username(username)?;
        if sha512.hash != ScramHash::Sha512
            || sha256.hash != ScramHash::Sha256
            || sha1.hash != ScramHash::Sha1
        {
            return Err(CredentialError::HashMismatch);
        }
        Ok(Self {
            username: username.to_owned(),
            sha512,
            sha256,
            sha1,
            plain,
        })
    }

    /// Replaces the verifier for `creds.hash()`; lets tests pin a salt (RFC vectors).
    pub fn with_scram(mut self, creds: ScramCredentials) -> Self {
        match creds.hash {
            ScramHash::Sha512 => self.sha512 = creds,
            ScramHash::Sha256 => self.sha256 = creds,
            ScramHash::Sha1 => self.sha1 = creds,
        }
        self
    }

    /// The username.
    pub fn username(&self) -> &str {
        &self.username
    }

    /// The SCRAM verifier for `hash`.
    pub fn scram(&self, hash: ScramHash) -> &ScramCredentials {
        match hash {
            ScramHash::Sha512 => &self.sha512,
            ScramHash::Sha256 => &self.sha256,
            ScramHash::Sha1 => &self.sha1,
        }
    }

    /// The PLAIN verifier.
    pub fn plain(&self) -> &PlainCredentials {
        &self.plain
    }
}

pub(crate) fn check_username(username: &str) -> Result<(), CredentialError> {
    if username.is_empty() {
        Err(CredentialError::EmptyUsername)
    } else if username.contains('\0') {
        Err(CredentialError::ContainsNul)
    } else {
        Ok(())
    }
}

pub(crate) fn check_password(password: &str) -> Result<(), CredentialError> {
    if password.is_empty() {
        Err(CredentialError::EmptyPassword)
    } else if password.contains('\0') {
        Err(CredentialError::ContainsNul)
    } else {
        Ok(())
    }
}

fn check_params(salt: &[u8], iterations: u32) -> Result<(), CredentialError> {
    if salt.is_empty() {
        Err(CredentialError::EmptySalt)
    } else if iterations == 0 {
        Err(CredentialError::ZeroIterations)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn user_has_distinct_salts_and_verifies_plain() {
        let mut rng = StdRng::seed_from_u64(1);
        let u = UserCredentials::with_iterations("alice", "secret", 2, &mut rng).unwrap();
        assert_eq!(u.username(), "alice");
        assert_ne!(
            u.scram(ScramHash::Sha1).salt(),
            u.scram(ScramHash::Sha256).salt()
        );
        assert_eq!(u.scram(ScramHash::Sha512).stored_key().len(), 64);
        assert_eq!(u.scram(ScramHash::Sha512).iterations(), 2);
        assert!(u.plain().verify("secret"));
        assert!(!u.plain().verify("Secret"));
    }

    #[test]
    fn rejects_bad_input() {
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(
            UserCredentials::new("", "pw", &mut rng),
            Err(CredentialError::EmptyUsername)
        );
        assert_eq!(
            UserCredentials::new("u", "", &mut rng),
            Err(CredentialError::EmptyPassword)
        );
        assert_eq!(
            UserCredentials::new("u\0", "pw", &mut rng),
            Err(CredentialError::ContainsNul)
        );
        assert_eq!(
            ScramCredentials::derive(ScramHash::Sha1, "pw", b"s", 0),
            Err(CredentialError::ZeroIterations)
        );
        assert_eq!(
            ScramCredentials::from_keys(
                ScramHash::Sha1,
                b"s".to_vec(),
                1,
                vec![0; 19],
                vec![0; 20]
            ),
            Err(CredentialError::KeyLength)
        );
    }

    #[test]
    fn debug_does_not_leak_keys() {
        let c = ScramCredentials::derive(ScramHash::Sha1, "pw", b"salt", 1).unwrap();
        let s = format!("{c:?}");
        assert!(!s.contains("stored_key"));
    }
}
