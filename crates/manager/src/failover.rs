//! Failing a node over: its replicas elsewhere become active (each with a new failover-log
//! branch, made by the nodes' agents when they apply the map), and it leaves the map. Manual
//! (`POST /api/v1/cluster/failover`, `sluice failover`) or automatic (`auto_failover`).
//!
//! The map change is one `FailOver` command, compare-and-set on the map revision it was
//! computed from; a map published in between makes it start over from the new map.

use sluice_cluster::metadata::{Applied, MetaCommand, NodeStatus, Rejection};
use sluice_cluster::{fail_over, NodeId, Rev};
use sluice_meta::{MetaError, MetaNode};
use sluice_types::VbId;

/// Attempts when the map changes under the proposal.
const RACES_MAX: usize = 5;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FailoverReport {
    pub node: NodeId,
    /// The map revision that no longer lists the node.
    pub rev: Rev,
    /// vbuckets whose replica became active.
    pub promoted: usize,
    /// vbuckets left with no copy (only with `allow_data_loss`).
    pub lost: Vec<VbId>,
}

#[derive(Debug, thiserror::Error)]
pub enum FailoverError {
    #[error("node {0} is not in the cluster")]
    UnknownNode(NodeId),
    #[error("node {0} is failed over already")]
    AlreadyFailedOver(NodeId),
    #[error("the cluster has no map yet")]
    NoMap,
    #[error(
        "failing over node {node} loses {} vbuckets with no other copy; \
         ask again allowing data loss to do it anyway", lost.len()
    )]
    WouldLoseData { node: NodeId, lost: Vec<VbId> },
    #[error("the cluster refused the failover: {0}")]
    Refused(Rejection),
    #[error(transparent)]
    Meta(#[from] MetaError),
    #[error("the map kept changing; try again")]
    Raced,
}

impl FailoverError {
    /// Whether the same request may succeed later unchanged.
    pub fn retryable(&self) -> bool {
        matches!(self, FailoverError::Meta(_) | FailoverError::Raced)
    }
}

/// Fails `node` over, through the metadata leader.
pub async fn fail_over_node(
    meta: &MetaNode,
    node: NodeId,
    allow_data_loss: bool,
) -> Result<FailoverReport, FailoverError> {
    for _ in 0..RACES_MAX {
        let state = meta.state().borrow().clone();
        match state.node(node).map(|e| e.status) {
            None => return Err(FailoverError::UnknownNode(node)),
            Some(NodeStatus::FailedOver) => return Err(FailoverError::AlreadyFailedOver(node)),
            Some(_) => {}
        }
        let Some(map) = state.map() else {
            return Err(FailoverError::NoMap);
        };
        let outcome = fail_over(map.vbmap(), &[node]);
        if !outcome.lost.is_empty() && !allow_data_loss {
            return Err(FailoverError::WouldLoseData {
                node,
                lost: outcome.lost,
            });
        }
        let cmd = MetaCommand::FailOver {
            nodes: vec![node],
            expected_rev: Some(map.rev()),
            vbmap: Some(outcome.map),
        };
        match meta.propose(cmd).await? {
            Ok(applied) => {
                let rev = match applied {
                    Applied::FailedOver { rev: Some(rev), .. } => rev,
                    _ => map.rev().next(),
                };
                tracing::warn!(%node, promoted = outcome.promotions.len(),
                    lost = outcome.lost.len(), rev = rev.0, "node failed over");
                return Ok(FailoverReport {
                    node,
                    rev,
                    promoted: outcome.promotions.len(),
                    lost: outcome.lost,
                });
            }
            Err(Rejection::StaleRev { .. }) => {
                // Another map was published first: wait until it is applied here, then
                // compute again from it.
                let mut states = meta.state();
                let _ = tokio::time::timeout(
                    std::time::Duration::from_secs(2),
                    states.wait_for(|s| s.map().is_some_and(|m| m.rev() != map.rev())),
                )
                .await;
            }
            Err(other) => return Err(FailoverError::Refused(other)),
        }
    }
    Err(FailoverError::Raced)
}
