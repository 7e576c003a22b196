//! `place`: a balanced map for a bucket created on a set of nodes.
//!
//! With N nodes, V vbuckets and R' = min(R, N - 1) fillable replica slots:
//!
//! - **Actives, in rounds.** Vbucket `i` is in round `i / N` and its active is node `i % N`,
//!   so each full round puts exactly one active on every node, and the last, partial round of
//!   `m = V % N` vbuckets puts one on each of the first `m` nodes.
//! - **Replicas, by ring offset.** Replica `j` of a vbucket whose active is node `k` goes to
//!   node `k + d` (mod N) for an offset `d` in 1..N, the same offset for the whole round. The
//!   R' offsets of a round are distinct, so a chain never repeats a node, and within a round
//!   every replica slot is a shift of the actives: one copy per node per slot in a full round,
//!   at most one in the partial round. Per-slot counts therefore differ by at most one.
//! - **The partial round's offsets** are laid end to end on the ring (`d`, `d + m`, `d + 2m`,
//!   ...), so its `m × R'` replicas cover a contiguous arc and total replica counts also
//!   differ by at most one. If the arc wraps onto its own first block (only when 2m = N with
//!   three replicas), every node has been covered equally often by then, and the last block
//!   may start at any free offset.
//! - **Offsets cycle through a fixed order** of the L = N - 1 offsets. Round `r` gives slot
//!   `j` the offset at cycle index `(r + ⌊j·L/R'⌋) mod L`: each slot walks the whole cycle, and
//!   the slots start evenly spaced along it. A node's actives see rounds 0, 1, 2, ... in
//!   order, so for every node, per slot and over all slots, its replicas are spread over the
//!   other nodes evenly (counts differ by at most one): when it fails, the promotions (its
//!   first replicas) land on all survivors alike. The cycle is arranged so the partial
//!   round's indices hold the offsets chosen above.
//!
//! The input order is the tie-break everywhere (the first nodes take the extra actives), so
//! the same node list always gives the same map.

use crate::balance::fillable_replicas;
use crate::limits::{REPLICAS_MAX, VBUCKETS_MAX};
use crate::node::{check_node_set, NodeId, NodeSetError};
use crate::vbmap::{Chain, VbMap};

/// A placement that cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlaceError {
    #[error(transparent)]
    Nodes(#[from] NodeSetError),
    #[error("{count} vbuckets: a bucket has 1 to {max}")]
    Vbuckets { count: u16, max: u16 },
    #[error("{replicas} replicas: a bucket has at most {max}")]
    Replicas { replicas: u8, max: u8 },
}

/// A balanced map of `vbuckets` vbuckets with `replicas` replica slots over `nodes`. With
/// fewer than `replicas + 1` nodes, the slots no node can fill stay empty, as in Couchbase.
pub fn place(nodes: &[NodeId], vbuckets: u16, replicas: u8) -> Result<VbMap, PlaceError> {
    check_node_set(nodes)?;
    if vbuckets == 0 || vbuckets > VBUCKETS_MAX {
        return Err(PlaceError::Vbuckets {
            count: vbuckets,
            max: VBUCKETS_MAX,
        });
    }
    if replicas > REPLICAS_MAX {
        return Err(PlaceError::Replicas {
            replicas,
            max: REPLICAS_MAX,
        });
    }
    let n = nodes.len();
    let v = usize::from(vbuckets);
    let fillable = fillable_replicas(n, replicas);
    let cycle = offset_cycle(n, v, fillable);
    let chains = (0..v)
        .map(|i| {
            let (round, k) = (i / n, i % n);
            let replica = |slot: usize| {
                if slot >= fillable {
                    return None;
                }
                let offset = cycle[cycle_index(round, slot, cycle.len(), fillable)];
                Some(nodes[(k + offset) % n])
            };
            let slots = (0..usize::from(replicas)).map(replica).collect();
            Chain::new(Some(nodes[k]), slots)
        })
        .collect();
    let map = VbMap::new(replicas, chains).expect("placement builds a valid map");
    debug_assert_eq!(crate::balance::check_balance(&map, nodes), Ok(()));
    Ok(map)
}

/// Where in the cycle of `len` offsets round `round` finds replica `slot`'s offset. Distinct
/// for the slots of one round, since the starts ⌊j·len/fillable⌋ are distinct for fillable ≤ len.
fn cycle_index(round: usize, slot: usize, len: usize, fillable: usize) -> usize {
    (round + slot * len / fillable) % len
}

