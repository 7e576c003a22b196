//! Everything a node is started with. The CLI fills it from flags (and env vars).

use sluice_engine::BucketType;
use std::path::PathBuf;

/// See [`ServerConfig::write_stall`]. Under a sustained stream of new keys a flusher round
/// took about 80 ms on the development machine; a few rounds' worth of waiting rides out a
/// full backlog without holding a client near its SDK's 2.5 s timeout.
pub const WRITE_STALL_DEFAULT: std::time::Duration = std::time::Duration::from_millis(250);

/// See [`ServerConfig::system_connections`]: each node holds a few replication and rebalance
/// connections to each peer; this leaves room for far more than `NODES_MAX` peers' worth.
pub const SYSTEM_CONNECTIONS_DEFAULT: usize = 1_000;
/// See [`ServerConfig::unauth_body_bytes_max`]: HELLO, SASL and SELECT_BUCKET are a few hundred
/// bytes at most.
pub const UNAUTH_BODY_BYTES_MAX_DEFAULT: usize = 64 * 1024;
/// See [`ServerConfig::auth_timeout`]: SCRAM takes two round trips, even a slow client
/// finishes in well under a second.
pub const AUTH_TIMEOUT_DEFAULT: std::time::Duration = std::time::Duration::from_secs(10);
/// See [`ServerConfig::index_memory_quota_mb`]: Couchbase's smallest index memory quota. A
/// cache fills only as indexes are read, so an idle node does not hold it.
pub const INDEX_MEMORY_QUOTA_MB_DEFAULT: u64 = 256;
/// See [`ServerConfig::idle_timeout`]. The SDKs poll the cluster map every few seconds, so a
/// live SDK connection is never idle this long.
pub const IDLE_TIMEOUT_DEFAULT: std::time::Duration = std::time::Duration::from_secs(300);

/// How much of the traffic between the cluster's members goes over TLS (Couchbase's
/// cluster encryption levels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClusterEncryption {
    /// Members call each other in cleartext (with the cluster secret).
    #[default]
    Off,
    /// The control plane: this node calls its peers (Raft, joins, rebalance, failover, the
    /// janitor's and probes) at their TLS admin ports, and its admin ports take the cluster
    /// identity only over TLS.
    Control,
    /// `Control`, and the data: replication and rebalance DCP to the peers' TLS KV ports.
    All,
}

