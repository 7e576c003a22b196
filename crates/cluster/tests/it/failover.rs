//! Failover over the grid: for every placed map and every set of one, two or all nodes
//! failing, promotions go only to live nodes, in chain order, and a vbucket is lost exactly
//! when every copy was on a failed node.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::{grid, ids};
use sluice_cluster::{fail_over, NodeId, VbMap};
use std::collections::BTreeSet;

fn failure_sets(n: u32) -> Vec<Vec<NodeId>> {
    let mut sets: Vec<Vec<NodeId>> = (0..n).map(|a| vec![NodeId(a)]).collect();
    for a in 0..n {
        for b in a + 1..n {
            sets.push(vec![NodeId(a), NodeId(b)]);
        }
    }
    sets.push(ids(0..n));
    sets
}

fn check(map: &VbMap, failed: &[NodeId], case: &str) {
    let out = fail_over(map, failed);
    let dead: BTreeSet<NodeId> = failed.iter().copied().collect();
    assert_eq!(out.map.check(), Ok(()), "{case}");
    assert!(
        out.map.nodes().is_disjoint(&dead),
        "{case}: a failed node kept a copy"
    );
    let mut promoted = out.promotions.iter().peekable();
    let mut lost = out.lost.iter().peekable();
    for ((vb, old), (_, new)) in map.iter().zip(out.map.iter()) {
        let live: Vec<NodeId> = old.nodes().filter(|n| !dead.contains(n)).collect();
        // The chain closes up in order: live copies first, empty slots last.
        let slots: Vec<Option<NodeId>> = std::iter::once(new.active)
            .chain(new.replicas.iter().copied())
            .collect();
        let expected: Vec<Option<NodeId>> = live
            .iter()
            .map(|&n| Some(n))
            .chain(std::iter::repeat(None))
            .take(slots.len())
            .collect();
        assert_eq!(slots, expected, "{case} {vb}");
        let active_failed = old.active.is_some_and(|a| dead.contains(&a));
        if active_failed && !live.is_empty() {
            let p = promoted.next().expect("a promotion for this vbucket");
            assert_eq!(
                (p.vb, Some(p.from), Some(p.to)),
                (vb, old.active, new.active),
                "{case}"
            );
            assert!(!dead.contains(&p.to), "{case}: promoted onto a failed node");
        }
        if active_failed && live.is_empty() {
            assert_eq!(
                lost.next(),
                Some(&vb),
                "{case}: lost only with every copy failed"
            );
        }
        if !active_failed {
            assert_eq!(new.active, old.active, "{case} {vb}: a live active stays");
        }
    }
    assert!(
        promoted.next().is_none() && lost.next().is_none(),
        "{case}: extra reports"
    );
}

#[test]
fn failover_promotes_only_live_replicas() {
    for (n, r, v) in grid() {
        let map = sluice_cluster::place(&ids(0..n), v, r).unwrap();
        for failed in failure_sets(n) {
            check(
                &map,
                &failed,
                &format!("{n}n {r}r {v}vb, failed {failed:?}"),
            );
        }
    }
}

#[test]
fn one_failure_spreads_promotions() {
    // Each node's first replicas are spread, so its failure promotes on every survivor alike.
    for (n, r, v) in grid().filter(|&(n, r, _)| n >= 2 && r >= 1) {
        let map = sluice_cluster::place(&ids(0..n), v, r).unwrap();
        for failed in 0..n {
            let out = fail_over(&map, &[NodeId(failed)]);
            let per_node: Vec<usize> = (0..n)
                .filter(|&s| s != failed)
                .map(|s| out.promotions.iter().filter(|p| p.to == NodeId(s)).count())
                .collect();
            let spread = per_node.iter().max().unwrap() - per_node.iter().min().unwrap();
            assert!(
                spread <= 1,
                "{n}n {r}r {v}vb, n{failed} failed: {per_node:?}"
            );
            assert!(out.lost.is_empty());
        }
    }
}
