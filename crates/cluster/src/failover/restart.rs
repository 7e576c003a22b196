//! What a node that restarted without all its data does with a vbucket the map still makes
//! it active for: keep it, or hand it to a replica that is further ahead.
//!
//! Why: a durable write at level majority is acknowledged once a majority of the chain holds
//! it in memory. When the active's node crashes (or an ephemeral bucket's node restarts)
//! and comes back before anyone fails it over, its copy lacks what its flusher had not
//! written; a replica still holds those writes. Serving the copy as it is would make the
//! replicas roll back to it and lose acknowledged writes. So the node serves none of its
//! active vbuckets until each is decided here, from how far every copy in the chain is:
//!
//! - every replica answered, and none is ahead of this copy: **keep** it (a replica level
//!   with or behind it holds a prefix of its history, and catches up from it);
//! - some complete replica is ahead: **hand over** to the most advanced one (the
//!   failover's rule, `choice`): it becomes the active, this node takes its replica slot
//!   and rolls back to the new active's history;
//! - otherwise **wait**: a replica did not answer (its node may hold the only copy of a
//!   write), or the only copy ahead is incomplete (inside a disk snapshot, it cannot be
//!   promoted, and keeping this copy would lose what it holds). A later map (that replica's
//!   node failed over, say) or a later answer decides.
//!
//! Comparing seqnos across the two histories is sound: this copy's history up to its high
//! seqno is the old history it shared with the replicas (a restart starts a new branch only
//! from there), and every replica followed that old history.

use super::choice::{most_advanced, CopyPosition};
use crate::node::NodeId;
use crate::vbmap::Chain;

/// The decision for one vbucket whose active is the restarted node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestartVerdict {
    /// Serve this copy as the active.
    Keep,
    /// Publish `chain`: `to` becomes the active, the restarted node takes `to`'s slot.
    HandOver { to: NodeId, chain: Chain },
    /// Not decidable yet.
    Wait(WaitReason),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitReason {
    /// This replica's node did not say how far its copy is.
    NoAnswer(NodeId),
    /// This replica is ahead but mid-snapshot: it can neither be promoted nor left behind.
    AheadButIncomplete(NodeId),
}

impl std::fmt::Display for WaitReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WaitReason::NoAnswer(n) => write!(f, "node {n}, holding a replica, did not answer"),
            WaitReason::AheadButIncomplete(n) => write!(
                f,
                "node {n}'s replica is ahead of this copy but mid-snapshot: it cannot be \
                 promoted, and keeping this copy would lose what it holds"
            ),
        }
    }
}

