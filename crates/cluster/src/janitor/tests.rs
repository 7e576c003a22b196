use super::*;
use crate::node::NodeInfo;
use crate::vbmap::VbMap;

const A: NodeId = NodeId(0);
const B: NodeId = NodeId(1);
const C: NodeId = NodeId(2);
const D: NodeId = NodeId(3);

use VbState::{Active as Act, Dead, Pending as Pen, Replica as Rep};

/// A map over nodes A..D whose chains are given per vbucket, at revision `rev` (each map
/// change bumps it from 1).
fn map(chains: &[(NodeId, &[NodeId])], rev: u64) -> ClusterMap {
    let nodes = [A, B, C, D]
        .iter()
        .map(|&id| NodeInfo {
            id,
            host: "127.0.0.1".into(),
            kv_port: 11210 + id.0 as u16,
            admin_port: 8091 + id.0 as u16,
            tls: None,
            services: crate::Services::ALL,
        })
        .collect();
    let replicas = chains[0].1.len() as u8;
    let vbmap = VbMap::new(
        replicas,
        chains
            .iter()
            .map(|(a, r)| Chain::new(Some(*a), r.iter().copied().map(Some).collect()))
            .collect(),
    )
    .unwrap();
    let mut m = ClusterMap::new(nodes, vbmap).unwrap();
    while m.rev().0 < rev {
        m = m.with_vbmap(m.vbmap().clone()).unwrap();
    }
    m
}

/// One copy in a table: (vb, state, high seqno).
type Copy = (u16, VbState, u64);

/// Reports: per node, its revision and the copies it holds.
fn reports(rev: u64, per_node: &[(NodeId, &[Copy])]) -> BTreeMap<NodeId, Option<NodeReport>> {
    per_node
        .iter()
        .map(|(n, copies)| {
            let copies = copies
                .iter()
                .map(|&(vb, state, high)| {
                    let c = CopyReport {
                        state,
                        high_seqno: Seqno(high),
                        held: false,
                        building: false,
                    };
                    (VbId(vb), c)
                })
                .collect();
            let map_rev = Rev(rev);
            (*n, Some(NodeReport { map_rev, copies }))
        })
        .collect()
}

/// Two passes on the same input: what the second carries out.
fn twice(map: &ClusterMap, reports: &BTreeMap<NodeId, Option<NodeReport>>) -> Pass {
    let mut j = Janitor::new();
    let first = j.pass(map, reports, false);
    assert!(
        first.repairs.is_empty(),
        "nothing is repaired on first sight"
    );
    j.pass(map, reports, false)
}

#[test]
fn copies_that_agree_with_the_map_are_settled() {
    let m = map(&[(A, &[B]), (B, &[C])], 1);
    let r = reports(
        1,
        &[
            (A, &[(0, Act, 5)]),
            (B, &[(0, Rep, 5), (1, Act, 9)]),
            (C, &[(1, Rep, 9)]),
            (D, &[]),
        ],
    );
    let p = twice(&m, &r);
    assert_eq!(p.repairs, vec![]);
    assert!(p.settled);
}

#[test]
fn a_finished_takeover_the_map_missed_is_followed() {
    // vb0 [A, B] moved to C: C active, A dead; the orchestrator died before the chain.
    let m = map(&[(A, &[B])], 1);
    let r = reports(
        1,
        &[
            (A, &[(0, Dead, 7)]),
            (B, &[(0, Rep, 7)]),
            (C, &[(0, Act, 7)]),
            (D, &[]),
        ],
    );
    let p = twice(&m, &r);
    // B keeps its slot; no slot is free for A, whose copy is moved out (dropped later, once
    // the map no longer lists it in the chain).
    let chain = Chain::new(Some(C), vec![Some(B)]);
    assert_eq!(
        p.repairs,
        vec![Repair::FollowTakeover { vb: VbId(0), chain }]
    );
    assert!(!p.settled);
}

