//! What can be proposed to the replicated metadata (`MetaCommand`), what applying it answers
//! (`Applied`), and why a command is refused (`Rejection`).
//!
//! Every command is checked against the state it is applied to, on every replica alike, so a
//! refusal is part of the replicated history: the command is in the log, changed nothing, and
//! every replica answers the same `Rejection`.
//!
//! Commands that publish a map carry the revision they were planned from (`expected_rev`):
//! two planners working from the same map cannot both publish, the second is refused with
//! `StaleRev` and plans again from the newer map (compare-and-set).

use crate::cluster_map::{ClusterMapError, Rev};
use crate::collections::ManifestError;
use crate::metadata::indexes::IndexRecord;
use crate::metadata::state::{BucketDef, BucketError};
use crate::metadata::users::UserRecord;
use crate::metadata::xdcr::{RemoteCluster, ReplicationDef, ReplicationSettings, XdcrCheckpoint};
use crate::node::{NodeId, NodeInfo};
use crate::vbmap::{Chain, MapError, VbMap};
use serde::{Deserialize, Serialize};
use sluice_types::DurabilityLevel;

/// A change to the cluster metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetaCommand {
    /// Hands out the next node id. A node is given its id before it starts its Raft node
    /// (which needs it), and `AddNode`s itself with it afterwards. An id whose node never
    /// arrives is simply never used.
    AllocateNodeId,
    /// Adds a node with an id `AllocateNodeId` handed out. It starts `Joining`.
    AddNode {
        info: NodeInfo,
    },
    /// Records that a node now listens elsewhere (it restarted on other ports): its table
    /// entry, and the map if it lists the node (as the next revision, so clients and peers
    /// learn it), carry the new address. The same address again changes nothing.
    MoveNode {
        info: NodeInfo,
    },
    /// Removes a node that holds no copy and is not in the map or a running rebalance. Its id
    /// is retired.
    RemoveNode {
        id: NodeId,
    },
    /// Creates a bucket. Defining the same bucket again changes nothing (so a retried
    /// proposal is harmless); a different one under the same name is refused. Not while a
    /// rebalance runs (it would miss the new bucket), and at most `BUCKETS_MAX`.
    DefineBucket {
        bucket: BucketDef,
    },
    /// Deletes a bucket and its map. Not while a rebalance runs.
    DeleteBucket {
        name: String,
    },
    /// Gives bucket `name` a new memory quota per node (above 0).
    SetBucketQuota {
        name: String,
        quota_bytes: u64,
    },
    /// Gives bucket `name` a new replica count (0..=`REPLICAS_MAX`). Its map keeps its
    /// chains: the next rebalance builds or drops the copies, as in Couchbase Server.
    SetBucketReplicas {
        name: String,
        replicas: u8,
    },
    /// Gives bucket `name` a new durability minimum (`None`: none), applied to the next
    /// write on every node. An ephemeral bucket's is at most `Majority`.
    SetBucketDurabilityMin {
        name: String,
        level: Option<DurabilityLevel>,
    },
    /// Publishes bucket `bucket`'s map as its next revision: the first one
    /// (`expected_rev: None`) or a replacement of revision `expected_rev`. `nodes` is the
    /// map's node list, in the order clients index it; their addresses come from the node
    /// table. Outside a rebalance, the listed nodes that were `Joining` become `Active` (the
    /// bucket's first placement).
    ///
    /// `bucket` is empty in commands logged before buckets were named: it then means the
    /// cluster's only bucket.
    SetMap {
        #[serde(default)]
        bucket: String,
        expected_rev: Option<Rev>,
        nodes: Vec<NodeId>,
        vbmap: VbMap,
    },
    /// Replaces some chains of bucket `bucket`'s map `expected_rev` and publishes the
    /// result as its next revision: one rebalance move without resending the whole map. At
    /// most `VBUCKETS_MAX` chains. An empty `bucket` as in `SetMap`.
    SetChains {
        #[serde(default)]
        bucket: String,
        expected_rev: Rev,
        chains: Vec<(u16, Chain)>,
    },
    /// Declares nodes failed, in every bucket at once (see `FailOverCommand`).
    FailOver(FailOverCommand),
    /// Records the start of a rebalance of every bucket onto `target`.
    StartRebalance {
        target: Vec<NodeId>,
    },
    /// Ends the running rebalance once every bucket's map lists only nodes of the target:
    /// target nodes become `Active`, every other node is ejected (removed, id retired).
    FinishRebalance {},
    /// Forgets the running rebalance; the maps stay as the moves so far left them.
    AbortRebalance,
    /// Creates a user, or replaces one's roles and credentials.
    PutUser {
        name: String,
        user: UserRecord,
    },
    /// Deletes a user.
    DeleteUser {
        name: String,
    },
    /// Creates scope `name` in bucket `bucket`'s collections manifest (see
    /// `collections::Manifest` for the rules every change below follows). Not idempotent, as
    /// in Couchbase: a scope that exists is refused with `ScopeExists`.
    CreateScope {
        bucket: String,
        name: String,
    },
    /// Drops scope `name` of bucket `bucket`, and every collection in it.
    DropScope {
        bucket: String,
        name: String,
    },
    /// Creates collection `name` in scope `scope` of bucket `bucket`; its documents live at
    /// most `max_ttl_s` seconds (0: no limit).
    CreateCollection {
        bucket: String,
        scope: String,
        name: String,
        max_ttl_s: u32,
    },
    /// Drops collection `name` of scope `scope` of bucket `bucket`.
    DropCollection {
        bucket: String,
        scope: String,
        name: String,
    },
    /// Sets the maxTTL of collection `name` of scope `scope` of bucket `bucket` (0: no
    /// limit). Added after the other collection commands, so logs written before still read.
    SetCollectionMaxTtl {
        bucket: String,
        scope: String,
        name: String,
        max_ttl_s: u32,
    },
    /// Adds index `name` to bucket `bucket`'s catalog (see `indexes`). Not idempotent, as
    /// in Couchbase: an index that exists is refused with `IndexExists`.
    CreateIndex {
        bucket: String,
        name: String,
        index: IndexRecord,
        /// The nodes to hold its copies (`WITH {"nodes": [...]}`): exactly `replicas` + 1
        /// distinct nodes running the index service, not failed over. `None`: the metadata
        /// chooses (`index_placement`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        on: Option<Vec<NodeId>>,
    },
    /// Removes index `name` from bucket `bucket`'s catalog.
    DropIndex {
        bucket: String,
        name: String,
    },
    /// Marks deferred indexes of bucket `bucket` built (all of `names`, or none).
    BuildIndexes {
        bucket: String,
        names: Vec<String>,
    },
    /// Gives the cluster its uuid, if it has none (see `xdcr`).
    SetClusterUuid {
        uuid: String,
    },
    /// Creates (`create`) or replaces a remote cluster reference.
    PutRemoteCluster {
        remote: RemoteCluster,
        create: bool,
    },
    DeleteRemoteCluster {
        name: String,
    },
    CreateReplication {
        replication: ReplicationDef,
    },
    SetReplicationPaused {
        id: String,
        paused: bool,
    },
    /// Replaces a replication's settings; its pipelines restart from their checkpoints.
    SetReplicationSettings {
        id: String,
        settings: ReplicationSettings,
    },
    /// Replaces a replication's filter (`None`: every change); with `restream`, its
    /// checkpoints are void and every vbucket streams again from zero.
    SetReplicationFilter {
        id: String,
        filter: Option<String>,
        restream: bool,
    },
    DeleteReplication {
        id: String,
    },
    /// A pipeline's report of where its vbuckets' streams reached (`xdcr`), made under
    /// the replication's re-stream count `restreams`.
    SaveXdcrCheckpoints {
        id: String,
        #[serde(default)]
        restreams: u64,
        checkpoints: Vec<XdcrCheckpoint>,
    },
}

