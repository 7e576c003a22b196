//! One vbucket's move from its current chain to its target chain, the steps that follow from
//! the two chains, and the order moves are carried out in.
//!
//! A move is carried out as (architecture.md, "Cluster"):
//! 1. `builds`: each node entering the chain receives a copy by a DCP replication stream from
//!    the current active (`source`), until it has caught up;
//! 2. `takeover`: if the active changes, a takeover stream from the old active to the new one
//!    ends with the switch of states (old active → replica or dead, new one → active);
//! 3. the next map revision, with the new chain, is published;
//! 4. `drops`: nodes that left the chain delete their copy.
//!
//! Replication to the remaining replicas then follows the new chain (from the new active).

use crate::node::NodeId;
use crate::vbmap::Chain;
use sluice_types::VbId;
use std::collections::BTreeSet;
use std::fmt;

/// The active's change of node, done with a DCP takeover stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Takeover {
    pub from: NodeId,
    pub to: NodeId,
}

/// One vbucket whose chain changes. The steps are derived from the two chains, never stored,
/// so they cannot disagree with them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VbMove {
    vb: VbId,
    old_chain: Chain,
    new_chain: Chain,
}

impl VbMove {
    pub(crate) fn new(vb: VbId, old_chain: Chain, new_chain: Chain) -> VbMove {
        assert!(
            !old_chain.same_placement(&new_chain),
            "{vb}: a move must change the chain"
        );
        VbMove {
            vb,
            old_chain,
            new_chain,
        }
    }

    pub fn vb(&self) -> VbId {
        self.vb
    }

    /// The chain in the map the plan starts from.
    pub fn old_chain(&self) -> &Chain {
        &self.old_chain
    }

    /// The chain in the target map.
    pub fn new_chain(&self) -> &Chain {
        &self.new_chain
    }

    /// Where the builds stream from: the current active. `None` when no copy survives (a
    /// vbucket lost in a failover); the new nodes then start the vbucket empty.
    pub fn source(&self) -> Option<NodeId> {
        self.old_chain.active
    }

    /// Nodes entering the chain, active first: each needs a full copy before the switch.
    pub fn builds(&self) -> Vec<NodeId> {
        self.new_chain
            .nodes()
            .filter(|&n| !self.old_chain.holds(n))
            .collect()
    }

    /// The active's change of node, if it changes and there was an active to hand over from.
    pub fn takeover(&self) -> Option<Takeover> {
        match (self.old_chain.active, self.new_chain.active) {
            (Some(from), Some(to)) if from != to => Some(Takeover { from, to }),
            _ => None,
        }
    }

    /// Nodes leaving the chain: they delete their copy once the new map is out.
    pub fn drops(&self) -> Vec<NodeId> {
        self.old_chain
            .nodes()
            .filter(|&n| !self.new_chain.holds(n))
            .collect()
    }

    /// Nodes that stream data in this move: the source, the nodes built, the takeover target.
    /// Drops are local deletes and do not count.
    pub fn busy_nodes(&self) -> Vec<NodeId> {
        let mut nodes: Vec<NodeId> = self.source().into_iter().collect();
        nodes.extend(self.builds());
        nodes.extend(self.takeover().map(|t| t.to));
        nodes.sort_unstable();
        nodes.dedup();
        nodes
    }
}

impl fmt::Display for VbMove {
    /// `vb:3 [n0 n1] -> [n3 n1]: build n3 from n0; takeover n0 -> n3; drop n0`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |nodes: &[NodeId]| {
            nodes
                .iter()
                .map(NodeId::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut steps = Vec::new();
        let builds = self.builds();
        if !builds.is_empty() {
            match self.source() {
                Some(source) => steps.push(format!("build {} from {source}", list(&builds))),
                None => steps.push(format!("create {} empty", list(&builds))),
            }
        }
        if let Some(t) = self.takeover() {
            steps.push(format!("takeover {} -> {}", t.from, t.to));
        }
        let drops = self.drops();
        if !drops.is_empty() {
            steps.push(format!("drop {}", list(&drops)));
        }
        if steps.is_empty() {
            steps.push("reorder replicas".to_string());
        }
        write!(
            f,
            "{} {} -> {}: {}",
            self.vb,
            self.old_chain,
            self.new_chain,
            steps.join("; ")
        )
    }
}