#[test]
fn a_takeover_by_a_replica_swaps_the_two() {
    let m = map(&[(A, &[B, C])], 1);
    let r = reports(
        1,
        &[
            (A, &[(0, Dead, 7)]),
            (B, &[(0, Act, 7)]),
            (C, &[(0, Rep, 7)]),
            (D, &[]),
        ],
    );
    let chain = Chain::new(Some(B), vec![Some(A), Some(C)]);
    assert_eq!(
        twice(&m, &r).repairs,
        vec![Repair::FollowTakeover { vb: VbId(0), chain }]
    );
}

#[test]
fn a_silent_node_does_not_stop_following_a_takeover() {
    // D (holding nothing of vb0) is down: the two ends of the takeover answered.
    let m = map(&[(A, &[B])], 1);
    let mut r = reports(
        1,
        &[
            (A, &[(0, Dead, 7)]),
            (B, &[(0, Rep, 7)]),
            (C, &[(0, Act, 7)]),
        ],
    );
    r.insert(D, None);
    let p = twice(&m, &r);
    assert_eq!(p.repairs.len(), 1, "{p:?}");
    assert_eq!(p.silent, vec![D]);
    assert!(!p.settled);
}

#[test]
fn an_active_that_did_not_answer_is_left_to_failover() {
    let m = map(&[(A, &[B])], 1);
    let mut r = reports(1, &[(B, &[(0, Rep, 7)]), (C, &[(0, Act, 7)]), (D, &[])]);
    r.insert(A, None);
    assert_eq!(twice(&m, &r).repairs, vec![]);
}

#[test]
fn two_actives_elsewhere_are_not_guessed_between() {
    let m = map(&[(A, &[B])], 1);
    let r = reports(
        1,
        &[
            (A, &[(0, Dead, 7)]),
            (B, &[(0, Act, 7)]),
            (C, &[(0, Act, 7)]),
            (D, &[]),
        ],
    );
    assert_eq!(twice(&m, &r).repairs, vec![]);
}

#[test]
fn an_interrupted_takeover_reactivates_the_maps_active() {
    // A went dead for a takeover to C that never finished; C restarted and is dead too.
    let m = map(&[(A, &[B])], 1);
    let r = reports(
        1,
        &[
            (A, &[(0, Dead, 7)]),
            (B, &[(0, Rep, 7)]),
            (C, &[(0, Dead, 7)]),
            (D, &[]),
        ],
    );
    let p = twice(&m, &r);
    // C's dead copy, outside the chain, is dropped as well.
    assert_eq!(
        p.repairs,
        vec![
            Repair::Reactivate {
                vb: VbId(0),
                node: A
            },
            Repair::Drop {
                vb: VbId(0),
                node: C
            },
        ]
    );
}

#[test]
fn no_reactivation_while_a_copy_is_pending_or_a_node_is_silent() {
    let m = map(&[(A, &[B])], 1);
    // C pending: the takeover may still finish, and C would turn active beside A.
    let pending = reports(
        1,
        &[
            (A, &[(0, Dead, 7)]),
            (B, &[(0, Rep, 7)]),
            (C, &[(0, Pen, 7)]),
            (D, &[]),
        ],
    );
    assert_eq!(twice(&m, &pending).repairs, vec![]);
    // C silent: it may hold the copy active.
    let mut silent = reports(1, &[(A, &[(0, Dead, 7)]), (B, &[(0, Rep, 7)]), (D, &[])]);
    silent.insert(C, None);
    assert_eq!(twice(&m, &silent).repairs, vec![]);
}

#[test]
fn a_held_copy_is_the_restarted_nodes_to_decide() {
    let m = map(&[(A, &[B])], 1);
    let mut r = reports(
        1,
        &[
            (A, &[(0, Dead, 3)]),
            (B, &[(0, Rep, 7)]),
            (C, &[]),
            (D, &[]),
        ],
    );
    if let Some(Some(a)) = r.get_mut(&A) {
        a.copies.get_mut(&VbId(0)).unwrap().held = true;
    }
    assert_eq!(twice(&m, &r).repairs, vec![]);
}

