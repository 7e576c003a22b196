//! The map after nodes are declared failed, and what that decided.
//!
//! Each chain drops its failed nodes and closes up, with empty slots at the end. When only
//! replicas failed, the active stays and the live replicas move up, in order. When the active
//! failed, one live replica becomes the active and the others follow in their old order:
//! - [`fail_over_safely`] promotes the most advanced complete copy, as the nodes reported it
//!   (`choice`): a durable write is acknowledged once a majority holds it, and that majority
//!   need not include the chain's first replica;
//! - [`fail_over`] promotes the first live replica (Couchbase's `mb_map:promote_replica`),
//!   for callers that have no positions: tests, and the auto-failover's "would it lose a
//!   vbucket" check, which only reads `lost` (the same under both rules).
//!
//! A vbucket whose every copy was on a failed node is left with no active and reported lost.
//! A vbucket whose live replicas include no copy known to be complete (no answer, or mid
//! snapshot) gets its first live replica, as under `fail_over`, and is reported in
//! `no_safe_copy`: the caller refuses such a failover unless data loss is allowed, as it
//! does for `lost`.
//!
//! A node that restarted without all its data (a crash, an ephemeral bucket) and is still
//! the map's active for some vbuckets decides each of them with [`after_restart`]: keep it,
//! or hand it to a replica ahead of it (`restart`).
//!
//! The caller then gives each promoted vbucket a new failover-log entry on its new active,
//! publishes the map under the next revision, and later rebalances to refill the empty slots.

mod choice;
mod restart;
#[cfg(test)]
mod tests;

pub use choice::CopyPosition;
pub use restart::{after_restart, RestartVerdict, WaitReason};

use crate::node::NodeId;
use crate::vbmap::{Chain, VbMap};
use choice::most_advanced;
use sluice_types::VbId;
use std::collections::BTreeSet;

/// A replica made active because its active's node failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Promotion {
    pub vb: VbId,
    /// The failed node that held the active.
    pub from: NodeId,
    /// The live node whose replica is now the active.
    pub to: NodeId,
    /// Whether `to` is not the first live replica of the chain: a copy further down was
    /// further ahead.
    pub out_of_order: bool,
}

/// The map after a failover and the decisions in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailoverOutcome {
    pub map: VbMap,
    /// In vbucket order.
    pub promotions: Vec<Promotion>,
    /// Vbuckets that had an active before and have no copy left now, in vbucket order.
    pub lost: Vec<VbId>,
    /// Vbuckets promoted although no live replica was known to hold a complete copy (its
    /// node did not answer, or the copy was mid-snapshot): the map gives them their first
    /// live replica, which may lack acknowledged writes. In vbucket order; always empty
    /// from [`fail_over`].
    pub no_safe_copy: Vec<VbId>,
}

/// What to promote among a chain's live replicas (slot order), when its active failed.
enum Pick {
    /// The replica at this index: known complete and the most advanced.
    Safe(usize),
    /// No replica is known complete: the first one, reported in `no_safe_copy`.
    FirstUnsafe,
}

/// Fails `failed` over in `map`, promoting the first live replica of each chain whose active
/// failed. Nodes in `failed` that the map does not use change nothing.
pub fn fail_over(map: &VbMap, failed: &[NodeId]) -> FailoverOutcome {
    close_up(map, failed, |_, _| Pick::Safe(0))
}

/// Fails `failed` over in `map`, promoting for each chain whose active failed the live
/// replica with the greatest `(high_prepared, high_seqno)` among those whose position is
/// known and complete (the earlier slot on a tie). `positions(vb, node)` is what `node`
/// reported for its copy of `vb`, `None` if it did not answer. Chains whose active is live
/// close up as under [`fail_over`], without asking for positions.
pub fn fail_over_safely(
    map: &VbMap,
    failed: &[NodeId],
    positions: &impl Fn(VbId, NodeId) -> Option<CopyPosition>,
) -> FailoverOutcome {
    close_up(map, failed, |vb, live| {
        match most_advanced(live.iter().map(|&n| positions(vb, n))) {
            Some(at) => Pick::Safe(at),
            None => Pick::FirstUnsafe,
        }
    })
}

/// Drops `failed` from every chain; `pick` chooses the new active among the live replicas
/// (never empty) of a chain whose active failed.
fn close_up(
    map: &VbMap,
    failed: &[NodeId],
    mut pick: impl FnMut(VbId, &[NodeId]) -> Pick,
) -> FailoverOutcome {
    let failed: BTreeSet<NodeId> = failed.iter().copied().collect();
    let mut promotions = Vec::new();
    let mut lost = Vec::new();
    let mut no_safe_copy = Vec::new();
    let chains = map
        .iter()
        .map(|(vb, chain)| {
            let mut live: Vec<NodeId> = chain.nodes().filter(|n| !failed.contains(n)).collect();
            if let Some(from) = chain.active.filter(|a| failed.contains(a)) {
                if live.is_empty() {
                    lost.push(vb);
                } else {
                    let at = match pick(vb, &live) {
                        Pick::Safe(at) => at,
                        Pick::FirstUnsafe => {
                            no_safe_copy.push(vb);
                            0
                        }
                    };
                    // The promoted copy moves to the front; the others keep their order.
                    if let Some(ahead) = live.get_mut(..=at) {
                        ahead.rotate_right(1);
                    }
                    if let Some(&to) = live.first() {
                        promotions.push(Promotion {
                            vb,
                            from,
                            to,
                            out_of_order: at > 0,
                        });
                    }
                }
            }
            let mut slots = live.into_iter().map(Some);
            let active = slots.next().flatten();
            let mut replicas: Vec<Option<NodeId>> = slots.collect();
            replicas.resize(usize::from(map.replicas()), None);
            Chain::new(active, replicas)
        })
        .collect();
    let map = VbMap::new(map.replicas(), chains)
        .expect("removing nodes from valid chains and reordering the rest keeps them valid");
    FailoverOutcome {
        map,
        promotions,
        lost,
        no_safe_copy,
    }
}
