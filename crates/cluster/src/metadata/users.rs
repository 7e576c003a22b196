//! Users in the replicated metadata: their roles and their credentials as salted verifiers
//! (SCRAM's stored and server keys, PLAIN's salted digest), never their passwords. The
//! server derives them (`sluice_sasl`) before proposing, so every node verifies a login the
//! same way without ever seeing the password.

use crate::metadata::command::Rejection;
use crate::rbac::Role;
use serde::{Deserialize, Serialize};
use sluice_types::identity::is_reserved_user;

/// Longest user name, in bytes (Couchbase's limit).
pub const USER_NAME_BYTES_MAX: usize = 128;
/// Most users a cluster holds: each is a few hundred bytes of metadata, on every node.
pub const USERS_MAX: usize = 10_000;

/// One SCRAM verifier, hex-encoded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramRecord {
    /// `SHA512`, `SHA256` or `SHA1`.
    pub hash: String,
    pub salt: String,
    pub iterations: u32,
    pub stored_key: String,
    pub server_key: String,
}

/// A user's verifiers for every mechanism, hex-encoded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialRecord {
    pub scram: Vec<ScramRecord>,
    pub plain_salt: String,
    pub plain_digest: String,
}

/// A user as the cluster keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserRecord {
    pub roles: Vec<Role>,
    pub credentials: CredentialRecord,
}

/// A name a user may have: not empty, not too long, printable, not reserved.
pub fn check_user_name(name: &str) -> Result<(), Rejection> {
    let bad = |reason: &'static str| {
        Err(Rejection::BadUserName {
            name: name.chars().take(USER_NAME_BYTES_MAX).collect(),
            reason: reason.to_string(),
        })
    };
    if name.is_empty() {
        bad("it is empty")
    } else if name.len() > USER_NAME_BYTES_MAX {
        bad("it is longer than 128 bytes")
    } else if is_reserved_user(name) {
        bad("names beginning with '@' are reserved")
    } else if name.chars().any(|c| c.is_control() || c == ':' || c == ',') {
        bad("it holds a control character, ':' or ','")
    } else {
        Ok(())
    }
}
