//! The client's errors: what went wrong talking to the server, typed so callers can react.

use sluice_proto::{FrameError, Status};
use sluice_types::VbId;
use std::sync::Arc;

use crate::vbucket_map::MapVersion;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The server closed the connection (between frames or in the middle of one).
    #[error("the server closed the connection")]
    Closed,
    /// The server sent bytes that are not a valid frame; the connection cannot be used further.
    #[error("bad frame from the server: {0}")]
    Frame(#[from] FrameError),
    /// The server answered with a non-success status.
    #[error("server answered {0:?}: {desc}", desc = .0.description())]
    Status(Status),
    /// The server answered with a status this client does not know.
    #[error("server answered unknown status 0x{0:04x}")]
    UnknownStatus(u16),
    /// A well-framed response that does not fit the request (wrong opaque, opcode or body).
    #[error("unexpected response: {0}")]
    Unexpected(&'static str),
    /// A typed operation was called while pipelined requests are still unanswered; their
    /// responses would be mistaken for its own.
    #[error("{in_flight} pipelined request(s) still in flight; read their responses first")]
    PipelineBusy { in_flight: usize },
    /// SASL failed on our side, e.g. the server's SCRAM signature did not verify.
    #[error("authentication failed: {0}")]
    Auth(#[from] sluice_sasl::AuthError),
    #[error("cluster config is not valid JSON: {0}")]
    ConfigJson(#[from] serde_json::Error),
    #[error("cluster config has no usable vBucketServerMap.vBucketMap")]
    NoVbucketMap,
}

impl ClientError {
    /// The server's status, if this error is one.
    pub fn status(&self) -> Option<Status> {
        match self {
            ClientError::Status(s) => Some(*s),
            _ => None,
        }
    }

    /// A miss (KEY_ENOENT): common enough to deserve a name.
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(Status::KeyEnoent)
    }
}

/// A cluster map (terse bucket config) that cannot be routed with.
#[derive(Debug, thiserror::Error)]
pub enum MapError {
    #[error("cluster map is not valid JSON of the expected shape: {0}")]
    Json(#[from] serde_json::Error),
    #[error("cluster map has no `{0}`")]
    MissingField(&'static str),
    #[error("cluster map revision {epoch}:{rev} is negative")]
    NegativeRevision { epoch: i64, rev: i64 },
    #[error("cluster map uses node locator {0:?}; only \"vbucket\" buckets can be routed")]
    NotVbucketLocator(String),
    #[error("cluster map hashes keys with {0:?}; only CRC is supported")]
    UnsupportedHash(String),
    #[error("cluster map has {0} replicas; 0..=3 are possible")]
    BadReplicaCount(i64),
    #[error("cluster map lists no servers")]
    NoServers,
    #[error("cluster map lists {count} servers, more than {max}")]
    TooManyServers { count: usize, max: usize },
    #[error("cluster map server {index} is {addr:?}, not host:port")]
    BadServerAddress { index: usize, addr: String },
    #[error("cluster map lists server {0} twice")]
    DuplicateServer(String),
    #[error("cluster map nodesExt[{index}] has no services")]
    NodesExtWithoutServices { index: usize },
    #[error("cluster map nodesExt[{index}] has {service} port {port}")]
    BadPort {
        index: usize,
        service: &'static str,
        port: i64,
    },
    #[error("cluster map server {0} has no nodesExt entry")]
    ServerNotInNodesExt(String),
    #[error("cluster map has no vbuckets")]
    NoVbuckets,
    #[error("cluster map has {count} vbuckets, more than {max}")]
    TooManyVbuckets { count: usize, max: usize },
    #[error("cluster map row for {vb} has {len} entries, not {expected} (1 + numReplicas)")]
    BadRowLength {
        vb: VbId,
        len: usize,
        expected: usize,
    },
    #[error("cluster map row for {vb} names server {index}, which is not listed")]
    BadNodeIndex { vb: VbId, index: i64 },
    #[error("cluster map row for {vb} puts two copies on server {index}")]
    DuplicateCopy { vb: VbId, index: i64 },
}

/// Why an operation of the cluster client was retried; the last one is reported when the
/// retries run out.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RetryReason {
    /// The node does not hold the vbucket (in the needed state) any more.
    #[error("{node} answered NOT_MY_VBUCKET for {vb}")]
    NotMyVbucket { vb: VbId, node: String },
    /// The map has no node for the vbucket's active copy (lost until a failover).
    #[error("the map (rev {version}) has no active copy of {vb}")]
    NoActive { vb: VbId, version: MapVersion },
    /// Connecting to the node, or the connection, failed.
    #[error("{node} is unreachable: {error}")]
    Unreachable {
        node: String,
        #[source]
        error: Arc<ClientError>,
    },
    /// The node asked to retry later (ETMPFAIL, EBUSY).
    #[error("{node} answered {status:?}")]
    Temporary { node: String, status: Status },
}

/// What a [`ClusterClient`](crate::ClusterClient) operation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("no seed address given")]
    NoSeeds,
    #[error("the connect options name no bucket; a cluster client routes by a bucket's map")]
    NoBucket,
    /// No seed answered with a usable map.
    #[error("could not bootstrap from any of {seeds} seed(s); last: {last}")]
    Bootstrap {
        seeds: usize,
        #[source]
        last: Box<ClusterError>,
    },
    #[error(transparent)]
    Map(#[from] MapError),
    /// A final answer or failure from a node: a status such as KEY_ENOENT or KEY_EEXISTS, or
    /// a malformed response.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// No answer within the operation timeout. For a mutation the outcome is unknown.
    #[error("no answer from {node} within the timeout ({elapsed_ms} ms, {attempts} attempt(s))")]
    Timeout {
        node: String,
        attempts: u32,
        elapsed_ms: u64,
    },
    /// Every retry failed, or the time for them ran out.
    #[error("gave up after {attempts} attempt(s) in {elapsed_ms} ms; last: {last}")]
    RetriesExhausted {
        attempts: u32,
        elapsed_ms: u64,
        #[source]
        last: RetryReason,
    },
    #[error("replica {index} asked for, but the bucket has {replicas} replica(s)")]
    NoSuchReplica { index: u8, replicas: u8 },
    /// A key that does not fit with its collection's prefix (or is empty).
    #[error("key not sent: {0}")]
    BadKey(sluice_types::collection::KeyError),
    /// A collection other than the default was named on a connection that did not
    /// negotiate collections.
    #[error("collection {0} named, but the connection did not negotiate collections")]
    NoCollections(sluice_types::CollectionId),
    /// The map has no node in that replica slot (e.g. after a failover).
    #[error("{vb} has no replica {index} in map rev {version}")]
    ReplicaUnavailable {
        vb: VbId,
        index: u8,
        version: MapVersion,
    },
}

impl ClusterError {
    /// The server's final status, if this error is one.
    pub fn status(&self) -> Option<Status> {
        match self {
            ClusterError::Client(e) => e.status(),
            _ => None,
        }
    }

    /// A miss (KEY_ENOENT).
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(Status::KeyEnoent)
    }

    /// The mutation may or may not have been applied (its answer never came), or made
    /// durable (SYNC_WRITE_AMBIGUOUS: the durability wait timed out).
    pub fn is_ambiguous(&self) -> bool {
        matches!(self, ClusterError::Timeout { .. })
            || self.status() == Some(Status::SyncWriteAmbiguous)
    }
}
