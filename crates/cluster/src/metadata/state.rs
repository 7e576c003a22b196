//! `ClusterState`: everything the cluster agrees on, as the replicated state machine holds it.
//!
//! Only `apply` (in `apply.rs`) changes it, so every replica that applied the same commands
//! holds the same state. What must stay true (`check`, asserted after every applied command
//! and run on every state read back from a snapshot):
//! - every node id is below `next_node_id`, and no retired id is a node again;
//! - a node's `info.id` is its key, and no two nodes share a KV or admin address;
//! - each bucket is filed under its own name and is valid; there are at most `BUCKETS_MAX`;
//! - a bucket's map has the bucket's vbucket count and lists only known nodes that have not
//!   failed over, with the addresses the node table holds;
//! - a bucket's collections manifest holds its own invariants (`Manifest::check`);
//! - a rebalance's target nodes are known and have not failed over;
//! - every replication to a remote cluster names a known reference and bucket (`xdcr`).
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
use crate::collections::{Manifest, ManifestInvariant};
use crate::limits::{REPLICAS_MAX, VBUCKETS_MAX};
use crate::node::{NodeId, NodeInfo};
use serde::{Deserialize, Serialize};
use sluice_types::DurabilityLevel;
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

/// A bucket's definition: what it was created with, and what an edit changes.
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
    /// The bucket's durability minimum (Couchbase's `durabilityMinLevel`): every write is
    /// made at least this durable, a plain write becoming a SyncWrite. `None`: writes are as
    /// durable as their clients ask. An ephemeral bucket can only ask for `Majority`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durability_min: Option<DurabilityLevel>,
    /// How versions from other clusters (`*_WITH_META`) are judged (Couchbase's
    /// `conflictResolutionType`), fixed at creation.
    #[serde(default, skip_serializing_if = "ConflictMode::is_seqno")]
    pub conflict_resolution: ConflictMode,
}

/// A bucket's conflict resolution: by revision count (`seqno`, the default) or last write
/// wins (`lww`, CAS first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConflictMode {
    #[default]
    Seqno,
    Lww,
}

impl ConflictMode {
    /// The word Couchbase's REST uses.
    pub fn as_str(self) -> &'static str {
        match self {
            ConflictMode::Seqno => "seqno",
            ConflictMode::Lww => "lww",
        }
    }

    pub fn parse(word: &str) -> Option<ConflictMode> {
        match word {
            "seqno" => Some(ConflictMode::Seqno),
            "lww" => Some(ConflictMode::Lww),
            _ => None,
        }
    }

    fn is_seqno(&self) -> bool {
        *self == ConflictMode::Seqno
    }
}

/// Most buckets in one cluster (Couchbase's default limit).
pub const BUCKETS_MAX: usize = 30;
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
    #[error("an ephemeral bucket persists nothing: its durability minimum is at most majority, not {level}")]
    EphemeralDurability { level: String },
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
        match self.durability_min {
            Some(level) if self.kind == BucketKind::Ephemeral && level.persist_active() => {
                Err(BucketError::EphemeralDurability {
                    level: level.name().into(),
                })
            }
            _ => Ok(()),
        }
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

/// One bucket: its definition, once placed its map, and its collections. Each bucket's map
/// has its own revisions, so a move in one bucket never makes another bucket's plan stale.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketEntry {
    pub def: BucketDef,
    pub map: Option<ClusterMap>,
    /// The bucket's scopes and collections. States saved before collections read as the
    /// default manifest (`_default._default` only), which is what those buckets held.
    #[serde(default)]
    pub manifest: Manifest,
    /// The bucket's secondary indexes, by name (see `indexes`). States saved before the
    /// catalog read as none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub indexes: BTreeMap<String, crate::metadata::indexes::IndexRecord>,
}

/// A rebalance that was started and has not finished or been aborted. It covers every
/// bucket. The executor keeps its own progress (which moves are done) in the maps
/// themselves: each finished move is a new map revision, so a new executor resumes by
/// planning from the current maps to `target`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RebalanceRecord {
    /// The node set the buckets are being rebalanced onto, in the order given.
    pub target: Vec<NodeId>,
}

