//! Failing a node over: its replicas elsewhere become active (each with a new failover-log
//! branch, made by the nodes' agents when they apply the map), and it leaves the map. Manual
//! (`POST /api/v1/cluster/failover`, `sluice failover`) or automatic (`auto_failover`).
//!
//! Which replica becomes active: the nodes holding a replica of a vbucket the failed node
//! was active for are asked how far their copies are (`GET /internal/vbuckets/positions`, in
//! parallel, each within [`POSITIONS_TIMEOUT`]), and `sluice_cluster::fail_over_safely`
//! promotes the most advanced complete copy, so a durable write acknowledged by a later
//! replica survives a lagging first one. A vbucket with no copy known complete (no answer,
//! or mid-snapshot) refuses the failover unless data loss is allowed; then it gets its first
//! live replica.
//!
//! The map change is one `FailOver` command, compare-and-set on the map revision it was
//! computed from; a map published in between makes it start over from the new map.

use sluice_cluster::metadata::{
    Applied, BucketVbmap, FailOverCommand, MetaCommand, NodeStatus, Rejection,
};
use sluice_cluster::{fail_over, fail_over_safely, ClusterMap, CopyPosition, NodeId, Rev};
use sluice_meta::{MetaError, MetaNode};
use sluice_types::{Seqno, VbId};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Attempts when the map changes under the proposal.
const RACES_MAX: usize = 5;

/// How long a node may take to say how far its copies are. A failover is asked for when
/// nodes are in trouble, so it does not wait on one long: a node that has not answered by
/// then counts as not knowing, and its copies are not promoted as safe.
const POSITIONS_TIMEOUT: Duration = Duration::from_secs(2);

/// The data plane's route that reports every vbucket copy's position.
const POSITIONS_PATH: &str = "/internal/vbuckets/positions";

/// vbuckets named in an error message at most (a bucket may have 1024).
const NAMED_MAX: usize = 16;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FailoverReport {
    pub node: NodeId,
    /// What the failover did to each bucket, in name order.
    pub buckets: Vec<BucketFailover>,
}

/// One bucket's part of a failover.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BucketFailover {
    pub bucket: String,
    /// The bucket's map revision that no longer lists the node.
    pub rev: Rev,
    /// vbuckets whose replica became active.
    pub promoted: usize,
    /// Promotions that went to another replica than the first live one, because it was
    /// further ahead.
    pub promoted_out_of_order: usize,
    /// vbuckets left with no copy (only with `allow_data_loss`).
    pub lost: Vec<VbId>,
    /// vbuckets whose first live replica was promoted with no copy known complete (only with
    /// `allow_data_loss`).
    pub no_safe_copy: Vec<VbId>,
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
        "failing over node {node} loses {} vbuckets of bucket {bucket} with no other copy; \
         ask again allowing data loss to do it anyway", lost.len()
    )]
    WouldLoseData {
        node: NodeId,
        bucket: String,
        lost: Vec<VbId>,
    },
    #[error(
        "failing over node {node} would promote, for {} of bucket {bucket}, a replica not \
         known to hold every acknowledged write (its node did not answer in time, or the copy \
         is mid-snapshot); ask again allowing data loss to promote the first live replica \
         anyway",
        name_vbuckets(vbuckets)
    )]
    NoSafeCopy {
        node: NodeId,
        bucket: String,
        vbuckets: Vec<VbId>,
    },
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

/// Fails `node` over, through the metadata leader: every bucket's map at once, each
/// promoting its most advanced complete replicas.
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
        if state.maps().next().is_none() {
            return Err(FailoverError::NoMap);
        }
        // What is lost does not depend on the positions: refuse before asking for them.
        for (bucket, map) in state.maps() {
            let lost = fail_over(map.vbmap(), &[node]).lost;
            if !lost.is_empty() && !allow_data_loss {
                let bucket = bucket.to_string();
                return Err(FailoverError::WouldLoseData { node, bucket, lost });
            }
        }
        let mut planned = Vec::new();
        for (bucket, map) in state.maps() {
            let positions = ask_positions(meta, bucket, map, node).await;
            let outcome = fail_over_safely(map.vbmap(), &[node], &|vb, n| {
                positions.get(&(vb, n)).copied()
            });
            if !outcome.no_safe_copy.is_empty() && !allow_data_loss {
                return Err(FailoverError::NoSafeCopy {
                    node,
                    bucket: bucket.to_string(),
                    vbuckets: outcome.no_safe_copy,
                });
            }
            planned.push((bucket.to_string(), map.rev(), outcome));
        }
        let cmd = MetaCommand::FailOver(FailOverCommand {
            nodes: vec![node],
            maps: planned
                .iter()
                .map(|(bucket, rev, outcome)| BucketVbmap {
                    bucket: bucket.clone(),
                    expected_rev: *rev,
                    vbmap: outcome.map.clone(),
                })
                .collect(),
        });
        match meta.propose(cmd).await? {
            Ok(applied) => {
                let revs = match applied {
                    Applied::FailedOver { revs, .. } => revs,
                    _ => vec![],
                };
                let buckets = planned
                    .into_iter()
                    .map(|(bucket, rev, outcome)| {
                        let rev = revs
                            .iter()
                            .find(|(b, _)| *b == bucket)
                            .map_or(rev.next(), |(_, r)| *r);
                        let out_of_order =
                            outcome.promotions.iter().filter(|p| p.out_of_order).count();
                        tracing::warn!(%node, %bucket, promoted = outcome.promotions.len(),
                            promoted_out_of_order = out_of_order, lost = outcome.lost.len(),
                            no_safe_copy = outcome.no_safe_copy.len(), rev = rev.0,
                            "node failed over");
                        BucketFailover {
                            bucket,
                            rev,
                            promoted: outcome.promotions.len(),
                            promoted_out_of_order: out_of_order,
                            lost: outcome.lost,
                            no_safe_copy: outcome.no_safe_copy,
                        }
                    })
                    .collect();
                return Ok(FailoverReport { node, buckets });
            }
            Err(Rejection::StaleRev { bucket, .. }) => {
                // Another map was published first: wait until it is applied here, then
                // compute again from it.
                let seen = state.rev(&bucket);
                let mut states = meta.state();
                let _ = tokio::time::timeout(
                    std::time::Duration::from_secs(2),
                    states.wait_for(|s| s.rev(&bucket) != seen),
                )
                .await;
            }
            Err(other) => return Err(FailoverError::Refused(other)),
        }
    }
    Err(FailoverError::Raced)
}

