//! The balance rules every map the planner produces meets, and the per-node counts they are
//! stated in. Public so the cluster manager can say "rebalance needed" when they stop holding.
//!
//! Over a node set of N nodes, with R replica slots and R' = min(R, N - 1) of them fillable
//! (a node holds at most one copy of a vbucket):
//! - every vbucket has an active, on a node of the set;
//! - replica slots 1..=R' are filled from the set, slots past R' are empty;
//! - active counts per node differ by at most one;
//! - for each replica slot, counts per node differ by at most one (so the copies promoted by
//!   a failover are spread too);
//! - total replica counts per node differ by at most one.
//!
//! Every rule is reachable for any N, R and vbucket count (`placement` constructs such a map),
//! so "at most one" is exact, not a target.

use crate::node::NodeId;
use crate::vbmap::VbMap;
use sluice_types::VbId;

/// How many copies of each kind one node holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeCounts {
    pub node: NodeId,
    pub active: usize,
    /// Replicas in slot 1, 2, ... (index 0 is replica 1).
    pub by_replica_slot: Vec<usize>,
    /// All replicas, whatever the slot.
    pub replicas: usize,
}

impl NodeCounts {
    /// Active and replica copies together: what the node stores.
    pub fn copies(&self) -> usize {
        self.active + self.replicas
    }
}

/// A rule the map breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Imbalance {
    #[error("{vb} has no active")]
    NoActive { vb: VbId },
    #[error("{vb} has a copy on {node}, which is not in the node set")]
    ForeignNode { vb: VbId, node: NodeId },
    #[error(
        "{vb} has {filled} replicas in its leading slots; the node set fills exactly {expected}"
    )]
    ReplicaSlots {
        vb: VbId,
        filled: usize,
        expected: usize,
    },
    #[error("active counts range from {fewest} to {most}")]
    Actives { most: usize, fewest: usize },
    #[error("replica {slot} counts range from {fewest} to {most}")]
    ReplicaSlot {
        slot: usize,
        most: usize,
        fewest: usize,
    },
    #[error("replica counts range from {fewest} to {most}")]
    Replicas { most: usize, fewest: usize },
}

/// Replica slots a node set can fill: one copy per node per vbucket.
pub fn fillable_replicas(node_count: usize, replicas: u8) -> usize {
    usize::from(replicas).min(node_count.saturating_sub(1))
}

/// Counts for every node of `nodes`, in that order, then for any other node the map uses, in
/// id order (a node being removed still holds copies until the rebalance ends).
pub fn node_counts(map: &VbMap, nodes: &[NodeId]) -> Vec<NodeCounts> {
    let mut order: Vec<NodeId> = nodes.to_vec();
    order.extend(map.nodes().into_iter().filter(|n| !nodes.contains(n)));
    let slots = usize::from(map.replicas());
    let mut counts: Vec<NodeCounts> = order
        .iter()
        .map(|&node| NodeCounts {
            node,
            active: 0,
            by_replica_slot: vec![0; slots],
            replicas: 0,
        })
        .collect();
    let index_of = |node: NodeId| {
        order
            .iter()
            .position(|&n| n == node)
            .expect("every node of the map is in the order")
    };
    for (_, chain) in map.iter() {
        if let Some(active) = chain.active {
            counts[index_of(active)].active += 1;
        }
        for (slot, replica) in chain.replicas.iter().enumerate() {
            if let Some(node) = *replica {
                let c = &mut counts[index_of(node)];
                c.by_replica_slot[slot] += 1;
                c.replicas += 1;
            }
        }
    }
    counts
}

