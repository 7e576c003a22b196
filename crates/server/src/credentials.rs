//! Who may connect, and with which roles: the administrator this node was started with
//! (`admin`), the users in the replicated metadata (kept here as the manager publishes
//! them, `set_users`), and the cluster identity its peers authenticate as (see
//! `sluice_types::identity`). Both the KV port's SASL and the admin port's HTTP Basic check
//! here. The administrator given at start wins over a replicated user of the same name, so
//! a node can always be reached with the credentials it was started with.
//!
//! The cluster identity is known once the node knows the cluster's secret: at start for a
//! member, after the join's first step for a joiner (whose KV port is already bound, but
//! serves no vbucket yet). Until then no one can authenticate as it.

use parking_lot::RwLock;
use sluice_cluster::metadata::{CredentialRecord, ScramRecord, UserRecord};
use sluice_cluster::rbac::Role;
use sluice_sasl::{
    CredentialError, CredentialStore, DecoyParams, MemoryCredentialStore, PlainCredentials,
    ScramCredentials, ScramHash, UserCredentials,
};
use sluice_types::hex;
use sluice_types::identity::{is_reserved_user, CLUSTER_USER};
use std::collections::{BTreeMap, HashMap};
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

/// A replicated user: its verifiers and its roles.
struct KnownUser {
    credentials: Arc<UserCredentials>,
    roles: Arc<[Role]>,
}

pub struct NodeCredentials {
    /// The administrator given at start (role `admin`), and the decoys for unknown users.
    users: MemoryCredentialStore,
    admin: String,
    replicated: RwLock<HashMap<String, KnownUser>>,
    cluster: OnceLock<(String, Arc<UserCredentials>)>,
    /// Bumped each time the users change: a connection whose access was worked out under
    /// an older one works it out again before its next command (`Session::access_generation`).
    generation: std::sync::atomic::AtomicU64,
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
            admin: username.to_string(),
            replicated: RwLock::new(HashMap::new()),
            cluster: OnceLock::new(),
            generation: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Replaces the replicated users with `users` (the metadata's, as it changed). A record
    /// that cannot be read is left out, and logged: its user cannot log in here.
    pub fn set_users(&self, users: &BTreeMap<String, UserRecord>) {
        let mut known = HashMap::with_capacity(users.len());
        for (name, record) in users {
            match from_record(name, &record.credentials) {
                Ok(credentials) => {
                    let roles = record.roles.clone().into();
                    let credentials = Arc::new(credentials);
                    known.insert(name.clone(), KnownUser { credentials, roles });
                }
                Err(e) => tracing::warn!(user = %name, error = %e, "unreadable user record"),
            }
        }
        *self.replicated.write() = known;
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::Release);
    }

    /// How many times the users changed (see the field).
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The roles of whoever `caller` is (none for a user that no longer exists).
    pub fn roles(&self, caller: &Caller) -> Arc<[Role]> {
        match caller {
            Caller::Cluster => Arc::from([Role::Admin]),
            Caller::User(name) => self.roles_of(name),
        }
    }

    /// The roles of the user called `name` (the cluster identity's are `admin`'s).
    pub fn roles_of(&self, name: &str) -> Arc<[Role]> {
        if name == self.admin || name == CLUSTER_USER {
            return Arc::from([Role::Admin]);
        }
        self.replicated
            .read()
            .get(name)
            .map_or_else(|| Arc::from([]), |u| u.roles.clone())
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
        let (user, password) =
            sluice_sasl::parse_basic_header(header).ok_or(CredentialsRefused::Malformed)?;
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
        if let Some(admin) = self.users.lookup(username) {
            return Some(admin);
        }
        self.replicated
            .read()
            .get(username)
            .map(|u| u.credentials.clone())
    }

    fn decoy(&self, username: &str, hash: ScramHash) -> Option<DecoyParams> {
        self.users.decoy(username, hash)
    }
}

