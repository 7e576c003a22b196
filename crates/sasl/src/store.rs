//! Credential lookup for the server.
//!
//! A trait so the server crate can back it with whatever it likes (a config file, a
//! `RwLock`ed map updated at runtime); [`MemoryCredentialStore`] is the simple default.
//! Lookups return `Arc`s so a session can outlive a concurrent user update.

use std::collections::HashMap;
use std::sync::Arc;

use rand::{CryptoRng, RngCore};

use crate::credentials::{UserCredentials, DEFAULT_ITERATIONS, DEFAULT_SALT_LEN};
use crate::error::CredentialError;
use crate::scram::hash::ScramHash;

/// Salt and iteration count to present for a user that does not exist.
///
/// Answering an unknown user with an immediate failure would let anyone enumerate
/// usernames, so (as RFC 5802 §5.1 suggests and Couchbase does) the server instead runs
/// the exchange with a decoy and fails at the final step. The salt must be stable per
/// username, or comparing two attempts would reveal the decoy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecoyParams {
    /// Salt shown in server-first.
    pub salt: Vec<u8>,
    /// Iteration count shown in server-first.
    pub iterations: u32,
}

/// Where the server finds users.
pub trait CredentialStore {
    /// The user's credentials, or `None` if there is no such user.
    fn lookup(&self, username: &str) -> Option<Arc<UserCredentials>>;

    /// Decoy parameters for an unknown user. The default `None` makes SCRAM fail
    /// immediately for unknown users (simpler, but reveals which users exist).
    fn decoy(&self, _username: &str, _hash: ScramHash) -> Option<DecoyParams> {
        None
    }
}

impl<T: CredentialStore + ?Sized> CredentialStore for Arc<T> {
    fn lookup(&self, username: &str) -> Option<Arc<UserCredentials>> {
        (**self).lookup(username)
    }

    fn decoy(&self, username: &str, hash: ScramHash) -> Option<DecoyParams> {
        (**self).decoy(username, hash)
    }
}

/// An in-memory map of users, with stable decoys for unknown ones.
#[derive(Debug, Clone)]
pub struct MemoryCredentialStore {
    users: HashMap<String, Arc<UserCredentials>>,
    decoy_secret: [u8; 32],
    iterations: u32,
}

impl MemoryCredentialStore {
    /// An empty store using [`DEFAULT_ITERATIONS`]; `rng` seeds the decoy-salt secret.
    pub fn new<R: RngCore + CryptoRng + ?Sized>(rng: &mut R) -> Self {
        let mut decoy_secret = [0u8; 32];
        rng.fill_bytes(&mut decoy_secret);
        Self {
            users: HashMap::new(),
            decoy_secret,
            iterations: DEFAULT_ITERATIONS,
        }
    }

    /// Sets the PBKDF2 iteration count for users added from now on (and for decoys).
    pub fn with_iterations(mut self, iterations: u32) -> Result<Self, CredentialError> {
        if iterations == 0 {
            return Err(CredentialError::ZeroIterations);
        }
        self.iterations = iterations;
        Ok(self)
    }

    /// Creates (or replaces) a user, running PBKDF2 for every mechanism now so logins
    /// never do.
    pub fn add_user<R: RngCore + CryptoRng + ?Sized>(
        &mut self,
        username: &str,
        password: &str,
        rng: &mut R,
    ) -> Result<Arc<UserCredentials>, CredentialError> {
        let user = UserCredentials::with_iterations(username, password, self.iterations, rng)?;
        Ok(self.insert(user))
    }

    /// Inserts (or replaces) pre-computed credentials.
    pub fn insert(&mut self, user: UserCredentials) -> Arc<UserCredentials> {
        let user = Arc::new(user);
        self.users
            .insert(user.username().to_owned(), Arc::clone(&user));
        user
    }

    /// Removes a user; returns whether it existed.
    pub fn remove(&mut self, username: &str) -> bool {
        self.users.remove(username).is_some()
    }

    /// Number of users.
    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// Whether the store has no users.
    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }
}

impl CredentialStore for MemoryCredentialStore {
    fn lookup(&self, username: &str) -> Option<Arc<UserCredentials>> {
        self.users.get(username).cloned()
    }

    fn decoy(&self, username: &str, hash: ScramHash) -> Option<DecoyParams> {
        let tag: &[u8] = match hash {
            ScramHash::Sha1 => b"sha1",
            ScramHash::Sha256 => b"sha256",
            ScramHash::Sha512 => b"sha512",
        };
        let mut salt =
            ScramHash::Sha256.hmac(&self.decoy_secret, &[tag, b"\0", username.as_bytes()]);
        salt.truncate(DEFAULT_SALT_LEN);
        Some(DecoyParams {
            salt,
            iterations: self.iterations,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn add_lookup_remove() {
        let mut rng = StdRng::seed_from_u64(3);
        let mut store = MemoryCredentialStore::new(&mut rng)
            .with_iterations(2)
            .unwrap();
        assert!(store.is_empty());
        store.add_user("bob", "pw", &mut rng).unwrap();
        assert_eq!(store.len(), 1);
        let bob = store.lookup("bob").unwrap();
        assert_eq!(bob.scram(ScramHash::Sha256).iterations(), 2);
        assert!(store.lookup("carol").is_none());
        assert!(store.remove("bob"));
        assert!(!store.remove("bob"));
    }

    #[test]
    fn decoys_are_stable_and_distinct() {
        let mut rng = StdRng::seed_from_u64(4);
        let store = MemoryCredentialStore::new(&mut rng);
        let a1 = store.decoy("ghost", ScramHash::Sha1).unwrap();
        let a2 = store.decoy("ghost", ScramHash::Sha1).unwrap();
        let b = store.decoy("ghost", ScramHash::Sha512).unwrap();
        let c = store.decoy("other", ScramHash::Sha1).unwrap();
        assert_eq!(a1, a2);
        assert_ne!(a1.salt, b.salt);
        assert_ne!(a1.salt, c.salt);
        assert_eq!(a1.salt.len(), DEFAULT_SALT_LEN);
        assert_eq!(a1.iterations, DEFAULT_ITERATIONS);
    }
}