/// Declares `nodes` failed: they become `FailedOver` and leave every map's node list, and
/// each bucket's map in `maps` (which must hold no copy on them, normally `fail_over`'s
/// output) is published as that bucket's next revision, all in one step. `maps` names every
/// bucket that has a map, once. A running rebalance is aborted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "FailOverWire")]
pub struct FailOverCommand {
    pub nodes: Vec<NodeId>,
    pub maps: Vec<BucketVbmap>,
}

/// One bucket's next map, planned from its revision `expected_rev`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketVbmap {
    pub bucket: String,
    pub expected_rev: Rev,
    pub vbmap: VbMap,
}

/// How a failover reads from JSON: today's `maps`, or the one bucket's `expected_rev` and
/// `vbmap` of commands logged before buckets were named (the bucket's name left empty:
/// the cluster's only bucket).
#[derive(Deserialize)]
struct FailOverWire {
    nodes: Vec<NodeId>,
    #[serde(default)]
    maps: Vec<BucketVbmap>,
    #[serde(default)]
    expected_rev: Option<Rev>,
    #[serde(default)]
    vbmap: Option<VbMap>,
}

impl From<FailOverWire> for FailOverCommand {
    fn from(w: FailOverWire) -> FailOverCommand {
        let mut maps = w.maps;
        if let (Some(expected_rev), Some(vbmap)) = (w.expected_rev, w.vbmap) {
            maps.push(BucketVbmap {
                bucket: String::new(),
                expected_rev,
                vbmap,
            });
        }
        FailOverCommand {
            nodes: w.nodes,
            maps,
        }
    }
}

