//! `ClusterState`: everything the cluster agrees on, as the replicated state machine holds it.
//!
//! Only `apply` (in `apply.rs`) changes it, so every replica that applied the same commands
//! holds the same state. What must stay true (`check`, asserted after every applied command
//! and run on every state read back from a snapshot):
//! - every node id is below `next_node_id`, and no retired id is a node again;
//! - a node's `info.id` is its key, and no two nodes share a KV or admin address;
//! - a map exists only with a bucket, has the bucket's vbucket count, lists only known nodes
//!   that have not failed over, with the addresses the node table holds;
//! - a rebalance's target nodes are known and have not failed over.
//!
//! A node's life (`NodeStatus`):
//!
//! ```text
//!  AddNode ──► Joining ──(map set outside a rebalance, or FinishRebalance with it in
//!                 │        the target)──► Active
//!                 │                         │
//!                 └──────── FailOver ───────┴──► FailedOver
//!  Joining, Active or FailedOver ──(RemoveNode, or FinishRebalance without it in the
//!                                   target; it must hold no copy)──► retired (gone)
//! ```

use crate::cluster_map::{BucketInfo, BucketKind, ClusterMap, Rev};
use crate::limits::{REPLICAS_MAX, VBUCKETS_MAX};
use crate::node::{NodeId, NodeInfo};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Where a node stands in the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    /// Added, but no rebalance has taken it in yet: it may hold copies of an in-progress
    /// rebalance, but it is not yet part of the balanced node set.
    Joining,
    /// Part of the balanced node set.
    Active,
    /// Declared failed: its copies were dropped from the map. A rebalance that leaves it out
    /// of its target ejects it.
    FailedOver,
}

/// One node of the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeEntry {
    pub info: NodeInfo,
    pub status: NodeStatus,
}

/// The bucket. Sluice serves one bucket per cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketDef {
    pub name: String,
    /// Chosen by whoever proposes the bucket (the state machine has no randomness); clients
    /// see it in the map's `uuid` and bucket URIs.
    pub uuid: String,
    pub kind: BucketKind,
    /// Replica copies per vbucket, 0..=`REPLICAS_MAX`.
    pub replicas: u8,
    /// Fixed for the bucket's life: the SDKs hash keys onto it.
    pub vbuckets: u16,
    /// Memory quota per node.
    pub quota_bytes: u64,
}

/// Longest bucket name; Couchbase's limit.
pub const BUCKET_NAME_BYTES_MAX: usize = 100;
/// Longest bucket uuid (32 hex digits in practice).
pub const BUCKET_UUID_BYTES_MAX: usize = 64;
/// Longest node host name (DNS's limit).
pub const HOST_BYTES_MAX: usize = 255;

/// A bucket definition that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum BucketError {
    #[error("a bucket name is 1 to {max} bytes; this one is {len}")]
    NameLength { len: usize, max: usize },
    #[error("a bucket name has only letters, digits and `_ . % -`, and does not start with `.`")]
    NameChars,
    #[error("a bucket uuid is 1 to {max} letters, digits or `-`")]
    Uuid { max: usize },
    #[error("{replicas} replicas: a bucket has at most {max}")]
    Replicas { replicas: u8, max: u8 },
    #[error("{count} vbuckets: a bucket has 1 to {max}")]
    Vbuckets { count: u16, max: u16 },
    #[error("a bucket needs a memory quota above 0 bytes")]
    ZeroQuota,
}

impl BucketDef {
    /// Checks the definition's syntax and limits.
    pub fn validate(&self) -> Result<(), BucketError> {
        let len = self.name.len();
        if len == 0 || len > BUCKET_NAME_BYTES_MAX {
            return Err(BucketError::NameLength {
                len,
                max: BUCKET_NAME_BYTES_MAX,
            });
        }
        let name_char = |c: char| c.is_ascii_alphanumeric() || "_.%-".contains(c);
        if self.name.starts_with('.') || !self.name.chars().all(name_char) {
            return Err(BucketError::NameChars);
        }
        let uuid_char = |c: char| c.is_ascii_alphanumeric() || c == '-';
        let uuid_len = self.uuid.len();
        if uuid_len == 0 || uuid_len > BUCKET_UUID_BYTES_MAX || !self.uuid.chars().all(uuid_char) {
            return Err(BucketError::Uuid {
                max: BUCKET_UUID_BYTES_MAX,
            });
        }
        if self.replicas > REPLICAS_MAX {
            return Err(BucketError::Replicas {
                replicas: self.replicas,
                max: REPLICAS_MAX,
            });
        }
        if self.vbuckets == 0 || self.vbuckets > VBUCKETS_MAX {
            return Err(BucketError::Vbuckets {
                count: self.vbuckets,
                max: VBUCKETS_MAX,
            });
        }
        if self.quota_bytes == 0 {
            return Err(BucketError::ZeroQuota);
        }
        Ok(())
    }

    /// What the map renderer needs to know of the bucket.
    pub fn info(&self) -> BucketInfo<'_> {
        BucketInfo {
            name: &self.name,
            uuid: &self.uuid,
            kind: self.kind,
        }
    }
}

/// A rebalance that was started and has not finished or been aborted. The executor keeps
/// its own progress (which moves are done) in the map itself: each finished move is a new
/// map revision, so a new executor resumes by planning from the current map to `target`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RebalanceRecord {
    /// The node set the bucket is being rebalanced onto, in the order given.
    pub target: Vec<NodeId>,
    /// The map revision in force when it started (`None`: no map yet).
    pub started_at: Option<Rev>,
}