/// Orders moves so consecutive ones involve different nodes.
///
/// The rule: the next move is the pending one whose busiest node (see `busy_nodes`) has been
/// busy in the fewest moves so far; ties go to the smaller total over its nodes, then to the
/// lower vbucket id. Sources and destinations therefore rotate, and an executor that runs
/// the first few moves at once spreads the backfills over the cluster. A node that is busy in
/// every move (one being added or removed) is the only one that repeats back to back.
///
/// Cost: O(moves²) comparisons, at most ~1M for 1024 vbuckets.
pub(super) fn order_moves(moves: Vec<VbMove>) -> Vec<VbMove> {
    // Nodes as dense indices, and each move's busy nodes, computed once.
    let nodes: Vec<NodeId> = moves
        .iter()
        .flat_map(VbMove::busy_nodes)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let index = |n: &NodeId| nodes.binary_search(n).expect("collected above");
    let mut pending: Vec<(Vec<usize>, VbMove)> = moves
        .into_iter()
        .map(|m| (m.busy_nodes().iter().map(index).collect(), m))
        .collect();
    let mut busy = vec![0usize; nodes.len()];
    let mut ordered = Vec::with_capacity(pending.len());
    while !pending.is_empty() {
        let key = |(involved, m): &(Vec<usize>, VbMove)| {
            let busiest = involved.iter().map(|&i| busy[i]).max().unwrap_or(0);
            let total: usize = involved.iter().map(|&i| busy[i]).sum();
            (busiest, total, m.vb)
        };
        let next = pending
            .iter()
            .enumerate()
            .min_by_key(|(_, p)| key(p))
            .map(|(i, _)| i)
            .expect("pending is not empty");
        let (involved, chosen) = pending.remove(next);
        for i in involved {
            busy[i] += 1;
        }
        ordered.push(chosen);
    }
    ordered
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: NodeId = NodeId(0);
    const B: NodeId = NodeId(1);
    const C: NodeId = NodeId(2);
    const D: NodeId = NodeId(3);

    fn chain(active: NodeId, replicas: &[NodeId]) -> Chain {
        Chain::new(Some(active), replicas.iter().map(|&n| Some(n)).collect())
    }

    #[test]
    fn steps_follow_from_the_chains() {
        let m = VbMove::new(VbId(3), chain(A, &[B]), chain(D, &[B]));
        assert_eq!(m.source(), Some(A));
        assert_eq!(m.builds(), vec![D]);
        assert_eq!(m.takeover(), Some(Takeover { from: A, to: D }));
        assert_eq!(m.drops(), vec![A]);
        assert_eq!(m.busy_nodes(), vec![A, D]);
        assert_eq!(
            m.to_string(),
            "vb:3 [n0 n1] -> [n3 n1]: build n3 from n0; takeover n0 -> n3; drop n0"
        );
    }

    #[test]
    fn promoting_a_replica_copies_nothing() {
        let m = VbMove::new(VbId(0), chain(A, &[B]), chain(B, &[A]));
        assert!(m.builds().is_empty());
        assert!(m.drops().is_empty());
        assert_eq!(m.takeover(), Some(Takeover { from: A, to: B }));
    }

    #[test]
    fn a_lost_vbucket_is_created_empty() {
        let m = VbMove::new(VbId(1), Chain::lost(1), chain(C, &[A]));
        assert_eq!(m.source(), None);
        assert_eq!(m.takeover(), None);
        assert_eq!(m.builds(), vec![C, A]);
        assert!(m.to_string().ends_with("create n2,n0 empty"));
    }

    #[test]
    #[should_panic(expected = "must change")]
    fn an_unchanged_chain_is_not_a_move() {
        VbMove::new(VbId(0), chain(A, &[B]), chain(A, &[B]));
    }

    #[test]
    fn order_rotates_over_sources() {
        // Three moves from A, one each from B and C, all to D: A's moves are spread out.
        let moves = vec![
            VbMove::new(VbId(0), chain(A, &[B]), chain(A, &[D])),
            VbMove::new(VbId(1), chain(A, &[C]), chain(A, &[D])),
            VbMove::new(VbId(2), chain(A, &[B]), chain(A, &[D])),
            VbMove::new(VbId(3), chain(B, &[A]), chain(B, &[D])),
            VbMove::new(VbId(4), chain(C, &[A]), chain(C, &[D])),
        ];
        let order: Vec<u16> = order_moves(moves).iter().map(|m| m.vb().0).collect();
        assert_eq!(order, vec![0, 3, 4, 1, 2]);
    }
}