/// The replicated cluster metadata. Deserializing does not check the invariants (the
/// fields are read as they are): whoever reads a state from disk or the network calls
/// `check` before using it. States written before buckets were named (one `bucket` and one
/// `map`) read as that one bucket (see `StateWire`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "StateWire")]
pub struct ClusterState {
    /// The id `AllocateNodeId` hands out next. Ids are never handed out twice, so a node that
    /// left and a newcomer can never be mistaken for each other (see `node`).
    pub(crate) next_node_id: u32,
    pub(crate) nodes: BTreeMap<NodeId, NodeEntry>,
    /// Ids of nodes that were removed; they may never be added again.
    pub(crate) retired: BTreeSet<NodeId>,
    /// The buckets, by name.
    pub(crate) buckets: BTreeMap<String, BucketEntry>,
    pub(crate) rebalance: Option<RebalanceRecord>,
    pub(crate) users: BTreeMap<String, crate::metadata::users::UserRecord>,
    /// The cluster's own uuid (`xdcr::set_cluster_uuid`): empty until a node proposed one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) uuid: String,
    /// Remote cluster references, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) remotes: BTreeMap<String, crate::metadata::xdcr::RemoteCluster>,
    /// Replications to remote clusters, by id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) replications: BTreeMap<String, crate::metadata::xdcr::ReplicationDef>,
    /// Each replication's checkpoints, by id and vbucket.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) xdcr_checkpoints:
        BTreeMap<String, BTreeMap<u16, crate::metadata::xdcr::XdcrCheckpoint>>,
}

/// How a state reads from JSON: today's fields, and the single `bucket` and `map` of states
/// saved before there were many buckets (users came later still, so they may be missing).
#[derive(Deserialize)]
struct StateWire {
    next_node_id: u32,
    nodes: BTreeMap<NodeId, NodeEntry>,
    retired: BTreeSet<NodeId>,
    #[serde(default)]
    buckets: BTreeMap<String, BucketEntry>,
    #[serde(default)]
    bucket: Option<BucketDef>,
    #[serde(default)]
    map: Option<ClusterMap>,
    rebalance: Option<RebalanceRecord>,
    #[serde(default)]
    users: BTreeMap<String, crate::metadata::users::UserRecord>,
    #[serde(default)]
    uuid: String,
    #[serde(default)]
    remotes: BTreeMap<String, crate::metadata::xdcr::RemoteCluster>,
    #[serde(default)]
    replications: BTreeMap<String, crate::metadata::xdcr::ReplicationDef>,
    #[serde(default)]
    xdcr_checkpoints: BTreeMap<String, BTreeMap<u16, crate::metadata::xdcr::XdcrCheckpoint>>,
}

impl From<StateWire> for ClusterState {
    fn from(w: StateWire) -> ClusterState {
        let mut buckets = w.buckets;
        // A legacy map without a bucket breaks an invariant either way; keeping it under an
        // empty name lets `check` say so instead of dropping it silently.
        match (w.bucket, w.map) {
            (Some(def), map) => {
                let entry = BucketEntry {
                    def,
                    map,
                    manifest: Manifest::new(),
                    indexes: BTreeMap::new(),
                };
                buckets.insert(entry.def.name.clone(), entry);
            }
            (None, Some(_)) => {
                buckets.insert(String::new(), BucketEntry::orphan());
            }
            (None, None) => {}
        }
        ClusterState {
            next_node_id: w.next_node_id,
            nodes: w.nodes,
            retired: w.retired,
            buckets,
            rebalance: w.rebalance,
            users: w.users,
            uuid: w.uuid,
            remotes: w.remotes,
            replications: w.replications,
            xdcr_checkpoints: w.xdcr_checkpoints,
        }
    }
}