impl ClusterEncryption {
    /// Whether replication and rebalance streams between members go over TLS.
    pub fn data(self) -> bool {
        self == ClusterEncryption::All
    }
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub data_dir: PathBuf,
    /// Interface every listener binds (loopback by default).
    pub bind_host: String,
    /// Host written into the cluster map: what clients dial.
    pub advertise_host: String,
    pub kv_port: u16,
    pub admin_port: u16,
    /// Unauthenticated memcached-binary listener bound to the bucket (off when `None`).
    pub memcached_port: Option<u16>,
    /// The node's TLS certificate and key: with them, the TLS KV and admin ports serve.
    pub tls: Option<crate::tls::TlsFiles>,
    /// The KV port over TLS (only with `tls`).
    pub kv_tls_port: u16,
    /// The admin port over TLS (only with `tls`).
    pub admin_tls_port: u16,
    /// How much of the traffic between members is encrypted (`--cluster-encryption`).
    pub cluster_encryption: ClusterEncryption,
    /// The cluster's CA (PEM), which the members' certificates are signed by: with
    /// encryption, this node verifies its peers against it. Needs `tls`, and every member
    /// must be started with the same encryption.
    pub cluster_ca: Option<PathBuf>,
    pub bucket: String,
    pub bucket_type: BucketType,
    pub memory_quota_mb: u64,
    /// The index service's block cache, in MiB (`--index-memory-quota-mb`): what Couchbase
    /// calls the index memory quota. Index memtables are on top of it.
    pub index_memory_quota_mb: u64,
    /// The services this node runs (`--services`; every one by default). Fixed once the
    /// node is a member: the cluster refuses it back with another set.
    pub services: sluice_cluster::Services,
    pub vbuckets: u16,
    pub username: String,
    pub password: String,
    /// Connections per listener for users (and for connections not yet authenticated).
    pub connections_max: usize,
    /// Connections on the KV port beyond `connections_max`, kept for the cluster's own
    /// replication and rebalance: a connection admitted into this reserve is closed unless
    /// it authenticates as the cluster identity, so a flood of clients cannot starve the
    /// cluster of its replication.
    pub system_connections: usize,
    /// Largest packet body accepted before authentication; a larger one closes the
    /// connection before its body is read (no one makes the node buffer 30 MiB unasked).
    pub unauth_body_bytes_max: usize,
    /// A connection not authenticated within this is closed.
    pub auth_timeout: std::time::Duration,
    /// An authenticated connection that sends nothing for this long, and waits for no answer,
    /// is closed (`None`: never). DCP connections are watched by their noops instead.
    pub idle_timeout: Option<std::time::Duration>,
    /// The admin port's connection cap, idle limit and request time limit.
    pub admin_limits: crate::admin_limits::AdminLimits,
    /// Threads serving connections (each a single-threaded runtime).
    pub connection_threads: usize,
    /// How new connections are spread over those threads.
    pub connection_placement: crate::placement::Placement,
    pub value_bytes_max: usize,
    /// Expiry pager interval, in seconds.
    pub expiry_pager_interval_s: u64,
    /// Shortest time between the starts of two flusher commits (see
    /// `BucketConfig::flush_interval`).
    pub flush_interval: std::time::Duration,
    /// How long a write refused for want of memory in a durable bucket (the persistence
    /// backlog at its budget, or the quota full of unpersisted items) waits for the flusher
    /// or the pager to make room before TMPFAIL is answered. Zero: TMPFAIL at once.
    pub write_stall: std::time::Duration,
    /// Follow another node's bucket (KV address host:port): every vbucket here becomes a
    /// replica of that node's, streamed over DCP with the same credentials and bucket name.
    pub replica_of: Option<String>,
    /// Join the cluster one of whose members has this admin address (host:port). Only read
    /// the first time a data directory starts: afterwards the node is a member.
    pub join: Option<String>,
    /// Replicas per vbucket of the bucket, when this node creates the cluster (0..=3).
    pub replicas: u8,
    /// Bytes a DCP producer connection may hold queued for its streams (backfilled items
    /// and items read from memory not yet sent).
    pub dcp_backfill_buffer_bytes: usize,
    /// Fail a node over automatically once it has been unreachable this long (the metadata
    /// leader decides; see `auto_failover`). `None`: only manual failover.
    pub auto_failover_timeout: Option<std::time::Duration>,
    /// Source address of this node's connections to other nodes (replication, Raft, probes,
    /// rebalance calls); `None` lets the OS choose.
    pub source_ip: Option<std::net::IpAddr>,
}

impl ServerConfig {
    /// Defaults for a data directory, as `sluice server` uses them.
    pub fn new(data_dir: impl Into<PathBuf>) -> ServerConfig {
        ServerConfig {
            data_dir: data_dir.into(),
            bind_host: "127.0.0.1".into(),
            advertise_host: "127.0.0.1".into(),
            kv_port: 11210,
            admin_port: 8091,
            memcached_port: None,
            tls: None,
            kv_tls_port: 11207,
            admin_tls_port: 18091,
            cluster_encryption: ClusterEncryption::Off,
            cluster_ca: None,
            bucket: "default".into(),
            bucket_type: BucketType::Couchbase,
            memory_quota_mb: 256,
            index_memory_quota_mb: INDEX_MEMORY_QUOTA_MB_DEFAULT,
            services: sluice_cluster::Services::ALL,
            vbuckets: 1024,
            username: "Administrator".into(),
            password: "password".into(),
            connections_max: 10_000,
            system_connections: SYSTEM_CONNECTIONS_DEFAULT,
            unauth_body_bytes_max: UNAUTH_BODY_BYTES_MAX_DEFAULT,
            auth_timeout: AUTH_TIMEOUT_DEFAULT,
            idle_timeout: Some(IDLE_TIMEOUT_DEFAULT),
            admin_limits: crate::admin_limits::AdminLimits::default(),
            connection_threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            connection_placement: Default::default(),
            value_bytes_max: sluice_types::limits::VALUE_BYTES_MAX_DEFAULT,
            expiry_pager_interval_s: 10,
            flush_interval: sluice_engine::FLUSH_INTERVAL_DEFAULT,
            write_stall: WRITE_STALL_DEFAULT,
            replica_of: None,
            join: None,
            replicas: 0,
            dcp_backfill_buffer_bytes: 20 * 1024 * 1024,
            // The reference cluster manager's default.
            auto_failover_timeout: Some(std::time::Duration::from_secs(120)),
            source_ip: None,
        }
    }
}
