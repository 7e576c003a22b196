//! The cluster secret: 32 random bytes made when the cluster forms, which every member
//! holds and proves on each internal call (Raft RPCs, forwarded proposals, rebalance
//! internals, replication). A node gets it only through a join authenticated as an
//! administrator (see `join`), and keeps it in its data directory.

use sluice_client::Credentials;
use sluice_types::identity::CLUSTER_USER;
use std::fmt;

/// Bytes of randomness in a secret.
pub const SECRET_BYTES: usize = 32;

/// The secret, kept as the lowercase hex that is also the cluster identity's password.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ClusterSecret(String);

/// A secret that is not `2 × SECRET_BYTES` lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a cluster secret is {} lowercase hex digits", 2 * SECRET_BYTES)]
pub struct BadSecret;

impl ClusterSecret {
    /// A secret from fresh random bytes (the caller draws them from the OS).
    pub fn from_bytes(bytes: [u8; SECRET_BYTES]) -> ClusterSecret {
        ClusterSecret(sluice_types::hex::encode(&bytes))
    }

    /// The identity a member calls its peers as.
    pub fn credentials(&self) -> Credentials {
        Credentials::new(CLUSTER_USER, self.0.clone())
    }

    /// The password of the cluster identity.
    pub fn as_password(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for ClusterSecret {
    type Error = BadSecret;

    fn try_from(s: String) -> Result<ClusterSecret, BadSecret> {
        let s = s.trim().to_string();
        let hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
        if s.len() == 2 * SECRET_BYTES && s.chars().all(hex) {
            Ok(ClusterSecret(s))
        } else {
            Err(BadSecret)
        }
    }
}

impl From<ClusterSecret> for String {
    fn from(s: ClusterSecret) -> String {
        s.0
    }
}

impl fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClusterSecret(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_round_trips_as_hex_and_never_shows_in_debug() {
        let s = ClusterSecret::from_bytes([0xab; SECRET_BYTES]);
        assert_eq!(s.as_password().len(), 64);
        let back = ClusterSecret::try_from(String::from(s.clone())).unwrap();
        assert_eq!(back, s);
        assert!(!format!("{s:?}").contains("ab"));
        assert_eq!(s.credentials().username, CLUSTER_USER);
    }

    #[test]
    fn anything_but_64_lowercase_hex_digits_is_refused() {
        for bad in ["", "abc", &"g".repeat(64), &"A".repeat(64), &"a".repeat(65)] {
            assert_eq!(
                ClusterSecret::try_from(bad.to_string()),
                Err(BadSecret),
                "{bad}"
            );
        }
    }
}
