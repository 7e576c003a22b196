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
use crate::metadata::state::{BucketDef, BucketError};
use crate::metadata::users::UserRecord;
use crate::node::{NodeId, NodeInfo};
use crate::vbmap::{Chain, MapError, VbMap};
use serde::{Deserialize, Serialize};

/// A change to the cluster metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetaCommand {
    /// Hands out the next node id. A node is given its id before it starts its Raft node
    /// (which needs it), and `AddNode`s itself with it afterwards. An id whose node never
    /// arrives is simply never used.
    AllocateNodeId,
    /// Adds a node with an id `AllocateNodeId` handed out. It starts `Joining`.
    AddNode { info: NodeInfo },
    /// Records that a node now listens elsewhere (it restarted on other ports): its table
    /// entry, and the map if it lists the node (as the next revision, so clients and peers
    /// learn it), carry the new address. The same address again changes nothing.
    MoveNode { info: NodeInfo },
    /// Removes a node that holds no copy and is not in the map or a running rebalance. Its id
    /// is retired.
    RemoveNode { id: NodeId },
    /// Defines the cluster's bucket. Defining the same bucket again changes nothing (so a
    /// retried proposal is harmless); a different one is refused.
    DefineBucket { bucket: BucketDef },
    /// Publishes the map as the next revision: the first one (`expected_rev: None`) or a
    /// replacement of revision `expected_rev`. `nodes` is the map's node list, in the order
    /// clients index it; their addresses come from the node table. Outside a rebalance, the
    /// listed nodes that were `Joining` become `Active` (the bucket's first placement).
    SetMap {
        expected_rev: Option<Rev>,
        nodes: Vec<NodeId>,
        vbmap: VbMap,
    },
    /// Replaces some chains of map `expected_rev` and publishes the result as the next
    /// revision: one rebalance move without resending the whole map. At most `VBUCKETS_MAX`
    /// chains.
    SetChains {
        expected_rev: Rev,
        chains: Vec<(u16, Chain)>,
    },
    /// Declares `nodes` failed: they become `FailedOver` and leave the map's node list, and
    /// `vbmap` (which must hold no copy on them, normally `fail_over`'s output) is published
    /// as the next revision, in one step. Before the first map, `expected_rev` and `vbmap`
    /// are `None`. A running rebalance is aborted.
    FailOver {
        nodes: Vec<NodeId>,
        expected_rev: Option<Rev>,
        vbmap: Option<VbMap>,
    },
    /// Records the start of a rebalance onto `target`, planned from map `expected_rev`.
    StartRebalance {
        target: Vec<NodeId>,
        expected_rev: Option<Rev>,
    },
    /// Ends the running rebalance once map `expected_rev` lists exactly nodes of the target:
    /// target nodes become `Active`, every other node is ejected (removed, id retired).
    FinishRebalance { expected_rev: Option<Rev> },
    /// Forgets the running rebalance; the map stays as the moves so far left it.
    AbortRebalance,
    /// Creates a user, or replaces one's roles and credentials.
    PutUser { name: String, user: UserRecord },
    /// Deletes a user.
    DeleteUser { name: String },
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
    /// `rev`: the map revision that carries the new address, if the map lists the node.
    NodeMoved {
        id: NodeId,
        rev: Option<Rev>,
    },
    NodeRemoved {
        id: NodeId,
    },
    /// `created` is false when the same bucket was already defined.
    BucketDefined {
        created: bool,
    },
    /// The map's new revision.
    MapSet {
        rev: Rev,
    },
    FailedOver {
        rev: Option<Rev>,
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
    #[error("no bucket is defined")]
    NoBucket,
    #[error("bucket {name} is already defined differently")]
    BucketExists { name: String },
    #[error(transparent)]
    Bucket(#[from] BucketError),
    #[error("the command was planned from map revision {expected:?}; the map is at {actual:?}")]
    StaleRev {
        expected: Option<Rev>,
        actual: Option<Rev>,
    },
    #[error("the map has {actual} vbuckets; the bucket has {expected}")]
    VbucketCount { expected: u16, actual: u16 },
    #[error("{count} chains in one command; at most {max}")]
    TooManyChains { count: usize, max: usize },
    #[error("the cluster has a map: the command must carry the revision and map it replaces")]
    MapExpected,
    #[error("the cluster has no map yet: the command cannot carry a revision or map")]
    NoMapYet,
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
    #[error("the map still lists {id}, which is not in the rebalance's target")]
    RebalanceIncomplete { id: NodeId },
}

/// The state machine's answer to a command: what it did, or why it changed nothing.
pub type MetaResponse = Result<Applied, Rejection>;
