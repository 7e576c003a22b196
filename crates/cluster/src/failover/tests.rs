use super::*;
use crate::place;
use sluice_types::Seqno;

const A: NodeId = NodeId(0);
const B: NodeId = NodeId(1);
const C: NodeId = NodeId(2);

fn chain(active: NodeId, replicas: &[Option<NodeId>]) -> Chain {
    Chain::new(Some(active), replicas.to_vec())
}

/// A complete copy at (high prepared, high seqno).
fn at(prepared: u64, high: u64) -> Option<CopyPosition> {
    Some(CopyPosition {
        high_prepared: Seqno(prepared),
        high_seqno: Seqno(high),
        complete: true,
    })
}

/// A copy mid-snapshot at (high prepared, high seqno).
fn partial(prepared: u64, high: u64) -> Option<CopyPosition> {
    Some(CopyPosition {
        complete: false,
        ..at(prepared, high).expect("a position")
    })
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
            to: C,
            out_of_order: false,
        }]
    );
    assert!(out.lost.is_empty() && out.no_safe_copy.is_empty());
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

/// One row of `fail_over_safely`'s table: one vbucket's chain `[A, ..replicas]`, the failed
/// nodes, what B and C reported, and the chain and reports expected.
struct Row {
    case: &'static str,
    replicas: &'static [Option<NodeId>],
    failed: &'static [NodeId],
    b: Option<CopyPosition>,
    c: Option<CopyPosition>,
    want: &'static [Option<NodeId>],
    out_of_order: Option<bool>,
    no_safe_copy: bool,
    lost: bool,
}

#[rustfmt::skip]
fn rows() -> Vec<Row> {
    let r = |case, replicas, failed, b, c, want, out_of_order, no_safe_copy, lost| Row {
        case, replicas, failed, b, c, want, out_of_order, no_safe_copy, lost,
    };
    const BC: &[Option<NodeId>] = &[Some(B), Some(C)];
    vec![
        r("the first replica lags: the second is promoted, the first follows it",
          BC, &[A], at(0, 5), at(0, 9), &[Some(C), Some(B), None], Some(true), false, false),
        r("durable writes acknowledged by A and C only",
          BC, &[A], at(4, 5), at(8, 9), &[Some(C), Some(B), None], Some(true), false, false),
        r("the first replica is ahead: chain order kept",
          BC, &[A], at(8, 9), at(4, 5), &[Some(B), Some(C), None], Some(false), false, false),
        r("the prepare decides before the high seqno",
          BC, &[A], at(3, 12), at(7, 8), &[Some(C), Some(B), None], Some(true), false, false),
        r("a tie on both goes to the earlier slot",
          BC, &[A], at(4, 9), at(4, 9), &[Some(B), Some(C), None], Some(false), false, false),
        r("a tie on the prepare: the high seqno decides",
          BC, &[A], at(4, 9), at(4, 10), &[Some(C), Some(B), None], Some(true), false, false),
        r("an incomplete copy ahead loses to a complete one behind",
          BC, &[A], at(0, 5), partial(0, 9), &[Some(B), Some(C), None], Some(false), false, false),
        r("an incomplete first replica is passed over",
          BC, &[A], partial(0, 9), at(0, 5), &[Some(C), Some(B), None], Some(true), false, false),
        r("a replica that did not answer is passed over",
          BC, &[A], None, at(0, 5), &[Some(C), Some(B), None], Some(true), false, false),
        r("no answer at all: no safe copy, the first live replica as before",
          BC, &[A], None, None, &[Some(B), Some(C), None], Some(false), true, false),
        r("only incomplete copies: no safe copy",
          BC, &[A], partial(0, 5), partial(0, 9), &[Some(B), Some(C), None], Some(false), true, false),
        r("active and first replica failed: the second is the only candidate",
          BC, &[A, B], None, at(0, 5), &[Some(C), None, None], Some(false), false, false),
        r("active and first replica failed, the second did not answer",
          BC, &[A, B], at(0, 9), None, &[Some(C), None, None], Some(false), true, false),
        r("only replicas failed: unchanged, positions unread",
          BC, &[B], None, None, &[Some(A), Some(C), None], None, false, false),
        r("every copy failed: lost, not unsafe",
          BC, &[A, B, C], None, None, &[None, None, None], None, false, true),
        r("one replica, complete",
          &[Some(B)], &[A], at(0, 5), None, &[Some(B), None], Some(false), false, false),
        r("one replica, mid-snapshot",
          &[Some(B)], &[A], partial(0, 5), None, &[Some(B), None], Some(false), true, false),
        r("one replica, no answer",
          &[Some(B)], &[A], None, None, &[Some(B), None], Some(false), true, false),
        r("one replica failed: unchanged active",
          &[Some(B)], &[B], None, None, &[Some(A), None], None, false, false),
        r("an empty first slot: the live second replica",
          &[None, Some(C)], &[A], None, at(0, 1), &[Some(C), None, None], Some(false), false, false),
    ]
}

#[test]
fn fail_over_safely_promotes_the_most_advanced_complete_copy() {
    for row in rows() {
        let case = row.case;
        let map = VbMap::new(row.replicas.len() as u8, vec![chain(A, row.replicas)]).unwrap();
        let positions = |vb: VbId, n: NodeId| {
            assert_eq!(vb, VbId(0), "{case}");
            assert!(n != A, "{case}: the failed active was asked");
            match n {
                B => row.b,
                C => row.c,
                _ => None,
            }
        };
        let out = fail_over_safely(&map, row.failed, &positions);
        let got: Vec<Option<NodeId>> = out.map.chain(VbId(0)).unwrap().clone().into();
        assert_eq!(got, row.want, "{case}");
        let promoted = out.promotions.first().map(|p| (p.to, p.out_of_order));
        let want = row.out_of_order.map(|o| (row.want[0].unwrap(), o));
        assert_eq!(promoted, want, "{case}");
        assert_eq!(!out.no_safe_copy.is_empty(), row.no_safe_copy, "{case}");
        assert_eq!(!out.lost.is_empty(), row.lost, "{case}");
    }
}

#[test]
fn level_copies_give_the_first_live_rule() {
    // Every copy level and complete: the same map as `fail_over`, over several layouts.
    let level = |_: VbId, _: NodeId| at(3, 7);
    for (nodes, replicas) in [(3, 1), (3, 2), (4, 2), (5, 3)] {
        let ids: Vec<NodeId> = (0..nodes).map(NodeId).collect();
        let map = place(&ids, 16, replicas).unwrap();
        for failed in [vec![NodeId(0)], vec![NodeId(1), NodeId(2)]] {
            let safe = fail_over_safely(&map, &failed, &level);
            assert_eq!(safe, fail_over(&map, &failed), "{nodes} nodes, {failed:?}");
        }
    }
}

#[test]
fn unknown_copies_give_the_first_live_rule_and_name_every_promotion() {
    let ids: Vec<NodeId> = (0..4).map(NodeId).collect();
    let map = place(&ids, 16, 2).unwrap();
    let safe = fail_over_safely(&map, &[NodeId(0)], &|_, _| None);
    let plain = fail_over(&map, &[NodeId(0)]);
    assert_eq!(safe.map, plain.map);
    let promoted: Vec<VbId> = plain.promotions.iter().map(|p| p.vb).collect();
    assert!(!promoted.is_empty());
    assert_eq!(safe.no_safe_copy, promoted);
}