/// What an applied command did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Applied {
    NodeIdAllocated {
        id: NodeId,
    },
    NodeAdded {
        id: NodeId,
    },
    /// `revs`: the map revisions that carry the new address, one per bucket whose map
    /// lists the node.
    NodeMoved {
        id: NodeId,
        revs: Vec<(String, Rev)>,
    },
    NodeRemoved {
        id: NodeId,
    },
    /// `created` is false when the same bucket was already defined.
    BucketDefined {
        created: bool,
    },
    BucketDeleted,
    /// `changed` is false when the bucket had that quota already.
    BucketQuotaSet {
        changed: bool,
    },
    /// `changed` is false when the bucket had that replica count already.
    BucketReplicasSet {
        changed: bool,
    },
    /// `changed` is false when the bucket had that durability minimum already.
    BucketDurabilityMinSet {
        changed: bool,
    },
    /// The bucket's map's new revision.
    MapSet {
        rev: Rev,
    },
    /// `revs`: each bucket's new map revision.
    FailedOver {
        revs: Vec<(String, Rev)>,
        rebalance_aborted: bool,
    },
    RebalanceStarted,
    RebalanceFinished {
        ejected: Vec<NodeId>,
    },
    RebalanceAborted,
    /// `created` is false when the user existed and was replaced.
    UserPut {
        created: bool,
    },
    UserDeleted,
    /// A bucket's collections manifest changed; `uid` is its new uid.
    ManifestChanged {
        uid: u64,
    },
    /// A bucket's index catalog changed.
    IndexesChanged,
    /// `set` is false when the cluster had a uuid already.
    ClusterUuidSet {
        set: bool,
    },
    /// A remote cluster reference or a replication changed.
    XdcrChanged,
}

