//! The copy-keeping target: a balanced map over the target nodes that leaves copies where
//! they are wherever the balance rules allow.
//!
//! Work is done on node positions in the target list; copies on nodes that leave count as
//! gone. The chain is built one slot at a time: slot 0 is the active, slot s the s-th replica.
//!
//! **Quotas per slot.** Each node takes ⌊V/N⌋ of the slot, and V mod N nodes one more:
//! - actives: the nodes holding the most actives today;
//! - replicas: the nodes that have had the fewest extra replicas in earlier slots (this alone
//!   keeps total replica counts within one), then those holding the fewest copies so far (a
//!   node cannot take more copies than vbuckets it is not already in), then those holding the
//!   most copies in this slot today (a balanced slot keeps its layout).
//!
//! **Filling a slot** within its quotas is a min-cost assignment (`slot_fill`): keeping the
//! node a vbucket has in this slot costs nothing, a node holding the copy in another slot
//! little (no data moves), any other node a full copy.
//!
//! Slots are optimised one after another, not jointly, so the whole map is not proven
//! cheapest; the result is checked against the balance rules and `None` sends the planner to
//! a fresh placement.

use super::slot_fill::{Current, SlotFill};
use crate::balance::{check_balance, fillable_replicas};
use crate::node::NodeId;
use crate::vbmap::{Chain, VbMap};
use std::cmp::Reverse;

pub(super) fn keep_copies(current: &VbMap, nodes: &[NodeId], replicas: u8) -> Option<VbMap> {
    let n = nodes.len();
    let position = |id: NodeId| nodes.iter().position(|&x| x == id);
    let cur: Vec<Current> = current
        .iter()
        .map(|(_, c)| Current {
            slots: std::iter::once(c.active)
                .chain(c.replicas.iter().copied())
                .map(|s| s.and_then(position))
                .collect(),
        })
        .collect();
    // Each vbucket's new chain as positions, active first; slots are appended one by one.
    let mut chains: Vec<Vec<usize>> = vec![Vec::new(); cur.len()];
    // Extra replicas (above ⌊V/N⌋ in a slot) each node has taken so far.
    let mut extras = vec![0usize; n];
    // pairs[a][r]: vbuckets with their active on a and a replica on r.
    let mut pairs = vec![vec![0usize; n]; n];
    for slot in 0..=fillable_replicas(n, replicas) {
        let quota = slot_quota(&cur, &chains, slot, &mut extras)?;
        let picks = SlotFill::new(&cur, &chains, slot, quota, &mut pairs).run()?;
        for (chain, pick) in chains.iter_mut().zip(picks) {
            chain.push(pick);
        }
    }
    let built = chains
        .iter()
        .map(|c| {
            let slots = (1..=usize::from(replicas))
                .map(|i| c.get(i).map(|&p| nodes[p]))
                .collect();
            Chain::new(Some(nodes[c[0]]), slots)
        })
        .collect();
    let map = VbMap::new(replicas, built).expect("slots only take nodes not yet in the chain");
    check_balance(&map, nodes).ok().map(|()| map)
}

/// Per-node quotas for `total` items: ⌊total/n⌋ each, one more for the first `total mod n`
/// nodes of `preference` (which lists every node once).
fn quotas(total: usize, preference: &[usize]) -> Vec<usize> {
    let n = preference.len();
    let mut quota = vec![total / n; n];
    for &p in preference.iter().take(total % n) {
        quota[p] += 1;
    }
    quota
}

/// The quotas for `slot` (see the module comment); `None` if some node cannot reach its
/// share because it is already in too many chains.
fn slot_quota(
    cur: &[Current],
    chains: &[Vec<usize>],
    slot: usize,
    extras: &mut [usize],
) -> Option<Vec<usize>> {
    let (v, n) = (cur.len(), extras.len());
    let mut today = vec![0usize; n];
    for p in cur.iter().filter_map(|c| c.at(slot)) {
        today[p] += 1;
    }
    if slot == 0 {
        let mut preference: Vec<usize> = (0..n).collect();
        preference.sort_by_key(|&p| (Reverse(today[p]), p));
        return Some(quotas(v, &preference));
    }
    let mut copies = vec![0usize; n];
    for &p in chains.iter().flatten() {
        copies[p] += 1;
    }
    // A node can take a copy only of vbuckets whose chain lacks it.
    let free = |p: usize| v - copies[p];
    if (0..n).any(|p| free(p) < v / n) {
        return None;
    }
    let mut preference: Vec<usize> = (0..n).filter(|&p| free(p) > v / n).collect();
    if preference.len() < v % n {
        return None;
    }
    preference.sort_by_key(|&p| (extras[p], copies[p], Reverse(today[p]), p));
    let rest: Vec<usize> = (0..n).filter(|p| !preference.contains(p)).collect();
    preference.extend(rest);
    for &p in preference.iter().take(v % n) {
        extras[p] += 1;
    }
    Some(quotas(v, &preference))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotas_give_extras_in_preference_order() {
        assert_eq!(quotas(7, &[2, 0, 1]), vec![2, 2, 3]);
        assert_eq!(quotas(6, &[2, 0, 1]), vec![2, 2, 2]);
        assert_eq!(quotas(1, &[1, 0]), vec![0, 1]);
    }

    #[test]
    fn a_node_in_every_chain_gets_no_extra() {
        // Two vbuckets, both with node 0 active: slot 1 must leave node 0 out.
        let cur: Vec<Current> = (0..2)
            .map(|_| Current {
                slots: vec![Some(0), None],
            })
            .collect();
        let chains = vec![vec![0], vec![0]];
        let mut extras = vec![0; 3];
        let quota = slot_quota(&cur, &chains, 1, &mut extras).unwrap();
        assert_eq!(quota, vec![0, 1, 1]);
        assert_eq!(extras, vec![0, 1, 1]);
    }
}
