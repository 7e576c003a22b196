//! The openraft type configuration, the Raft node type, and the mapping between cluster node
//! ids and Raft node ids.

use serde::{Deserialize, Serialize};
use sluice_cluster::metadata::{MetaCommand, MetaResponse};
use sluice_cluster::NodeId;
use std::fmt;
use std::io::Cursor;

openraft::declare_raft_types!(
    /// The Raft group of the cluster metadata: entries carry `MetaCommand`s, applying one
    /// answers `Some(MetaResponse)`, and Raft's own entries (blank, membership) answer `None`.
    pub TypeConfig:
        D = MetaCommand,
        R = Option<MetaResponse>,
        NodeId = u64,
        Node = Peer,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// What Raft keeps about a member: where its Raft RPCs go. It is replicated in the membership
/// entries, so every node can reach every other one without a second directory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Peer {
    /// `host:port` of the node's admin HTTP listener, where `http::router` is mounted.
    pub admin_addr: String,
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.admin_addr)
    }
}

/// The Raft id of a cluster node: the same number, widened. Raft ids are only ever made
/// here, so every Raft id in the group maps back.
pub fn raft_id(id: NodeId) -> u64 {
    u64::from(id.0)
}

/// The cluster node of a Raft id; `None` for an id `raft_id` cannot have made.
pub fn cluster_id(raft: u64) -> Option<NodeId> {
    u32::try_from(raft).ok().map(NodeId)
}

/// A Raft membership, in cluster ids.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Membership {
    /// Nodes whose votes count (both halves during a joint-consensus change).
    pub voters: std::collections::BTreeSet<NodeId>,
    /// Nodes that receive the log without voting.
    pub learners: std::collections::BTreeSet<NodeId>,
    /// Whether a voter change is half done (joint consensus).
    pub joint: bool,
}

impl Membership {
    pub(crate) fn of(m: &openraft::Membership<u64, Peer>) -> Membership {
        let ids = |it: &mut dyn Iterator<Item = u64>| it.filter_map(cluster_id).collect();
        Membership {
            voters: ids(&mut m.voter_ids()),
            learners: ids(&mut m.learner_ids()),
            joint: m.get_joint_config().len() > 1,
        }
    }
}

/// Where a node's log stands, by log index (for metrics and tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogPosition {
    /// The Raft term this node is in.
    pub term: u64,
    /// The last entry in its log.
    pub last_log: Option<u64>,
    /// The last entry applied to its state.
    pub applied: Option<u64>,
    /// The last entry its newest snapshot covers.
    pub snapshot: Option<u64>,
    /// The last entry removed from its log (covered by a snapshot).
    pub purged: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_map_both_ways() {
        assert_eq!(raft_id(NodeId(7)), 7);
        assert_eq!(cluster_id(7), Some(NodeId(7)));
        assert_eq!(cluster_id(u64::from(u32::MAX)), Some(NodeId(u32::MAX)));
        assert_eq!(cluster_id(u64::from(u32::MAX) + 1), None);
    }
}