impl BucketEntry {
    /// What a legacy state's map without a bucket reads as: a definition `check` refuses.
    fn orphan() -> BucketEntry {
        BucketEntry {
            def: BucketDef {
                name: String::new(),
                uuid: String::new(),
                kind: BucketKind::Couchbase,
                replicas: 0,
                vbuckets: 0,
                quota_bytes: 0,
                durability_min: None,
                conflict_resolution: Default::default(),
            },
            map: None,
            manifest: Manifest::new(),
            indexes: BTreeMap::new(),
        }
    }
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
    #[error("bucket {key:?} is filed under another name, or is invalid: {problem}")]
    BadBucket { key: String, problem: String },
    #[error("{count} buckets; at most {max}")]
    TooManyBuckets { count: usize, max: usize },
    #[error("bucket {bucket}'s map has {actual} vbuckets; the bucket has {expected}")]
    MapVbuckets {
        bucket: String,
        expected: u16,
        actual: u16,
    },
    #[error("bucket {bucket}'s map lists {id}, which is {problem}")]
    MapNode {
        bucket: String,
        id: NodeId,
        problem: &'static str,
    },
    #[error("the rebalance targets {id}, which is {problem}")]
    RebalanceNode { id: NodeId, problem: &'static str },
    #[error("bucket {bucket}'s collections manifest is broken: {problem}")]
    BadManifest {
        bucket: String,
        problem: ManifestInvariant,
    },
    #[error("cross-cluster replication metadata: {problem}")]
    Xdcr { problem: String },
    #[error("bucket {bucket}'s index {index} has a copy on {id}, which is {problem}")]
    IndexNode {
        bucket: String,
        index: String,
        id: NodeId,
        problem: &'static str,
    },
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

    /// Those of `ids` that run `service`, in the order given: of a rebalance's target or a
    /// map's node list, the nodes vbuckets (`Kv`) may be placed on.
    pub fn running(&self, ids: &[NodeId], service: crate::services::Service) -> Vec<NodeId> {
        ids.iter()
            .copied()
            .filter(|id| self.nodes.get(id).is_some_and(|n| n.info.runs(service)))
            .collect()
    }

    /// Ids of removed nodes: never valid again.
    pub fn retired(&self) -> &BTreeSet<NodeId> {
        &self.retired
    }

    /// The buckets, by name.
    pub fn buckets(&self) -> &BTreeMap<String, BucketEntry> {
        &self.buckets
    }

    /// The definition of bucket `name`.
    pub fn bucket(&self, name: &str) -> Option<&BucketDef> {
        self.buckets.get(name).map(|b| &b.def)
    }

    /// The users, by name.
    pub fn users(&self) -> &BTreeMap<String, crate::metadata::users::UserRecord> {
        &self.users
    }

    /// The cluster's uuid; empty until one was set.
    pub fn uuid(&self) -> &str {
        &self.uuid
    }

    /// Remote cluster references, by name.
    pub fn remotes(&self) -> &BTreeMap<String, crate::metadata::xdcr::RemoteCluster> {
        &self.remotes
    }

    /// Replications to remote clusters, by id.
    pub fn replications(&self) -> &BTreeMap<String, crate::metadata::xdcr::ReplicationDef> {
        &self.replications
    }

    /// Replication `id`'s checkpoints, by vbucket, as its pipelines last reported them.
    pub fn xdcr_checkpoints(
        &self,
        id: &str,
    ) -> Option<&BTreeMap<u16, crate::metadata::xdcr::XdcrCheckpoint>> {
        self.xdcr_checkpoints.get(id)
    }

    /// Bucket `name`'s map in force, once it has one.
    pub fn map(&self, name: &str) -> Option<&ClusterMap> {
        self.buckets.get(name).and_then(|b| b.map.as_ref())
    }

    /// The revision of bucket `name`'s map (`None` before its first map).
    pub fn rev(&self, name: &str) -> Option<Rev> {
        self.map(name).map(ClusterMap::rev)
    }

    /// Every bucket's map in force, by bucket name.
    pub fn maps(&self) -> impl Iterator<Item = (&str, &ClusterMap)> {
        self.buckets
            .iter()
            .filter_map(|(name, b)| b.map.as_ref().map(|m| (name.as_str(), m)))
    }

    pub fn rebalance(&self) -> Option<&RebalanceRecord> {
        self.rebalance.as_ref()
    }

    /// Checks every invariant in the module comment.
    pub fn check(&self) -> Result<(), StateError> {
        self.check_nodes()?;
        self.check_buckets()?;
        self.check_rebalance()?;
        crate::metadata::xdcr::check(self).map_err(|problem| StateError::Xdcr { problem })
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

    fn check_buckets(&self) -> Result<(), StateError> {
        if self.buckets.len() > BUCKETS_MAX {
            return Err(StateError::TooManyBuckets {
                count: self.buckets.len(),
                max: BUCKETS_MAX,
            });
        }
        for (key, entry) in &self.buckets {
            let problem = match entry.def.validate() {
                Err(e) => Some(e.to_string()),
                Ok(()) if entry.def.name != *key => Some("a different name".to_string()),
                Ok(()) => None,
            };
            if let Some(problem) = problem {
                return Err(StateError::BadBucket {
                    key: key.clone(),
                    problem,
                });
            }
            if let Some(map) = &entry.map {
                self.check_map(&entry.def, map)?;
            }
            entry
                .manifest
                .check()
                .map_err(|problem| StateError::BadManifest {
                    bucket: key.clone(),
                    problem,
                })?;
            self.check_index_placement(key, entry)?;
        }
        Ok(())
    }

    /// Every placed copy of an index is on a node of the cluster that is not failed over,
    /// at most one per node (`index_placement` drops the others when nodes leave).
    fn check_index_placement(&self, bucket: &str, entry: &BucketEntry) -> Result<(), StateError> {
        for (name, record) in &entry.indexes {
            let nodes = record.nodes.as_deref().unwrap_or_default();
            let mut seen = BTreeSet::new();
            for id in nodes {
                let problem = match self.nodes.get(id) {
                    None => "not a node of the cluster",
                    Some(n) if n.status == NodeStatus::FailedOver => "failed over",
                    Some(_) if !seen.insert(*id) => "listed twice",
                    Some(_) => continue,
                };
                return Err(StateError::IndexNode {
                    bucket: bucket.to_string(),
                    index: name.clone(),
                    id: *id,
                    problem,
                });
            }
        }
        Ok(())
    }

    fn check_map(&self, bucket: &BucketDef, map: &ClusterMap) -> Result<(), StateError> {
        let actual = map.vbmap().num_vbuckets();
        if actual != bucket.vbuckets {
            return Err(StateError::MapVbuckets {
                bucket: bucket.name.clone(),
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
                bucket: bucket.name.clone(),
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
