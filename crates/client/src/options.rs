//! How to connect: credentials, bucket and HELLO features.

use sluice_proto::Feature;

/// The HELLO user agent.
pub const AGENT: &str = concat!("sluice-client/", env!("CARGO_PKG_VERSION"));

/// What a Sluice connection asks for by default.
pub const DEFAULT_FEATURES: &[Feature] = &[
    Feature::MutationSeqno,
    Feature::Xerror,
    Feature::SelectBucket,
    Feature::Json,
    Feature::TcpNodelay,
    // Durable writes: the durability frame info rides on the alternative request magic.
    Feature::AltRequestSupport,
    Feature::SyncReplication,
];

/// Bootstrap settings for [`Client::connect`](crate::Client::connect).
///
/// `Default` is a Sluice connection with the default features and no auth; set `auth` and
/// `bucket`. [`ConnectOptions::plain`] is for plain memcached, which knows neither HELLO nor
/// cluster configs.
#[derive(Clone)]
pub struct ConnectOptions {
    /// (username, password) for SCRAM-SHA512; `None` skips SASL.
    pub auth: Option<(String, String)>,
    /// Bucket to SELECT_BUCKET; with it the client fetches the cluster config to learn the
    /// number of vbuckets. `None` sends every key to vbucket 0.
    pub bucket: Option<String>,
    /// HELLO features to ask for. Empty sends no HELLO at all: memcached 1.6 does not answer
    /// an unknown opcode with a body until the next request arrives.
    pub features: Vec<Feature>,
    /// Source address of the connection (`None`: the OS chooses); see [`crate::net`].
    pub source_ip: Option<std::net::IpAddr>,
    /// TLS over the connection (`None`: cleartext). A [`ClusterClient`](crate::ClusterClient)
    /// given it dials its seeds as given and every node of the map at its `kvSSL` port,
    /// verifying each for its own host; DCP does not take it yet.
    pub tls: Option<std::sync::Arc<crate::stream::TlsConnect>>,
}

impl ConnectOptions {
    /// A Sluice connection with credentials and a bucket.
    pub fn sluice(username: &str, password: &str, bucket: &str) -> ConnectOptions {
        ConnectOptions {
            auth: Some((username.to_string(), password.to_string())),
            bucket: Some(bucket.to_string()),
            features: DEFAULT_FEATURES.to_vec(),
            source_ip: None,
            tls: None,
        }
    }

    /// Plain memcached: no HELLO, no auth, no bucket, vbucket 0 for every key.
    pub fn plain() -> ConnectOptions {
        ConnectOptions {
            auth: None,
            bucket: None,
            features: Vec::new(),
            source_ip: None,
            tls: None,
        }
    }
}

impl Default for ConnectOptions {
    fn default() -> ConnectOptions {
        ConnectOptions {
            auth: None,
            bucket: None,
            features: DEFAULT_FEATURES.to_vec(),
            source_ip: None,
            tls: None,
        }
    }
}

/// Never prints the password.
impl std::fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("username", &self.auth.as_ref().map(|(u, _)| u))
            .field("bucket", &self.bucket)
            .field("features", &self.features)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_password() {
        let o = ConnectOptions::sluice("Administrator", "hunter2", "default");
        let s = format!("{o:?}");
        assert!(s.contains("Administrator") && !s.contains("hunter2"), "{s}");
    }
}
