//! `fail_over`: the map after nodes are declared failed, and what that decided.
//!
//! Each chain drops its failed nodes and closes up, keeping order, with empty slots at the
//! end (Couchbase's `mb_map:promote_replica`). So when the active failed, the first replica
//! on a live node becomes the active and later replicas move up a slot; when only replicas
//! failed, the active stays and the live replicas move up. A vbucket whose every copy was on
//! a failed node is left with no active and reported lost.
//!
//! The caller then gives each promoted vbucket a new failover-log entry on its new active,
//! publishes the map under the next revision, and later rebalances to refill the empty slots.

use crate::node::NodeId;
use crate::vbmap::{Chain, VbMap};
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
}

/// The map after a failover and the decisions in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailoverOutcome {
    pub map: VbMap,
    /// In vbucket order.
    pub promotions: Vec<Promotion>,
    /// Vbuckets that had an active before and have no copy left now, in vbucket order.
    pub lost: Vec<VbId>,
}

/// Fails `failed` over in `map`. Nodes in `failed` that the map does not use change nothing.
pub fn fail_over(map: &VbMap, failed: &[NodeId]) -> FailoverOutcome {
    let failed: BTreeSet<NodeId> = failed.iter().copied().collect();
    let mut promotions = Vec::new();
    let mut lost = Vec::new();
    let chains = map
        .iter()
        .map(|(vb, chain)| {
            let live: Vec<NodeId> = chain.nodes().filter(|n| !failed.contains(n)).collect();
            if let Some(from) = chain.active.filter(|a| failed.contains(a)) {
                match live.first() {
                    Some(&to) => promotions.push(Promotion { vb, from, to }),
                    None => lost.push(vb),
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
        .expect("removing nodes from valid chains keeps them valid");
    FailoverOutcome {
        map,
        promotions,
        lost,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: NodeId = NodeId(0);
    const B: NodeId = NodeId(1);
    const C: NodeId = NodeId(2);

    fn chain(active: NodeId, replicas: &[Option<NodeId>]) -> Chain {
        Chain::new(Some(active), replicas.to_vec())
    }

    #[test]
    fn the_first_live_replica_is_promoted() {
        let map = VbMap::new(2, vec![chain(A, &[Some(B), Some(C)])]).unwrap();
        let out = fail_over(&map, &[A, B]);
        assert_eq!(
            out.map.chain(VbId(0)),
            Some(&Chain::new(Some(C), vec![None, None]))
        );
        assert_eq!(
            out.promotions,
            vec![Promotion {
                vb: VbId(0),
                from: A,
                to: C
            }]
        );
        assert!(out.lost.is_empty());
    }

    #[test]
    fn failed_replicas_leave_and_the_rest_move_up() {
        let map = VbMap::new(2, vec![chain(A, &[Some(B), Some(C)])]).unwrap();
        let out = fail_over(&map, &[B]);
        assert_eq!(out.map.chain(VbId(0)), Some(&chain(A, &[Some(C), None])));
        assert!(out.promotions.is_empty());
    }

    #[test]
    fn a_vbucket_with_no_live_copy_is_lost() {
        let map = VbMap::new(1, vec![chain(A, &[Some(B)]), chain(C, &[Some(A)])]).unwrap();
        let out = fail_over(&map, &[A, B]);
        assert_eq!(out.lost, vec![VbId(0)]);
        assert_eq!(out.map.chain(VbId(0)), Some(&Chain::lost(1)));
        assert_eq!(out.map.chain(VbId(1)), Some(&chain(C, &[None])));
        // Failing it over again changes nothing and reports nothing new.
        let again = fail_over(&out.map, &[A, B]);
        assert_eq!(again.map, out.map);
        assert!(again.lost.is_empty() && again.promotions.is_empty());
    }

    #[test]
    fn unknown_nodes_change_nothing() {
        let map = VbMap::new(1, vec![chain(A, &[Some(B)])]).unwrap();
        let out = fail_over(&map, &[NodeId(42)]);
        assert_eq!(out.map, map);
    }
}
