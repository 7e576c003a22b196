//! Per-connection state: negotiated features, the authenticated user, the selected bucket and
//! an in-progress SASL exchange.

use crate::bucket_handle::BucketHandle;
use sluice_proto::feature::FeatureSet;
use sluice_proto::{Feature, ValidateCtx};
use sluice_sasl::ServerSession;
use sluice_types::{Datatype, MapVersion};
use std::sync::Arc;

/// How a connection is told about a new cluster map (server push, magic 0x82).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapPush {
    /// The version only; the client fetches the map itself.
    Brief,
    /// The version and the whole map.
    Full,
}

/// Which listener a connection came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Port {
    /// Couchbase KV: HELLO, SASL and SELECT_BUCKET required.
    Kv,
    /// Plain memcached binary: no authentication, bound to the bucket from the start.
    Memcached,
}

pub struct Session {
    pub port: Port,
    pub features: FeatureSet,
    pub user: Option<String>,
    /// The selected bucket (SELECT_BUCKET; the memcached port's from the start).
    pub bucket: Option<Arc<BucketHandle>>,
    pub sasl: Option<ServerSession>,
    pub agent: String,
    pub value_bytes_max: usize,
    /// The map version (epoch, rev) this connection last received, in a GET_CLUSTER_CONFIG
    /// answer, a NOT_MY_VBUCKET body or a push: with NMVB dedup, later NMVBs of the same
    /// version carry no body, and pushes only go out for newer versions.
    pub map_sent: Option<MapVersion>,
    /// What the user's roles allow on the selected bucket (see `exec::access`).
    pub access: crate::exec::access::BucketAccess,
    /// The connection came in on the TLS KV port: SASL PLAIN is offered.
    pub tls: bool,
    /// The users' generation `access` was worked out under (`NodeCredentials::generation`).
    pub access_generation: u64,
    /// The selected bucket's collections manifest, as this session last took it.
    pub manifest: Option<Arc<sluice_cluster::Manifest>>,
}

impl Session {
    /// A new connection's session. `bucket`: the bucket the memcached port is bound to
    /// (ignored on the KV port, where a client selects one).
    pub fn new(port: Port, value_bytes_max: usize, bucket: Arc<BucketHandle>) -> Session {
        let memcached = port == Port::Memcached;
        Session {
            port,
            features: FeatureSet::default(),
            user: memcached.then(|| "memcached".to_string()),
            bucket: memcached.then_some(bucket),
            sasl: None,
            agent: String::new(),
            value_bytes_max,
            map_sent: None,
            access: match memcached {
                true => crate::exec::access::BucketAccess::ALL,
                false => Default::default(),
            },
            tls: false,
            access_generation: 0,
            manifest: None,
        }
    }

    pub fn has(&self, f: Feature) -> bool {
        self.features.contains(f)
    }

    /// Whether map changes are pushed to this connection, and how.
    pub fn map_push(&self) -> Option<MapPush> {
        self.bucket.as_ref()?;
        if self.has(Feature::ClustermapChangeNotificationBrief) {
            Some(MapPush::Brief)
        } else if self.has(Feature::ClustermapChangeNotification) {
            Some(MapPush::Full)
        } else {
            None
        }
    }

    /// Records that the client now knows `version`.
    pub fn map_seen(&mut self, version: MapVersion) {
        self.map_sent = Some(self.map_sent.map_or(version, |v| v.max(version)));
    }

    /// How this connection's keys are spelled: with collections negotiated, checked
    /// against the selected bucket's manifest (the copy [`Self::refresh_manifest`] took).
    pub fn keyspace(&self) -> crate::exec::keyspace::Keyspace<'_> {
        use crate::exec::keyspace::Keyspace;
        match (&self.manifest, self.has(Feature::Collections)) {
            (Some(m), true) => Keyspace::Aware(m),
            _ => Keyspace::Plain,
        }
    }

    /// Takes the selected bucket's manifest when it changed since this session last did
    /// (an atomic read otherwise): requests then read the session's own copy, so sessions
    /// on different cores never write a shared reference count per request.
    pub fn refresh_manifest(&mut self) {
        let Some(b) = &self.bucket else {
            self.manifest = None;
            return;
        };
        if self
            .manifest
            .as_ref()
            .is_none_or(|m| m.uid() != b.manifest_uid())
        {
            self.manifest = Some(b.manifest());
        }
    }

    pub fn authenticated(&self) -> bool {
        self.user.is_some()
    }

    /// Whether the connection authenticated as the cluster identity: another member's
    /// replication or rebalance, the only one whose takeovers and seqno acks count.
    pub fn is_cluster(&self) -> bool {
        self.user.as_deref() == Some(sluice_types::identity::CLUSTER_USER)
    }

    /// Datatype bits this client may send and receive.
    pub fn datatype_allowed(&self) -> u8 {
        let mut bits = 0;
        if self.has(Feature::Json) {
            bits |= Datatype::JSON;
        }
        if self.has(Feature::Snappy) {
            bits |= Datatype::SNAPPY;
        }
        if self.has(Feature::Xattr) {
            bits |= Datatype::XATTR;
        }
        bits
    }

    pub fn validate_ctx(&self) -> ValidateCtx {
        ValidateCtx {
            datatype_allowed: self.datatype_allowed(),
            value_bytes_max: self.value_bytes_max,
        }
    }
}