/// Checks the balance rules of the module comment over `nodes`.
pub fn check_balance(map: &VbMap, nodes: &[NodeId]) -> Result<(), Imbalance> {
    let fillable = fillable_replicas(nodes.len(), map.replicas());
    for (vb, chain) in map.iter() {
        if chain.active.is_none() {
            return Err(Imbalance::NoActive { vb });
        }
        if let Some(node) = chain.nodes().find(|n| !nodes.contains(n)) {
            return Err(Imbalance::ForeignNode { vb, node });
        }
        let leading = chain.replicas.iter().take_while(|s| s.is_some()).count();
        let filled = chain.replicas.iter().flatten().count();
        if leading != fillable || filled != fillable {
            return Err(Imbalance::ReplicaSlots {
                vb,
                filled,
                expected: fillable,
            });
        }
    }
    let counts: Vec<NodeCounts> = node_counts(map, nodes);
    let spread = |f: &dyn Fn(&NodeCounts) -> usize| {
        let most = counts.iter().map(f).max().unwrap_or(0);
        let fewest = counts.iter().map(f).min().unwrap_or(0);
        (most, fewest)
    };
    let (most, fewest) = spread(&|c| c.active);
    if most - fewest > 1 {
        return Err(Imbalance::Actives { most, fewest });
    }
    for slot in 0..fillable {
        let (most, fewest) = spread(&|c| c.by_replica_slot[slot]);
        if most - fewest > 1 {
            return Err(Imbalance::ReplicaSlot {
                slot: slot + 1,
                most,
                fewest,
            });
        }
    }
    let (most, fewest) = spread(&|c| c.replicas);
    if most - fewest > 1 {
        return Err(Imbalance::Replicas { most, fewest });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vbmap::Chain;

    const A: NodeId = NodeId(0);
    const B: NodeId = NodeId(1);
    const C: NodeId = NodeId(2);

    fn map(replicas: u8, chains: &[(NodeId, &[Option<NodeId>])]) -> VbMap {
        let chains = chains
            .iter()
            .map(|(a, r)| Chain::new(Some(*a), r.to_vec()))
            .collect();
        VbMap::new(replicas, chains).unwrap()
    }

    #[test]
    fn counts_cover_listed_and_extra_nodes() {
        let m = map(1, &[(A, &[Some(C)]), (B, &[Some(A)])]);
        let counts = node_counts(&m, &[B, A]);
        let nodes: Vec<NodeId> = counts.iter().map(|c| c.node).collect();
        assert_eq!(nodes, vec![B, A, C]);
        assert_eq!(counts[1].active, 1);
        assert_eq!(counts[1].replicas, 1);
        assert_eq!(counts[2].by_replica_slot, vec![1]);
        assert_eq!(counts[2].copies(), 1);
    }

    #[test]
    fn a_balanced_map_passes() {
        let m = map(1, &[(A, &[Some(B)]), (B, &[Some(C)]), (C, &[Some(A)])]);
        assert_eq!(check_balance(&m, &[A, B, C]), Ok(()));
    }

    #[test]
    fn each_rule_is_enforced() {
        let lopsided = map(0, &[(A, &[]), (A, &[]), (B, &[])]);
        assert_eq!(
            check_balance(&lopsided, &[A, B, C]),
            Err(Imbalance::Actives { most: 2, fewest: 0 })
        );
        let foreign = map(0, &[(C, &[])]);
        assert!(matches!(
            check_balance(&foreign, &[A, B]),
            Err(Imbalance::ForeignNode { node: C, .. })
        ));
        let unfilled = map(1, &[(A, &[None]), (B, &[Some(A)])]);
        assert!(matches!(
            check_balance(&unfilled, &[A, B]),
            Err(Imbalance::ReplicaSlots { filled: 0, .. })
        ));
        let replicas_piled = map(
            1,
            &[
                (A, &[Some(B)]),
                (B, &[Some(A)]),
                (C, &[Some(B)]),
                (A, &[Some(B)]),
            ],
        );
        assert!(matches!(
            check_balance(&replicas_piled, &[A, B, C]),
            Err(Imbalance::ReplicaSlot { slot: 1, .. })
        ));
        let lost = VbMap::new(0, vec![Chain::lost(0)]).unwrap();
        assert!(matches!(
            check_balance(&lost, &[A]),
            Err(Imbalance::NoActive { .. })
        ));
    }

    #[test]
    fn a_single_node_fills_no_replica_slot() {
        let m = map(2, &[(A, &[None, None])]);
        assert_eq!(fillable_replicas(1, 2), 0);
        assert_eq!(check_balance(&m, &[A]), Ok(()));
    }
}
