//! Rebalance over the grid: from every placed map to added, removed, swapped and failed-over
//! node sets and changed replica counts. The target is balanced, the moves turn the current
//! map into it exactly, their steps agree with the chains, and data moves only as needed.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::{assert_balanced, grid, ids};
use sluice_cluster::balance::fillable_replicas;
use sluice_cluster::{
    fail_over, node_counts, place, plan_rebalance, NodeId, PlanMethod, RebalancePlan, VbMap,
};
use std::collections::BTreeSet;

/// Checks everything a plan promises, and returns it.
fn check_plan(current: &VbMap, nodes: &[NodeId], replicas: u8, case: &str) -> RebalancePlan {
    let plan = plan_rebalance(current, nodes, replicas).unwrap();
    let target = plan.target();
    assert_balanced(target, nodes, case);
    assert_eq!(target.replicas(), replicas, "{case}");
    assert_eq!(
        plan.apply(current).as_ref(),
        Ok(target),
        "{case}: moves reach the target"
    );
    assert_ne!(
        plan.method(),
        PlanMethod::FreshPlacement,
        "{case}: fell back"
    );
    let moved: BTreeSet<_> = plan.moves().iter().map(|m| m.vb()).collect();
    assert_eq!(
        moved.len(),
        plan.moves().len(),
        "{case}: a vbucket moved twice"
    );
    for ((vb, old), (_, new)) in current.iter().zip(target.iter()) {
        assert_eq!(!old.same_placement(new), moved.contains(&vb), "{case} {vb}");
    }
    for m in plan.moves() {
        let (old, new) = (m.old_chain(), m.new_chain());
        assert_eq!(Some(old), current.chain(m.vb()), "{case}");
        assert_eq!(Some(new), target.chain(m.vb()), "{case}");
        assert_eq!(
            m.source(),
            old.active,
            "{case}: builds stream from the current active"
        );
        for b in m.builds() {
            assert!(
                new.holds(b) && !old.holds(b),
                "{case} {}: build {b}",
                m.vb()
            );
        }
        for d in m.drops() {
            assert!(old.holds(d) && !new.holds(d), "{case} {}: drop {d}", m.vb());
        }
        let built = m.builds().len() + new.nodes().filter(|&n| old.holds(n)).count();
        assert_eq!(
            built,
            new.nodes().count(),
            "{case}: every new copy is kept or built"
        );
        match m.takeover() {
            Some(t) => assert_eq!((Some(t.from), Some(t.to)), (old.active, new.active)),
            None => assert!(old.active.is_none() || old.active == new.active, "{case}"),
        }
    }
    plan
}

/// Copies the given nodes hold in `map`.
fn copies_on(map: &VbMap, nodes: &[NodeId]) -> usize {
    node_counts(map, nodes)
        .iter()
        .filter(|c| nodes.contains(&c.node))
        .map(|c| c.copies())
        .sum()
}

/// The fewest copies any plan must build: each target node needs at least as many new
/// copies as it holds more in the target than today.
fn least_builds(current: &VbMap, target: &VbMap, nodes: &[NodeId]) -> usize {
    nodes
        .iter()
        .map(|&n| copies_on(target, &[n]).saturating_sub(copies_on(current, &[n])))
        .sum()
}

/// Builds stay at or next to the lower bound (slots are optimised one at a time, not jointly,
/// so a few shapes copy one or two more than the bound).
fn assert_few_builds(plan: &RebalancePlan, current: &VbMap, nodes: &[NodeId], case: &str) {
    let least = least_builds(current, plan.target(), nodes);
    let built = plan.copies_built();
    if current.num_vbuckets() >= 16 {
        assert!(
            built <= least + 1 + least / 16,
            "{case}: built {built}, at least {least}"
        );
    } else {
        assert!(
            built <= least + 2,
            "{case}: built {built}, at least {least}"
        );
    }
}

#[test]
fn the_same_nodes_move_nothing() {
    for (n, r, v) in grid() {
        let nodes = ids(0..n);
        let map = place(&nodes, v, r).unwrap();
        let plan = plan_rebalance(&map, &nodes, r).unwrap();
        assert!(plan.moves().is_empty(), "{n}n {r}r {v}vb");
        assert_eq!(plan.method(), PlanMethod::AlreadyBalanced);
        // Listing the same nodes in another order changes nothing either.
        let reversed: Vec<NodeId> = nodes.iter().rev().copied().collect();
        assert!(plan_rebalance(&map, &reversed, r)
            .unwrap()
            .moves()
            .is_empty());
    }
}

#[test]
fn adding_a_node_builds_only_its_share() {
    for (n, r, v) in grid() {
        let map = place(&ids(0..n), v, r).unwrap();
        let after = ids(0..n + 1);
        let case = format!("{n}n -> {}n, {r}r {v}vb", n + 1);
        let plan = check_plan(&map, &after, r, &case);
        assert_few_builds(&plan, &map, &after, &case);
        if v >= 16 && fillable_replicas(n as usize, r) == fillable_replicas(n as usize + 1, r) {
            // Exactly the newcomer's copies: nothing moves between the old nodes.
            assert_eq!(
                plan.copies_built(),
                copies_on(plan.target(), &[NodeId(n)]),
                "{case}"
            );
        }
    }
}