/// The replicated cluster metadata. Deserializing does not check the invariants (the
/// fields are read as they are): whoever reads a state from disk or the network calls
/// `check` before using it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterState {
    /// The id `AllocateNodeId` hands out next. Ids are never handed out twice, so a node that
    /// left and a newcomer can never be mistaken for each other (see `node`).
    pub(crate) next_node_id: u32,
    pub(crate) nodes: BTreeMap<NodeId, NodeEntry>,
    /// Ids of nodes that were removed; they may never be added again.
    pub(crate) retired: BTreeSet<NodeId>,
    pub(crate) bucket: Option<BucketDef>,
    pub(crate) map: Option<ClusterMap>,
    pub(crate) rebalance: Option<RebalanceRecord>,
    /// The users, by name (states saved before users existed have none).
    #[serde(default)]
    pub(crate) users: BTreeMap<String, crate::metadata::users::UserRecord>,
}

/// A state that breaks one of the invariants in the module comment: corrupt input, or a bug.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("node {id} is at or above the next id to hand out ({next})")]
    UnallocatedNode { id: NodeId, next: u32 },
    #[error("node {id} is both a node and retired")]
    RetiredNode { id: NodeId },
    #[error("the node table lists {key} with the info of {id}")]
    MismatchedId { key: NodeId, id: NodeId },
    #[error("two nodes share the address {host}:{port}")]
    SharedAddress { host: String, port: u16 },
    #[error("there is a map but no bucket")]
    MapWithoutBucket,
    #[error("the map has {actual} vbuckets; the bucket has {expected}")]
    MapVbuckets { expected: u16, actual: u16 },
    #[error("the map lists {id}, which is {problem}")]
    MapNode { id: NodeId, problem: &'static str },
    #[error("the rebalance targets {id}, which is {problem}")]
    RebalanceNode { id: NodeId, problem: &'static str },
}

impl ClusterState {
    /// The state of a cluster that has not done anything yet.
    pub fn new() -> ClusterState {
        ClusterState::default()
    }

    /// The id the next `AllocateNodeId` hands out.
    pub fn next_node_id(&self) -> NodeId {
        NodeId(self.next_node_id)
    }

    /// Nodes in id order.
    pub fn nodes(&self) -> &BTreeMap<NodeId, NodeEntry> {
        &self.nodes
    }

    pub fn node(&self, id: NodeId) -> Option<&NodeEntry> {
        self.nodes.get(&id)
    }

    /// Nodes with `status`, in id order.
    pub fn nodes_with(&self, status: NodeStatus) -> Vec<NodeId> {
        self.nodes
            .values()
            .filter(|n| n.status == status)
            .map(|n| n.info.id)
            .collect()
    }

    /// Ids of removed nodes: never valid again.
    pub fn retired(&self) -> &BTreeSet<NodeId> {
        &self.retired
    }

    pub fn bucket(&self) -> Option<&BucketDef> {
        self.bucket.as_ref()
    }

    /// The users, by name.
    pub fn users(&self) -> &BTreeMap<String, crate::metadata::users::UserRecord> {
        &self.users
    }

    /// The map in force, once a bucket has one.
    pub fn map(&self) -> Option<&ClusterMap> {
        self.map.as_ref()
    }

    /// The revision of the map in force (`None` before the first map).
    pub fn rev(&self) -> Option<Rev> {
        self.map.as_ref().map(ClusterMap::rev)
    }

    pub fn rebalance(&self) -> Option<&RebalanceRecord> {
        self.rebalance.as_ref()
    }

    /// Checks every invariant in the module comment.
    pub fn check(&self) -> Result<(), StateError> {
        self.check_nodes()?;
        self.check_map()?;
        self.check_rebalance()
    }

    fn check_nodes(&self) -> Result<(), StateError> {
        let mut kv = BTreeSet::new();
        let mut admin = BTreeSet::new();
        for (&key, entry) in &self.nodes {
            let id = entry.info.id;
            if id != key {
                return Err(StateError::MismatchedId { key, id });
            }
            if id.0 >= self.next_node_id {
                return Err(StateError::UnallocatedNode {
                    id,
                    next: self.next_node_id,
                });
            }
            if self.retired.contains(&id) {
                return Err(StateError::RetiredNode { id });
            }
            let host = entry.info.host.as_str();
            for (seen, port) in [
                (&mut kv, entry.info.kv_port),
                (&mut admin, entry.info.admin_port),
            ] {
                if !seen.insert((host, port)) {
                    return Err(StateError::SharedAddress {
                        host: host.to_string(),
                        port,
                    });
                }
            }
        }
        Ok(())
    }

    fn check_map(&self) -> Result<(), StateError> {
        let Some(map) = &self.map else {
            return Ok(());
        };
        let bucket = self.bucket.as_ref().ok_or(StateError::MapWithoutBucket)?;
        let actual = map.vbmap().num_vbuckets();
        if actual != bucket.vbuckets {
            return Err(StateError::MapVbuckets {
                expected: bucket.vbuckets,
                actual,
            });
        }
        for info in map.nodes() {
            let problem = match self.nodes.get(&info.id) {
                None => "not a node",
                Some(n) if n.status == NodeStatus::FailedOver => "failed over",
                Some(n) if n.info != *info => "listed with another address",
                Some(_) => continue,
            };
            return Err(StateError::MapNode {
                id: info.id,
                problem,
            });
        }
        Ok(())
    }

    fn check_rebalance(&self) -> Result<(), StateError> {
        let Some(rebalance) = &self.rebalance else {
            return Ok(());
        };
        for &id in &rebalance.target {
            let problem = match self.nodes.get(&id) {
                None => "not a node",
                Some(n) if n.status == NodeStatus::FailedOver => "failed over",
                Some(_) => continue,
            };
            return Err(StateError::RebalanceNode { id, problem });
        }
        Ok(())
    }
}
