//! Who may connect: the node's users, and the cluster identity its peers authenticate as
//! (see `sluice_types::identity`). Both the KV port's SASL and the admin port's HTTP Basic
//! check here.
//!
//! The cluster identity is known once the node knows the cluster's secret: at start for a
//! member, after the join's first step for a joiner (whose KV port is already bound, but
//! serves no vbucket yet). Until then no one can authenticate as it.

use sluice_sasl::{
    CredentialError, CredentialStore, DecoyParams, MemoryCredentialStore, ScramHash,
    UserCredentials,
};
use sluice_types::identity::{is_reserved_user, CLUSTER_USER};
use std::sync::{Arc, OnceLock};

/// Who a caller proved to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// Another member of this cluster (or this node itself).
    Cluster,
    /// A user, by name.
    User(String),
}

/// Why credentials were not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsRefused {
    #[error("no credentials were given")]
    Missing,
    #[error("the credentials are not HTTP Basic credentials")]
    Malformed,
    /// An unknown user and a wrong password look the same, so users cannot be enumerated.
    #[error("wrong user name or password")]
    Wrong,
}

/// Why a user was not created.
#[derive(Debug, thiserror::Error)]
pub enum UserError {
    #[error("user names beginning with '@' are reserved for the cluster's own identities: {0:?}")]
    Reserved(String),
    #[error(transparent)]
    Credentials(#[from] CredentialError),
}

/// Why the cluster identity was not set.
#[derive(Debug, thiserror::Error)]
pub enum ClusterIdentityError {
    #[error("the cluster identity is set already, with another secret")]
    AlreadySet,
    #[error("the cluster secret cannot be a password: {0}")]
    Credentials(#[from] CredentialError),
}

pub struct NodeCredentials {
    users: MemoryCredentialStore,
    cluster: OnceLock<(String, Arc<UserCredentials>)>,
}

impl NodeCredentials {
    /// The node's users, with `username` as its administrator (a reserved name is refused).
    pub fn new(username: &str, password: &str) -> Result<NodeCredentials, UserError> {
        if is_reserved_user(username) {
            return Err(UserError::Reserved(username.to_string()));
        }
        let mut rng = rand::rngs::OsRng;
        let mut users = MemoryCredentialStore::new(&mut rng);
        users.add_user(username, password, &mut rng)?;
        Ok(NodeCredentials {
            users,
            cluster: OnceLock::new(),
        })
    }

    /// Lets peers in as the cluster identity, with `secret` as its password. Setting the same
    /// secret again changes nothing; another is refused (a node belongs to one cluster).
    pub fn set_cluster_secret(&self, secret: &str) -> Result<(), ClusterIdentityError> {
        if let Some((known, _)) = self.cluster.get() {
            return match known == secret {
                true => Ok(()),
                false => Err(ClusterIdentityError::AlreadySet),
            };
        }
        let user = UserCredentials::new(CLUSTER_USER, secret, &mut rand::rngs::OsRng)?;
        let set = self.cluster.set((secret.to_string(), Arc::new(user)));
        // Lost a race with another setter: fine if it set the same secret.
        match set.is_ok() || self.cluster_password() == Some(secret) {
            true => Ok(()),
            false => Err(ClusterIdentityError::AlreadySet),
        }
    }

    /// The cluster identity's password (the cluster secret), once known: what this node
    /// authenticates to its peers with.
    pub fn cluster_password(&self) -> Option<&str> {
        self.cluster.get().map(|(secret, _)| secret.as_str())
    }