#[test]
fn only_dead_copies_with_data_outside_the_chain_are_dropped() {
    let m = map(&[(A, &[B]), (B, &[A])], 1);
    let r = reports(
        1,
        &[
            (A, &[(0, Act, 4), (1, Rep, 4)]),
            (B, &[(0, Rep, 4), (1, Act, 4)]),
            // vb0 moved out of C (dropped); vb1: an empty dead copy, and D's build (replica).
            (C, &[(0, Dead, 4), (1, Dead, 0)]),
            (D, &[(1, Rep, 2)]),
        ],
    );
    assert_eq!(
        twice(&m, &r).repairs,
        vec![Repair::Drop {
            vb: VbId(0),
            node: C
        }]
    );
}

#[test]
fn a_node_on_another_revision_stops_the_pass() {
    let m = map(&[(A, &[B])], 2);
    let mut r = reports(
        2,
        &[
            (A, &[(0, Dead, 7)]),
            (B, &[(0, Rep, 7)]),
            (C, &[(0, Act, 7)]),
        ],
    );
    r.extend(reports(1, &[(D, &[])]));
    let mut j = Janitor::new();
    for _ in 0..3 {
        let p = j.pass(&m, &r, false);
        assert_eq!(p.repairs, vec![]);
        assert_eq!(p.skipped, Some((D, Rev(1))));
        assert!(!p.settled);
    }
}

#[test]
fn a_repair_seen_once_or_on_another_revision_waits() {
    let r = reports(
        1,
        &[
            (A, &[(0, Dead, 7)]),
            (B, &[(0, Rep, 7)]),
            (C, &[(0, Act, 7)]),
            (D, &[]),
        ],
    );
    let m1 = map(&[(A, &[B])], 1);
    let mut j = Janitor::new();
    assert_eq!(j.pass(&m1, &r, false).repairs, vec![]);
    // The map moved on between the passes: start over.
    let m2 = map(&[(A, &[B])], 2);
    let r2 = reports(
        2,
        &[
            (A, &[(0, Dead, 7)]),
            (B, &[(0, Rep, 7)]),
            (C, &[(0, Act, 7)]),
            (D, &[]),
        ],
    );
    assert_eq!(j.pass(&m2, &r2, false).repairs, vec![]);
    assert_eq!(j.pass(&m2, &r2, false).repairs.len(), 1);
    // A takeover in flight the first time and finished the second is not a repair yet.
    j.reset();
    let before = reports(
        2,
        &[
            (A, &[(0, Dead, 7)]),
            (B, &[(0, Rep, 7)]),
            (C, &[(0, Pen, 7)]),
            (D, &[]),
        ],
    );
    assert_eq!(j.pass(&m2, &before, false).repairs, vec![]);
    assert_eq!(j.pass(&m2, &r2, false).repairs, vec![]);
}

#[test]
fn builds_are_stopped_only_when_no_rebalance_is_recorded() {
    let m = map(&[(A, &[B])], 1);
    let mut r = reports(
        1,
        &[
            (A, &[(0, Act, 7)]),
            (B, &[(0, Rep, 7)]),
            (C, &[(0, Rep, 5)]),
            (D, &[]),
        ],
    );
    if let Some(Some(c)) = r.get_mut(&C) {
        c.copies.get_mut(&VbId(0)).unwrap().building = true;
    }
    // A recorded rebalance (to be resumed) may still use it.
    let mut j = Janitor::new();
    j.pass(&m, &r, true);
    assert_eq!(j.pass(&m, &r, true).repairs, vec![]);
    // None recorded: nobody will finish it.
    let mut j = Janitor::new();
    j.pass(&m, &r, false);
    assert_eq!(
        j.pass(&m, &r, false).repairs,
        vec![Repair::StopBuild {
            vb: VbId(0),
            node: C
        }]
    );
}
