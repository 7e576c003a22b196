//! Which nodes hold a copy of each index: decided here, in the replicated metadata, so every
//! node agrees on it.
//!
//! - An index gets `replicas + 1` copies (`WITH {"num_replica": n}`), each on a different
//!   node, chosen among the nodes that may hold one (every node running the index service,
//!   not failed over) by how few
//!   copies they hold already (ties go to the lower node id). Placement is a pure function
//!   of the state, so every replica of the metadata computes the same.
//! - When nodes leave (failed over, removed, ejected by a rebalance), their copies are
//!   dropped from the catalog, and each index that has fewer copies than it asked for gets
//!   new ones on the least loaded nodes that hold none, as far as there are nodes
//!   ([`repair`]). A rebalance that takes nodes in tops indexes up the same way. Couchbase
//!   rebuilds lost replicas at the next rebalance only; here a failover re-places them at once,
//!   so an index whose only copy was lost is rebuilt instead of being unusable.
//! - A record stored before placement existed has no node list: every node that may hold a
//!   copy holds it, as every node did then ([`IndexRecord::holders`]).

use std::collections::{BTreeMap, BTreeSet};

use crate::node::NodeId;
use crate::services::Service;

use super::command::Rejection;
use super::state::{ClusterState, NodeStatus};

/// The nodes that may hold an index copy: every node running the index service that has
/// not failed over.
pub(crate) fn candidates(state: &ClusterState) -> BTreeSet<NodeId> {
    state
        .nodes
        .iter()
        .filter(|(_, n)| n.status != NodeStatus::FailedOver && n.info.runs(Service::Index))
        .map(|(id, _)| *id)
        .collect()
}

/// Copies each candidate holds, over every bucket's placed indexes.
fn load(state: &ClusterState, candidates: &BTreeSet<NodeId>) -> BTreeMap<NodeId, usize> {
    let mut load: BTreeMap<NodeId, usize> = candidates.iter().map(|id| (*id, 0)).collect();
    for entry in state.buckets.values() {
        for record in entry.indexes.values() {
            for id in record.nodes.iter().flatten() {
                if let Some(n) = load.get_mut(id) {
                    *n += 1;
                }
            }
        }
    }
    load
}

/// Adds to `nodes` the least loaded candidates it lacks until it has `want` (or no
/// candidate is left), counting each choice in `load`.
fn top_up(nodes: &mut Vec<NodeId>, want: usize, load: &mut BTreeMap<NodeId, usize>) {
    while nodes.len() < want {
        let pick = load
            .iter()
            .filter(|(id, _)| !nodes.contains(id))
            .min_by_key(|(id, n)| (**n, **id))
            .map(|(id, _)| *id);
        let Some(id) = pick else {
            return;
        };
        nodes.push(id);
        *load.get_mut(&id).expect("picked from the load table") += 1;
    }
}

/// The nodes a new index with `replicas` replicas goes on, or why it cannot be placed.
pub(super) fn place_new(state: &ClusterState, replicas: u8) -> Result<Vec<NodeId>, Rejection> {
    let candidates = candidates(state);
    let want = usize::from(replicas) + 1;
    if want > candidates.len() {
        return Err(Rejection::IndexReplicas {
            replicas,
            nodes: candidates.len(),
        });
    }
    let mut load = load(state, &candidates);
    let mut nodes = Vec::with_capacity(want);
    top_up(&mut nodes, want, &mut load);
    debug_assert_eq!(nodes.len(), want);
    Ok(nodes)
}

/// The nodes `on` a new index with `replicas` replicas was asked to go on
/// (`WITH {"nodes"}`), if they can hold it: `replicas` + 1 distinct nodes, each running the
/// index service and not failed over.
pub(super) fn check_asked(
    state: &ClusterState,
    on: &[NodeId],
    replicas: u8,
) -> Result<Vec<NodeId>, Rejection> {
    let refuse = |reason: String| Err(Rejection::IndexNodes { reason });
    if on.len() != usize::from(replicas) + 1 {
        return refuse(format!(
            "{} node(s) named for {} copies",
            on.len(),
            usize::from(replicas) + 1
        ));
    }
    let may = candidates(state);
    for (i, id) in on.iter().enumerate() {
        if on[..i].contains(id) {
            return refuse(format!("node {id} is named twice"));
        }
        if !may.contains(id) {
            let why = match state.nodes.get(id) {
                None => "is not in the cluster",
                Some(n) if n.status == NodeStatus::FailedOver => "is failed over",
                Some(_) => "does not run the index service",
            };
            return refuse(format!("node {id} {why}"));
        }
    }
    Ok(on.to_vec())
}

/// After nodes left or joined: drops copies on nodes that may no longer hold one and tops
/// every placed index up to its copies, as far as there are nodes. Buckets and indexes are
/// visited in name order, so the result is the same on every replica of the metadata.
pub(super) fn repair(state: &mut ClusterState) {
    let candidates = candidates(state);
    for (_, nodes) in placed(state) {
        nodes.retain(|id| candidates.contains(id));
    }
    let mut load = load(state, &candidates);
    // One whose every copy left gets new ones.
    for (want, nodes) in placed(state) {
        top_up(nodes, want, &mut load);
    }
}

/// Each placed index's wanted copies and node list, buckets and indexes in name order. A
/// record stored before placement (no node list) is not one: it stays on every node.
fn placed(state: &mut ClusterState) -> Vec<(usize, &mut Vec<NodeId>)> {
    state
        .buckets
        .values_mut()
        .flat_map(|e| e.indexes.values_mut())
        .filter_map(|r| Some(usize::from(r.replicas) + 1).zip(r.nodes.as_mut()))
        .collect()
}