/// `GET /internal/vbuckets/positions`'s answer, as far as a failover reads it.
#[derive(Debug, serde::Deserialize)]
struct PositionsAnswer {
    vbuckets: Vec<VbPosition>,
}

#[derive(Debug, serde::Deserialize)]
struct VbPosition {
    vb: u16,
    state: String,
    high_seqno: u64,
    high_prepared_seqno: u64,
    complete: bool,
}

impl VbPosition {
    /// The copy's position, if it is one a promotion may consider: a replica (or a pending
    /// copy, taking a rebalance's takeover). A copy in any other state does not follow the
    /// failed active as the map says (not yet set up, or already dropped), so what it holds
    /// is not known.
    fn copy(&self) -> Option<CopyPosition> {
        matches!(self.state.as_str(), "replica" | "pending").then_some(CopyPosition {
            high_prepared: Seqno(self.high_prepared_seqno),
            high_seqno: Seqno(self.high_seqno),
            complete: self.complete,
        })
    }
}

/// Asks every node holding a replica of a vbucket that `active` is active for (the failed
/// node, or a restarted one: `restart_hold`) how far its copies are, all at once, each within
/// [`POSITIONS_TIMEOUT`]. A node that does not answer, or answers something else,
/// contributes nothing (its copies count as unknown).
pub(crate) async fn ask_positions(
    meta: &MetaNode,
    bucket: &str,
    map: &ClusterMap,
    active: NodeId,
) -> BTreeMap<(VbId, NodeId), CopyPosition> {
    let asked: BTreeSet<NodeId> = map
        .vbmap()
        .iter()
        .filter(|(_, chain)| chain.active == Some(active))
        .flat_map(|(_, chain)| chain.replicas.iter().flatten().copied())
        .filter(|&n| n != active)
        .collect();
    let path = crate::peer::for_bucket(POSITIONS_PATH, bucket);
    let mut calls = tokio::task::JoinSet::new();
    for info in map
        .nodes()
        .iter()
        .filter(|n| asked.contains(&n.id))
        .cloned()
    {
        let meta = meta.clone();
        let path = path.clone();
        calls.spawn(async move {
            let answer = crate::peer::call(&meta, &info, &path, None, POSITIONS_TIMEOUT).await;
            (info.id, answer)
        });
    }
    let mut positions = BTreeMap::new();
    while let Some(call) = calls.join_next().await {
        let Ok((node, answer)) = call else { continue };
        let read = match answer {
            Ok(a) if a.ok() => serde_json::from_value::<PositionsAnswer>(a.body)
                .map_err(|e| format!("unreadable answer: {e}")),
            Ok(a) => Err(format!("answered {}: {}", a.status, a.body)),
            Err(e) => Err(e.to_string()),
        };
        match read {
            Ok(answer) => positions.extend(
                answer
                    .vbuckets
                    .iter()
                    .filter_map(|p| Some(((VbId(p.vb), node), p.copy()?))),
            ),
            Err(why) => tracing::warn!(%node, %why,
                "failover: no copy positions from this node; its copies cannot be promoted as safe"),
        }
    }
    positions
}

/// `vb:1, vb:5, vb:9` — at most [`NAMED_MAX`], then how many more.
fn name_vbuckets(vbuckets: &[VbId]) -> String {
    let named: Vec<String> = vbuckets
        .iter()
        .take(NAMED_MAX)
        .map(ToString::to_string)
        .collect();
    match vbuckets.len().saturating_sub(NAMED_MAX) {
        0 => named.join(", "),
        more => format!("{} and {more} more", named.join(", ")),
    }
}