/// The cyclic order of ring offsets 1..n that rounds take their replica offsets from, with
/// the partial round's indices holding the offsets `partial_offsets` chose. Empty when no
/// replica slot can be filled.
fn offset_cycle(n: usize, vbuckets: usize, fillable: usize) -> Vec<usize> {
    if fillable == 0 {
        return Vec::new();
    }
    let len = n - 1;
    let (full_rounds, m) = (vbuckets / n, vbuckets % n);
    if m == 0 {
        return (1..n).collect();
    }
    let partial = partial_offsets(n, m, fillable);
    let mut cycle: Vec<Option<usize>> = vec![None; len];
    for (j, &d) in partial.iter().enumerate() {
        let slot = &mut cycle[cycle_index(full_rounds, j, len, fillable)];
        assert!(slot.is_none(), "a round's cycle indices are distinct");
        *slot = Some(d);
    }
    let mut rest = (1..n).filter(|d| !partial.contains(d));
    cycle
        .into_iter()
        .map(|slot| slot.unwrap_or_else(|| rest.next().expect("n - 1 offsets fill n - 1 slots")))
        .collect()
}

/// Offsets for the partial round (`m` actives on nodes 0..m, `r` replicas each): blocks of
/// `m` laid end to end on the ring, so replica totals stay within one of each other.
fn partial_offsets(n: usize, m: usize, r: usize) -> Vec<usize> {
    assert!(0 < m && m < n && 0 < r && r < n, "n={n} m={m} r={r}");
    // Prefer starting right after the actives (offset m): actives and replicas then form one
    // arc, so the extra active and the extra replicas land on different nodes. A start whose
    // blocks would land on offset 0 (the active's own node) is skipped; at most r starts are.
    let start = (0..n)
        .map(|s| (m + s) % n)
        .find(|&t| (0..r).all(|j| !(t + j * m).is_multiple_of(n)))
        .expect("at most r < n starts are excluded");
    let mut offsets: Vec<usize> = Vec::with_capacity(r);
    let mut cursor = start;
    for _ in 0..r {
        let mut d = cursor % n;
        if d == 0 || offsets.contains(&d) {
            // The arc wrapped onto its first block, so every node has been covered equally
            // often so far: any free offset starts a fresh arc without unbalancing totals.
            d = (1..n)
                .find(|x| !offsets.contains(x))
                .expect("fewer than n - 1 offsets are taken");
        }
        offsets.push(d);
        cursor = d + m;
    }
    offsets
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::{check_balance, node_counts};

    fn ids(n: u32) -> Vec<NodeId> {
        (0..n).map(NodeId).collect()
    }

    #[test]
    fn bad_input_is_refused() {
        assert_eq!(
            place(&[], 4, 1),
            Err(PlaceError::Nodes(NodeSetError::Empty))
        );
        assert!(matches!(
            place(&ids(2), 0, 1),
            Err(PlaceError::Vbuckets { .. })
        ));
        assert!(matches!(
            place(&ids(2), 1025, 1),
            Err(PlaceError::Vbuckets { .. })
        ));
        assert!(matches!(
            place(&ids(2), 4, 4),
            Err(PlaceError::Replicas { .. })
        ));
    }

    #[test]
    fn one_node_holds_every_active_and_no_replica() {
        let map = place(&ids(1), 8, 2).unwrap();
        for (_, chain) in map.iter() {
            assert_eq!(chain, &Chain::new(Some(NodeId(0)), vec![None, None]));
        }
    }

    #[test]
    fn partial_offsets_are_distinct_and_never_zero() {
        for n in 2..=9 {
            for m in 1..n {
                for r in 1..n.min(4) {
                    let offsets = partial_offsets(n, m, r);
                    assert_eq!(offsets.len(), r);
                    assert!(offsets.iter().all(|&d| 0 < d && d < n));
                    for (i, d) in offsets.iter().enumerate() {
                        assert!(!offsets[..i].contains(d), "n={n} m={m} {offsets:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_round_takes_distinct_cycle_indices() {
        for len in 1..=40 {
            for fillable in 1..=len.min(3) {
                for round in 0..2 * len {
                    let mut seen: Vec<usize> = (0..fillable)
                        .map(|j| cycle_index(round, j, len, fillable))
                        .collect();
                    seen.sort_unstable();
                    seen.dedup();
                    assert_eq!(seen.len(), fillable, "len={len} fillable={fillable}");
                }
            }
        }
    }

    #[test]
    fn the_wrapping_case_stays_balanced() {
        // 2m = N with three replicas: the third block restarts (see partial_offsets).
        let map = place(&ids(4), 6, 3).unwrap();
        assert_eq!(check_balance(&map, &ids(4)), Ok(()));
        let totals: Vec<usize> = node_counts(&map, &ids(4))
            .iter()
            .map(|c| c.replicas)
            .collect();
        assert_eq!(totals.iter().sum::<usize>(), 18);
        assert!(totals.iter().all(|&t| t == 4 || t == 5), "{totals:?}");
    }

    #[test]
    fn the_same_input_gives_the_same_map() {
        let nodes = [NodeId(9), NodeId(4), NodeId(6)];
        assert_eq!(place(&nodes, 64, 2), place(&nodes, 64, 2));
        let first = place(&nodes, 64, 2).unwrap();
        assert_eq!(
            first.chain(sluice_types::VbId(0)).unwrap().active,
            Some(NodeId(9))
        );
    }
}