#[test]
fn removing_a_node_rebuilds_its_copies_elsewhere() {
    for (n, r, v) in grid().filter(|&(n, _, _)| n >= 2) {
        for leaving in [0, n - 1] {
            let before = ids(0..n);
            let after: Vec<NodeId> = before.iter().copied().filter(|x| x.0 != leaving).collect();
            let map = place(&before, v, r).unwrap();
            let case = format!("{n}n without n{leaving}, {r}r {v}vb");
            let plan = check_plan(&map, &after, r, &case);
            assert_few_builds(&plan, &map, &after, &case);
            assert_eq!(copies_on(plan.target(), &[NodeId(leaving)]), 0, "{case}");
            let same_slots =
                fillable_replicas(n as usize, r) == fillable_replicas(n as usize - 1, r);
            if v >= 16 && same_slots {
                // Each copy on the leaving node is rebuilt once; nothing else moves.
                assert_eq!(
                    plan.copies_built(),
                    copies_on(&map, &[NodeId(leaving)]),
                    "{case}"
                );
            }
        }
    }
}

#[test]
fn swapping_a_node_and_changing_replicas() {
    for (n, r, v) in grid() {
        let nodes = ids(0..n);
        let map = place(&nodes, v, r).unwrap();
        let swapped: Vec<NodeId> = (1..=n).map(NodeId).collect();
        let case = format!("{n}n swap n0 for n{n}, {r}r {v}vb");
        let plan = check_plan(&map, &swapped, r, &case);
        assert_few_builds(&plan, &map, &swapped, &case);
        for r2 in 0..=3 {
            let plan = check_plan(&map, &nodes, r2, &format!("{n}n {r}r -> {r2}r {v}vb"));
            if fillable_replicas(nodes.len(), r2) <= fillable_replicas(nodes.len(), r) {
                assert_eq!(plan.copies_built(), 0, "{n}n {r}r -> {r2}r {v}vb");
            }
        }
        let elsewhere = ids(100..100 + n);
        let plan = check_plan(
            &map,
            &elsewhere,
            r,
            &format!("{n}n to new nodes, {r}r {v}vb"),
        );
        assert_eq!(plan.copies_built(), copies_on(plan.target(), &elsewhere));
    }
}

/// The orchestrator changes a bucket's replica count by publishing the map resized first
/// (empty slots added, the last replicas cut) and planning from it: the plan fills or keeps
/// exactly what the resized map holds, building no more than planning from the old map.
#[test]
fn a_replica_count_change_plans_from_the_resized_map() {
    for (n, r, v) in grid() {
        let nodes = ids(0..n);
        let map = place(&nodes, v, r).unwrap();
        for r2 in (0..=3).filter(|&r2| r2 != r) {
            let case = format!("{n}n {r}r -> {r2}r {v}vb, from the resized map");
            let resized = map.with_replicas(r2).unwrap();
            let plan = check_plan(&resized, &nodes, r2, &case);
            let direct = plan_rebalance(&map, &nodes, r2).unwrap();
            assert!(
                plan.copies_built() <= direct.copies_built(),
                "{case}: builds {} where the old map's plan builds {}",
                plan.copies_built(),
                direct.copies_built()
            );
        }
    }
}

#[test]
fn after_a_failover_the_survivors_are_rebalanced() {
    for (n, r, v) in grid().filter(|&(n, _, _)| n >= 2) {
        let nodes = ids(0..n);
        let map = place(&nodes, v, r).unwrap();
        for failed in [vec![NodeId(0)], vec![NodeId(0), NodeId(n - 1)]] {
            let out = fail_over(&map, &failed);
            let survivors: Vec<NodeId> = nodes
                .iter()
                .copied()
                .filter(|x| !failed.contains(x))
                .collect();
            let case = format!("{n}n {r}r {v}vb, failed {failed:?}");
            if survivors.is_empty() {
                continue;
            }
            let plan = check_plan(&out.map, &survivors, r, &case);
            // Lost vbuckets come back empty; the rest are rebuilt from their active.
            for m in plan.moves() {
                assert_eq!(m.source().is_none(), out.lost.contains(&m.vb()), "{case}");
            }
        }
    }
}

#[test]
fn rebalancing_a_target_again_moves_nothing() {
    for (n, r, v) in grid() {
        let map = place(&ids(0..n), v, r).unwrap();
        let plan = plan_rebalance(&map, &ids(1..n + 2), r).unwrap();
        let again = plan_rebalance(plan.target(), &ids(1..n + 2), r).unwrap();
        assert!(again.moves().is_empty(), "{n}n {r}r {v}vb");
    }
}