    /// Checks an HTTP `Authorization` header's value (`None`: the header is absent).
    pub fn check_basic(&self, header: Option<&[u8]>) -> Result<Caller, CredentialsRefused> {
        let header = header.ok_or(CredentialsRefused::Missing)?;
        let (user, password) = parse_basic(header).ok_or(CredentialsRefused::Malformed)?;
        let known = self.lookup(&user).ok_or(CredentialsRefused::Wrong)?;
        // The salted digest PLAIN keeps, compared in constant time: cheap enough for every
        // request, and the password itself is never kept.
        if !known.plain().verify(&password) {
            return Err(CredentialsRefused::Wrong);
        }
        Ok(match user == CLUSTER_USER {
            true => Caller::Cluster,
            false => Caller::User(user),
        })
    }
}

impl CredentialStore for NodeCredentials {
    fn lookup(&self, username: &str) -> Option<Arc<UserCredentials>> {
        if username == CLUSTER_USER {
            return self.cluster.get().map(|(_, user)| user.clone());
        }
        self.users.lookup(username)
    }

    fn decoy(&self, username: &str, hash: ScramHash) -> Option<DecoyParams> {
        self.users.decoy(username, hash)
    }
}

/// `Basic base64(user:password)` → (user, password), per RFC 7617: the scheme is
/// case-insensitive, the user name ends at the first colon.
fn parse_basic(header: &[u8]) -> Option<(String, String)> {
    use base64::Engine;
    let text = std::str::from_utf8(header).ok()?.trim();
    let (scheme, encoded) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let pair = String::from_utf8(decoded).ok()?;
    let (user, password) = pair.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_client::Credentials;

    fn header(user: &str, password: &str) -> Vec<u8> {
        Credentials::new(user, password).basic_header().into_bytes()
    }

    #[test]
    fn basic_credentials_are_checked_against_the_users_and_the_cluster_secret() {
        let c = NodeCredentials::new("Administrator", "password").unwrap();
        let admin = header("Administrator", "password");
        assert_eq!(
            c.check_basic(Some(&admin)),
            Ok(Caller::User("Administrator".into()))
        );
        assert_eq!(c.check_basic(None), Err(CredentialsRefused::Missing));
        for bad in [&b"Bearer x"[..], b"Basic !!!", b"Basic YWJj"] {
            assert_eq!(c.check_basic(Some(bad)), Err(CredentialsRefused::Malformed));
        }
        let wrong = header("Administrator", "passw0rd");
        assert_eq!(c.check_basic(Some(&wrong)), Err(CredentialsRefused::Wrong));
        let stranger = header("nobody", "password");
        assert_eq!(
            c.check_basic(Some(&stranger)),
            Err(CredentialsRefused::Wrong)
        );

        // No secret yet: nobody is the cluster, whatever the password.
        let cluster = header(CLUSTER_USER, "s3cret");
        assert_eq!(
            c.check_basic(Some(&cluster)),
            Err(CredentialsRefused::Wrong)
        );
        assert_eq!(
            c.check_basic(Some(&header(CLUSTER_USER, ""))),
            Err(CredentialsRefused::Wrong)
        );
        c.set_cluster_secret("s3cret").unwrap();
        assert_eq!(c.check_basic(Some(&cluster)), Ok(Caller::Cluster));
        let guess = header(CLUSTER_USER, "password");
        assert_eq!(c.check_basic(Some(&guess)), Err(CredentialsRefused::Wrong));
        // Lower-case scheme, as RFC 7617 allows.
        let lower = String::from_utf8(cluster)
            .unwrap()
            .replacen("Basic", "basic", 1);
        assert_eq!(c.check_basic(Some(lower.as_bytes())), Ok(Caller::Cluster));
    }

    #[test]
    fn the_secret_is_set_once() {
        let c = NodeCredentials::new("Administrator", "password").unwrap();
        assert_eq!(c.cluster_password(), None);
        c.set_cluster_secret("one").unwrap();
        c.set_cluster_secret("one").unwrap();
        assert!(matches!(
            c.set_cluster_secret("two"),
            Err(ClusterIdentityError::AlreadySet)
        ));
        assert_eq!(c.cluster_password(), Some("one"));
    }

    #[test]
    fn a_user_cannot_take_a_reserved_name() {
        assert!(NodeCredentials::new(CLUSTER_USER, "x").is_err());
        assert!(NodeCredentials::new("@anything", "x").is_err());
    }
}
