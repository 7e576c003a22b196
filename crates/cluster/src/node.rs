//! Node identity and addresses.
//!
//! A node is named by a `NodeId(u32)`, not by its host:port or a string name. The cluster
//! manager hands out ids from a counter in the replicated metadata when a node joins and
//! never reuses one, so:
//! - an address can change (re-IP, new port) without the maps that mention the node changing;
//! - a node that leaves and a new node on the same address are different ids, so a plan can
//!   never mistake an empty newcomer for the old copy holder;
//! - ids are `Copy` and `Ord`: chains compare without allocation, and every tie-break in the
//!   planner is a plain integer order.
//!
//! Addresses live in `NodeInfo`, used only where a map is rendered for clients.

use crate::limits::NODES_MAX;
use crate::services::Services;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;

/// A node's stable identity within a cluster. Serialized as the bare number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NodeId(pub u32);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

/// Where a node serves: what clients are told to dial.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub id: NodeId,
    /// The host clients dial; must be exactly what they can reach (clients.md §1.4).
    pub host: String,
    /// The memcached-binary (KV) port.
    pub kv_port: u16,
    /// The admin HTTP port (`mgmt` in `nodesExt`).
    pub admin_port: u16,
    /// The TLS ports, when the node serves TLS (`kvSSL`, `mgmtSSL`). Absent in metadata
    /// written before TLS existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsPorts>,
    /// What the node runs. Absent in metadata written before services existed: every
    /// service, as every node ran then (and left out when it is every service).
    #[serde(default, skip_serializing_if = "Services::is_all")]
    pub services: Services,
}

impl NodeInfo {
    /// The KV address to dial this node at: its TLS KV port when `tls` is asked for and it
    /// serves one, else its cleartext port.
    pub fn kv_addr(&self, tls: bool) -> String {
        match self.tls.filter(|_| tls) {
            Some(t) => format!("{}:{}", self.host, t.kv),
            None => format!("{}:{}", self.host, self.kv_port),
        }
    }

    /// Whether the node runs `service`.
    pub fn runs(&self, service: crate::services::Service) -> bool {
        self.services.has(service)
    }

    /// The admin address to dial this node at, as [`NodeInfo::kv_addr`] chooses.
    pub fn admin_addr(&self, tls: bool) -> String {
        match self.tls.filter(|_| tls) {
            Some(t) => format!("{}:{}", self.host, t.admin),
            None => format!("{}:{}", self.host, self.admin_port),
        }
    }
}

/// A node's TLS ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsPorts {
    /// The KV port over TLS (Couchbase's 11207).
    pub kv: u16,
    /// The admin HTTP port over TLS (Couchbase's 18091).
    pub admin: u16,
}

/// A node list given to the planner that it cannot plan for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeSetError {
    #[error("no nodes given: a bucket needs at least one node")]
    Empty,
    #[error("node {0} is listed twice")]
    Duplicate(NodeId),
    #[error("{count} nodes is more than the {max} the planner accepts")]
    TooMany { count: usize, max: usize },
}

/// Checks a node list the planner is asked to place vbuckets on.
pub(crate) fn check_node_set(nodes: &[NodeId]) -> Result<(), NodeSetError> {
    if nodes.is_empty() {
        return Err(NodeSetError::Empty);
    }
    if nodes.len() > NODES_MAX {
        return Err(NodeSetError::TooMany {
            count: nodes.len(),
            max: NODES_MAX,
        });
    }
    let mut seen = BTreeSet::new();
    for &node in nodes {
        if !seen.insert(node) {
            return Err(NodeSetError::Duplicate(node));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_sets_are_checked() {
        assert_eq!(check_node_set(&[]), Err(NodeSetError::Empty));
        assert_eq!(
            check_node_set(&[NodeId(1), NodeId(2), NodeId(1)]),
            Err(NodeSetError::Duplicate(NodeId(1)))
        );
        let many: Vec<NodeId> = (0..=NODES_MAX as u32).map(NodeId).collect();
        assert!(matches!(
            check_node_set(&many),
            Err(NodeSetError::TooMany { .. })
        ));
        assert_eq!(check_node_set(&[NodeId(7), NodeId(3)]), Ok(()));
    }

    #[test]
    fn ids_display_short() {
        assert_eq!(NodeId(12).to_string(), "n12");
    }
}