/// Why a command changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum Rejection {
    #[error("{name:?} cannot be a user name: {reason}")]
    BadUserName { name: String, reason: String },
    #[error("there is no user {name:?}")]
    NoSuchUser { name: String },
    #[error("the cluster holds {max} users already")]
    TooManyUsers { max: usize },
    #[error("a user needs at least one role")]
    NoRoles,
    #[error("every node id has been handed out")]
    NodeIdsExhausted,
    #[error("node id {id} was never handed out; allocate one first")]
    NodeIdNotAllocated { id: NodeId },
    #[error("node id {id} belonged to a removed node and is never used again")]
    NodeIdRetired { id: NodeId },
    #[error("node {id} is already in the cluster")]
    NodeExists { id: NodeId },
    #[error("node {id} is not in the cluster")]
    UnknownNode { id: NodeId },
    #[error("node {id} is listed twice")]
    DuplicateNode { id: NodeId },
    #[error("{host}:{port} is already another node's address")]
    AddressInUse { host: String, port: u16 },
    #[error("a host is 1 to {max} bytes")]
    BadHost { max: usize },
    #[error("the cluster has its maximum of {max} nodes")]
    TooManyNodes { max: usize },
    #[error("node {id} has failed over")]
    NodeFailedOver { id: NodeId },
    #[error("node {id} is still in the map; rebalance it out first")]
    NodeInMap { id: NodeId },
    #[error("node {id} is in the running rebalance's target")]
    NodeInRebalance { id: NodeId },
    #[error("there is no bucket {name:?}")]
    NoSuchBucket { name: String },
    #[error("bucket {name} is already defined differently")]
    BucketExists { name: String },
    #[error("the cluster holds {max} buckets already")]
    TooManyBuckets { max: usize },
    #[error("the failover names bucket {name} twice")]
    DuplicateBucket { name: String },
    #[error("bucket {name} has a map: the failover must carry its next one")]
    MissingBucketMap { name: String },
    #[error(transparent)]
    Bucket(#[from] BucketError),
    #[error("the command was planned from bucket {bucket}'s map revision {expected:?}; the map is at {actual:?}")]
    StaleRev {
        bucket: String,
        expected: Option<Rev>,
        actual: Option<Rev>,
    },
    #[error("the map has {actual} vbuckets; bucket {bucket} has {expected}")]
    VbucketCount {
        bucket: String,
        expected: u16,
        actual: u16,
    },
    #[error("{count} chains in one command; at most {max}")]
    TooManyChains { count: usize, max: usize },
    #[error("bucket {name} has no map yet")]
    NoMapYet { name: String },
    #[error(transparent)]
    Map(#[from] MapError),
    #[error(transparent)]
    ClusterMap(#[from] ClusterMapError),
    #[error("no node given")]
    NoNodes,
    #[error("a rebalance is already running")]
    RebalanceRunning,
    #[error("no rebalance is running")]
    NoRebalance,
    #[error("bucket {bucket}'s map still lists {id}, which is not in the rebalance's target")]
    RebalanceIncomplete { bucket: String, id: NodeId },
    /// A collections change the bucket's manifest refused; its message is the one the SDKs
    /// read (see `collections::ManifestError`).
    #[error(transparent)]
    Collections(#[from] ManifestError),
    #[error("index {name} already exists on bucket {bucket}")]
    IndexExists { bucket: String, name: String },
    #[error("there is no index {name} on bucket {bucket}")]
    NoSuchIndex { bucket: String, name: String },
    #[error("a bucket holds at most {max} indexes")]
    TooManyIndexes { max: usize },
    #[error(
        "num_replica {replicas} asks for {} copies of the index, each on its own node, and \
         {nodes} node(s) running the index service may hold one",
        usize::from(*replicas) + 1
    )]
    IndexReplicas { replicas: u8, nodes: usize },
    #[error("the index cannot go on the nodes asked: {reason}")]
    IndexNodes { reason: String },
    #[error(
        "node {id} runs {had}, not {asked}: a node's services are fixed once it has joined \
         (start it with --services {had}, or remove it and add a new node)"
    )]
    ServicesChanged {
        id: NodeId,
        had: crate::services::Services,
        asked: crate::services::Services,
    },
    #[error("bad index: {reason}")]
    BadIndex { reason: String },
    #[error("bad remote cluster reference: {reason}")]
    BadRemote { reason: String },
    #[error("a remote cluster named {name:?} already exists")]
    RemoteExists { name: String },
    #[error("there is no remote cluster named {name:?}")]
    NoSuchRemote { name: String },
    #[error("remote cluster {name:?} is used by replications {replications:?}; delete them first")]
    RemoteInUse {
        name: String,
        replications: Vec<String>,
    },
    #[error("the cluster keeps at most {max} remote cluster references")]
    TooManyRemotes { max: usize },
    #[error("bad replication: {reason}")]
    BadReplication { reason: String },
    #[error("replication {id} already exists")]
    ReplicationExists { id: String },
    #[error("there is no replication {id}")]
    NoSuchReplication { id: String },
    #[error("the cluster runs at most {max} replications")]
    TooManyReplications { max: usize },
}

/// The state machine's answer to a command: what it did, or why it changed nothing.
pub type MetaResponse = Result<Applied, Rejection>;
