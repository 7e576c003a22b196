//! How a meta node is configured, and the limits every part of it keeps.

use crate::secret::ClusterSecret;
use sluice_cluster::NodeId;
use std::path::PathBuf;
use std::time::Duration;

/// One meta node: its identity, where it listens, where it keeps its log, and its timing.
#[derive(Debug, Clone)]
pub struct MetaConfig {
    /// The cluster node id, also this node's Raft id (`types::raft_id`). It must stay the
    /// same for the life of `dir`: the directory records it and refuses another.
    pub node_id: NodeId,
    /// `host:port` other nodes dial for this node's Raft RPCs (its admin HTTP listener).
    pub admin_addr: String,
    /// The directory of the fjall database holding the log, the vote and the last snapshot,
    /// e.g. `<data-dir>/meta`. Created if missing.
    pub dir: PathBuf,
    /// How often the leader sends heartbeats; also the timeout of one AppendEntries RPC.
    pub heartbeat_interval: Duration,
    /// A follower that has heard no leader for a random time in this range starts an
    /// election. The minimum must be several heartbeats, or a slow fsync causes elections.
    pub election_timeout_min: Duration,
    pub election_timeout_max: Duration,
    /// How long `propose`, `add_node` and `remove_node` wait for a leader and a quorum
    /// before giving up with `MetaError::Timeout`.
    pub request_timeout: Duration,
    /// A snapshot is taken after this many log entries have been applied since the last
    /// one; the entries it covers are then purged, but for the last `log_kept_after_snapshot`.
    pub snapshot_every_entries: u64,
    /// Entries kept behind the last snapshot, so a briefly lagging follower catches up from
    /// the log instead of receiving the whole snapshot.
    pub log_kept_after_snapshot: u64,
    /// How this node's connections to its peers are opened. `source`: their source address
    /// (`None`: the OS chooses); a node with its own address gives peers, and a
    /// fault-injecting proxy between them, a way to tell its connections from another
    /// node's. `tls`: the cluster encrypts its control traffic, so every call to a peer
    /// goes to the peer's TLS admin port (from the node table) and verifies its
    /// certificate against these roots, and a join dials its member over TLS.
    pub dial: sluice_client::net::Dial,
    /// The cluster's secret: this node proves it on every RPC to a peer, and hands it to a
    /// node it admits (see `join`).
    pub secret: ClusterSecret,
}

impl MetaConfig {
    /// A config with the default timing: heartbeats every 100 ms, elections after 1–2 s of
    /// silence (tolerates a slow disk or a loaded machine), requests given up after 10 s.
    pub fn new(
        node_id: NodeId,
        admin_addr: impl Into<String>,
        dir: impl Into<PathBuf>,
        secret: ClusterSecret,
    ) -> Self {
        MetaConfig {
            node_id,
            admin_addr: admin_addr.into(),
            dir: dir.into(),
            heartbeat_interval: Duration::from_millis(100),
            election_timeout_min: Duration::from_millis(1000),
            election_timeout_max: Duration::from_millis(2000),
            request_timeout: Duration::from_secs(10),
            snapshot_every_entries: 1000,
            log_kept_after_snapshot: 200,
            dial: Default::default(),
            secret,
        }
    }
}

/// Most log entries in one AppendEntries RPC. A full 1024-vbucket map with 3 replicas is
/// about 20 KiB of JSON, so this keeps a request near 1 MiB at worst.
pub(crate) const ENTRIES_PER_APPEND_MAX: u64 = 64;

/// Snapshot bytes sent in one InstallSnapshot RPC. The JSON encoding of the chunk
/// (`Vec<u8>` as numbers) is up to 4 bytes per byte, so this stays well inside
/// `RPC_BODY_BYTES_MAX`.
pub(crate) const SNAPSHOT_CHUNK_BYTES: u64 = 512 * 1024;

/// Largest snapshot a node accepts or loads: far above any real metadata (128 nodes and a
/// 1024-vbucket map are a few tens of KiB), and small enough to hold in memory.
pub(crate) const SNAPSHOT_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Largest request body the Raft and forwarding routes accept, and largest response body
/// the client reads.
pub const RPC_BODY_BYTES_MAX: usize = 8 * 1024 * 1024;

/// Raft and forwarding requests served at once; more are answered 503 (the sender backs off
/// and retries). A cluster of `NODES_MAX` nodes sends far fewer.
pub(crate) const RPC_CONCURRENT_MAX: usize = 64;

/// Longest wait for a TCP connection to a peer. Loopback or LAN: a peer that does not
/// accept within this is treated as unreachable.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// Longest an InstallSnapshot chunk may take to be written on the follower.
pub(crate) const SNAPSHOT_CHUNK_TIMEOUT: Duration = Duration::from_secs(5);

/// Pause before asking again who the leader is, while an election is going on.
pub(crate) const LEADER_POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Longest `shutdown` waits for Raft's tasks to let go of the database before reporting
/// that it is still open.
pub(crate) const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

/// fjall's memory for the metadata: the log is small and read mostly by replication.
pub(crate) const DB_CACHE_BYTES: u64 = 4 * 1024 * 1024;
pub(crate) const DB_MEMTABLE_BYTES: u64 = 4 * 1024 * 1024;