/// The verifiers of `password` for every mechanism, as the metadata keeps them (PBKDF2 runs
/// here, once).
pub fn credential_record(name: &str, password: &str) -> Result<CredentialRecord, CredentialError> {
    let user = UserCredentials::new(name, password, &mut rand::rngs::OsRng)?;
    let scram = [ScramHash::Sha512, ScramHash::Sha256, ScramHash::Sha1]
        .into_iter()
        .map(|hash| {
            let c = user.scram(hash);
            ScramRecord {
                hash: hash_name(hash).to_string(),
                salt: hex::encode(c.salt()),
                iterations: c.iterations(),
                stored_key: hex::encode(c.stored_key()),
                server_key: hex::encode(c.server_key()),
            }
        })
        .collect();
    Ok(CredentialRecord {
        scram,
        plain_salt: hex::encode(user.plain().salt()),
        plain_digest: hex::encode(user.plain().digest()),
    })
}

fn hash_name(hash: ScramHash) -> &'static str {
    match hash {
        ScramHash::Sha512 => "SHA512",
        ScramHash::Sha256 => "SHA256",
        ScramHash::Sha1 => "SHA1",
    }
}

/// Why a kept user record cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("a verifier is not hex")]
    Hex,
    #[error("no {0} verifier")]
    Missing(&'static str),
    #[error(transparent)]
    Credentials(#[from] CredentialError),
}

fn unhex(text: &str) -> Result<Vec<u8>, RecordError> {
    hex::decode(text).ok_or(RecordError::Hex)
}

fn from_record(name: &str, record: &CredentialRecord) -> Result<UserCredentials, RecordError> {
    let scram = |hash: ScramHash| -> Result<ScramCredentials, RecordError> {
        let r = record
            .scram
            .iter()
            .find(|r| r.hash == hash_name(hash))
            .ok_or(RecordError::Missing(hash_name(hash)))?;
        Ok(ScramCredentials::from_keys(
            hash,
            unhex(&r.salt)?,
            r.iterations,
            unhex(&r.stored_key)?,
            unhex(&r.server_key)?,
        )?)
    };
    let plain =
        PlainCredentials::from_digest(unhex(&record.plain_salt)?, unhex(&record.plain_digest)?)?;
    Ok(UserCredentials::from_parts(
        name,
        scram(ScramHash::Sha512)?,
        scram(ScramHash::Sha256)?,
        scram(ScramHash::Sha1)?,
        plain,
    )?)
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
    fn replicated_users_log_in_with_the_roles_the_metadata_gives() {
        let c = NodeCredentials::new("Administrator", "password").unwrap();
        let record = |password: &str, roles: &str| UserRecord {
            roles: sluice_cluster::rbac::parse_roles(roles).unwrap(),
            credentials: credential_record("x", password).unwrap(),
        };
        let mut users = BTreeMap::new();
        users.insert(
            "reader".to_string(),
            record("r-pass", "data_reader[default]"),
        );
        // The administrator given at start wins over a replicated namesake.
        users.insert("Administrator".to_string(), record("other", "ro_admin"));
        c.set_users(&users);
        let reader = Some(header("reader", "r-pass"));
        assert_eq!(
            c.check_basic(reader.as_deref()),
            Ok(Caller::User("reader".into()))
        );
        assert_eq!(
            c.check_basic(Some(&header("reader", "wrong"))),
            Err(CredentialsRefused::Wrong)
        );
        assert_eq!(
            &*c.roles_of("reader"),
            &[Role::DataReader(sluice_cluster::rbac::Buckets::One(
                "default".into()
            ))]
        );
        assert_eq!(&*c.roles_of("Administrator"), &[Role::Admin]);
        assert_eq!(
            c.check_basic(Some(&header("Administrator", "other"))),
            Err(CredentialsRefused::Wrong)
        );
        // SCRAM finds the same user.
        assert!(c.lookup("reader").is_some());
        users.remove("reader");
        c.set_users(&users);
        assert_eq!(
            c.check_basic(reader.as_deref()),
            Err(CredentialsRefused::Wrong)
        );
        assert!(c.roles_of("reader").is_empty());
    }

    #[test]
    fn a_user_cannot_take_a_reserved_name() {
        assert!(NodeCredentials::new(CLUSTER_USER, "x").is_err());
        assert!(NodeCredentials::new("@anything", "x").is_err());
    }
}