/// Decides for one vbucket whose chain makes `me` the active. `own` is this node's copy as
/// warmup left it; `replica(node)` is what `node` reported for its copy (`None`: no answer).
pub fn after_restart(
    chain: &Chain,
    me: NodeId,
    own: CopyPosition,
    replica: impl Fn(NodeId) -> Option<CopyPosition>,
) -> RestartVerdict {
    assert_eq!(
        chain.active,
        Some(me),
        "decided only for vbuckets active here"
    );
    let slots: Vec<NodeId> = chain.replicas.iter().flatten().copied().collect();
    let copies: Vec<Option<CopyPosition>> = slots.iter().map(|&n| replica(n)).collect();
    let ahead =
        |c: &CopyPosition| (c.high_prepared, c.high_seqno) > (own.high_prepared, own.high_seqno);
    for (&node, copy) in slots.iter().zip(&copies) {
        match copy {
            None => return RestartVerdict::Wait(WaitReason::NoAnswer(node)),
            Some(c) if !c.complete && ahead(c) => {
                return RestartVerdict::Wait(WaitReason::AheadButIncomplete(node))
            }
            Some(_) => {}
        }
    }
    let best =
        most_advanced(copies.iter().copied()).filter(|&at| copies[at].is_some_and(|c| ahead(&c)));
    let Some(at) = best else {
        return RestartVerdict::Keep;
    };
    let to = slots[at];
    let replicas = chain
        .replicas
        .iter()
        .map(|slot| if *slot == Some(to) { Some(me) } else { *slot })
        .collect();
    RestartVerdict::HandOver {
        to,
        chain: Chain::new(Some(to), replicas),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_types::Seqno;

    const A: NodeId = NodeId(0);
    const B: NodeId = NodeId(1);
    const C: NodeId = NodeId(2);

    fn pos(prepared: u64, high: u64, complete: bool) -> CopyPosition {
        CopyPosition {
            high_prepared: Seqno(prepared),
            high_seqno: Seqno(high),
            complete,
        }
    }

    fn decide(
        replicas: &[Option<NodeId>],
        own: (u64, u64),
        answers: &[(NodeId, (u64, u64, bool))],
    ) -> RestartVerdict {
        let chain = Chain::new(Some(A), replicas.to_vec());
        let answers: Vec<(NodeId, CopyPosition)> = answers
            .iter()
            .map(|&(n, (p, h, c))| (n, pos(p, h, c)))
            .collect();
        after_restart(&chain, A, pos(own.0, own.1, true), |n| {
            answers.iter().find(|(m, _)| *m == n).map(|(_, p)| *p)
        })
    }

    fn hand_over(to: NodeId, replicas: &[Option<NodeId>]) -> RestartVerdict {
        RestartVerdict::HandOver {
            to,
            chain: Chain::new(Some(to), replicas.to_vec()),
        }
    }

    /// (what, the chain's replica slots, own (prepared, high), answers, verdict).
    type Case<'a> = (
        &'a str,
        &'a [Option<NodeId>],
        (u64, u64),
        Vec<(NodeId, (u64, u64, bool))>,
        RestartVerdict,
    );

    #[test]
    fn table() {
        use RestartVerdict::*;
        use WaitReason::*;
        let one = [Some(B)];
        let two = [Some(B), Some(C)];
        let cases: Vec<Case> = vec![
            (
                "no replica slot filled: nobody to ask",
                &[None],
                (0, 5),
                vec![],
                Keep,
            ),
            ("no replica slot at all", &[], (0, 5), vec![], Keep),
            (
                "the replica is level",
                &one,
                (3, 9),
                vec![(B, (3, 9, true))],
                Keep,
            ),
            (
                "the replica is behind",
                &one,
                (3, 9),
                vec![(B, (3, 7, true))],
                Keep,
            ),
            (
                "a replica behind, mid-snapshot: it holds nothing this copy lacks",
                &one,
                (3, 9),
                vec![(B, (3, 8, false))],
                Keep,
            ),
            (
                "the replica holds writes the crash lost",
                &one,
                (3, 9),
                vec![(B, (3, 12, true))],
                hand_over(B, &[Some(A)]),
            ),
            (
                "the replica holds a prepare the crash lost",
                &one,
                (3, 9),
                vec![(B, (10, 10, true))],
                hand_over(B, &[Some(A)]),
            ),
            ("no answer: wait", &one, (3, 9), vec![], Wait(NoAnswer(B))),
            (
                "ahead but mid-snapshot: wait",
                &one,
                (3, 9),
                vec![(B, (3, 12, false))],
                Wait(AheadButIncomplete(B)),
            ),
            (
                "the second replica is the one ahead",
                &two,
                (3, 9),
                vec![(B, (3, 9, true)), (C, (11, 11, true))],
                hand_over(C, &[Some(B), Some(A)]),
            ),
            (
                "both ahead: the most advanced",
                &two,
                (3, 9),
                vec![(B, (3, 10, true)), (C, (3, 12, true))],
                hand_over(C, &[Some(B), Some(A)]),
            ),
            (
                "both ahead and level: the first",
                &two,
                (3, 9),
                vec![(B, (3, 12, true)), (C, (3, 12, true))],
                hand_over(B, &[Some(A), Some(C)]),
            ),
            (
                "one ahead, the other silent: wait for it",
                &two,
                (3, 9),
                vec![(B, (3, 12, true))],
                Wait(NoAnswer(C)),
            ),
            (
                "one slot empty after a failover",
                &[Some(B), None],
                (3, 9),
                vec![(B, (3, 12, true))],
                hand_over(B, &[Some(A), None]),
            ),
        ];
        for (what, replicas, own, answers, want) in cases {
            assert_eq!(decide(replicas, own, &answers), want, "{what}");
        }
    }

    #[test]
    fn a_hand_over_keeps_the_chain_valid() {
        let chain = Chain::new(Some(A), vec![Some(B), Some(C)]);
        let RestartVerdict::HandOver { chain: after, .. } =
            after_restart(&chain, A, pos(0, 1, true), |_| Some(pos(0, 2, true)))
        else {
            panic!("a replica ahead is handed the vbucket");
        };
        let mut before: Vec<NodeId> = chain.nodes().collect();
        let mut now: Vec<NodeId> = after.nodes().collect();
        before.sort();
        now.sort();
        assert_eq!(before, now, "the same nodes hold copies");
        assert_eq!(after.replicas.len(), chain.replicas.len());
    }

    #[test]
    #[should_panic(expected = "active here")]
    fn only_for_vbuckets_active_here() {
        let chain = Chain::new(Some(B), vec![Some(A)]);
        after_restart(&chain, A, pos(0, 0, true), |_| None);
    }
}
