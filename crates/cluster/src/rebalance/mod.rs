//! `plan_rebalance`: from the current map to a balanced map over a new node set, moving as
//! little data as it can, as an ordered list of vbucket moves.
//!
//! - `assign` computes the target slot by slot (actives, then each replica): quotas that meet
//!   the rules of `balance`, filled by `slot_fill` at the least data movement;
//! - `moves` derives each changed vbucket's steps (builds, takeover, drops) and orders them.
//!
//! Three ways to a target, tried in order (`PlanMethod` says which one was used):
//! 1. the current map already meets every balance rule over the target nodes: it is the
//!    target, and nothing moves (moving to another balanced map would be pure cost);
//! 2. the copy-keeping assignment of `assign`;
//! 3. if that could not meet the balance rules (each slot's quotas are fixed before it is
//!    filled, with no proof that they always admit an assignment), a fresh `place` over the
//!    target nodes, which always does but ignores where the copies are. The property tests
//!    assert it is never needed over their grid.

mod assign;
mod moves;
mod slot_fill;

pub use moves::{Takeover, VbMove};

use crate::balance::check_balance;
use crate::limits::REPLICAS_MAX;
use crate::node::{check_node_set, NodeId, NodeSetError};
use crate::placement::place;
use crate::vbmap::{Chain, MapError, VbMap};
use sluice_types::VbId;

/// How the target was found (see the module comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanMethod {
    AlreadyBalanced,
    KeepCopies,
    FreshPlacement,
}

/// A rebalance that cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RebalanceError {
    #[error(transparent)]
    Nodes(#[from] NodeSetError),
    #[error("{replicas} replicas: a bucket has at most {max}")]
    Replicas { replicas: u8, max: u8 },
}

/// A plan that does not fit the map it is applied to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error("the plan is for {expected} vbuckets; the map has {actual}")]
    VbucketCount { expected: u16, actual: u16 },
    #[error("{vb} is {actual} in the map; the plan moves it from {expected}")]
    ChainMismatch {
        vb: VbId,
        expected: Chain,
        actual: Chain,
    },
    #[error(transparent)]
    Map(#[from] MapError),
}

/// The target map and the moves that reach it, in the order to carry them out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RebalancePlan {
    target: VbMap,
    moves: Vec<VbMove>,
    method: PlanMethod,
}

/// Plans the rebalance of `current` onto `target_nodes` with `replicas` replica slots. Nodes
/// in the map but not in `target_nodes` are emptied; nodes only in `target_nodes` receive
/// their share. A changed replica count is applied too (the last slots go first).
pub fn plan_rebalance(
    current: &VbMap,
    target_nodes: &[NodeId],
    replicas: u8,
) -> Result<RebalancePlan, RebalanceError> {
    check_node_set(target_nodes)?;
    if replicas > REPLICAS_MAX {
        return Err(RebalanceError::Replicas {
            replicas,
            max: REPLICAS_MAX,
        });
    }
    let (target, method) =
        if current.replicas() == replicas && check_balance(current, target_nodes).is_ok() {
            (current.clone(), PlanMethod::AlreadyBalanced)
        } else if let Some(kept) = assign::keep_copies(current, target_nodes, replicas) {
            (kept, PlanMethod::KeepCopies)
        } else {
            let fresh = place(target_nodes, current.num_vbuckets(), replicas)
                .expect("inputs were checked above and the map has 1..=VBUCKETS_MAX vbuckets");
            (fresh, PlanMethod::FreshPlacement)
        };
    debug_assert_eq!(check_balance(&target, target_nodes), Ok(()));
    let moves = current
        .iter()
        .zip(target.iter())
        .filter(|((_, old), (_, new))| !old.same_placement(new))
        .map(|((vb, old), (_, new))| VbMove::new(vb, old.clone(), new.clone()))
        .collect();
    Ok(RebalancePlan {
        target,
        moves: moves::order_moves(moves),
        method,
    })
}

impl RebalancePlan {
    pub fn target(&self) -> &VbMap {
        &self.target
    }

    /// Moves in execution order (see `moves::order_moves` for the rule).
    pub fn moves(&self) -> &[VbMove] {
        &self.moves
    }

    pub fn method(&self) -> PlanMethod {
        self.method
    }

    /// Copies streamed to nodes that did not hold them: the plan's data movement.
    pub fn copies_built(&self) -> usize {
        self.moves.iter().map(|m| m.builds().len()).sum()
    }

    pub fn takeovers(&self) -> usize {
        self.moves.iter().filter(|m| m.takeover().is_some()).count()
    }

    /// Replays the plan on `current`: every move's old chain must be what the map holds. The
    /// result is the target; used to check plans. An executor publishing a map per move does
    /// the same one move at a time (`VbMap::with_chain` on `current.with_replicas(..)`).
    pub fn apply(&self, current: &VbMap) -> Result<VbMap, ApplyError> {
        let expected = self.target.num_vbuckets();
        let actual = current.num_vbuckets();
        if expected != actual {
            return Err(ApplyError::VbucketCount { expected, actual });
        }
        let replicas = self.target.replicas();
        let mut chains: Vec<Chain> = current.iter().map(|(_, c)| c.resized(replicas)).collect();
        for mv in &self.moves {
            let held = current.chain(mv.vb()).expect("vbucket counts match");
            if held != mv.old_chain() {
                return Err(ApplyError::ChainMismatch {
                    vb: mv.vb(),
                    expected: mv.old_chain().clone(),
                    actual: held.clone(),
                });
            }
            chains[usize::from(mv.vb().0)] = mv.new_chain().clone();
        }
        Ok(VbMap::new(replicas, chains)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(range: std::ops::Range<u32>) -> Vec<NodeId> {
        range.map(NodeId).collect()
    }

    #[test]
    fn bad_input_is_refused() {
        let map = place(&ids(0..2), 4, 1).unwrap();
        assert_eq!(
            plan_rebalance(&map, &[], 1),
            Err(RebalanceError::Nodes(NodeSetError::Empty))
        );
        assert!(matches!(
            plan_rebalance(&map, &ids(0..2), 9),
            Err(RebalanceError::Replicas { .. })
        ));
    }

    #[test]
    fn a_balanced_map_stays_put() {
        let map = place(&ids(0..3), 64, 2).unwrap();
        let plan = plan_rebalance(&map, &ids(0..3), 2).unwrap();
        assert_eq!(plan.method(), PlanMethod::AlreadyBalanced);
        assert!(plan.moves().is_empty());
        assert_eq!(plan.target(), &map);
    }

    #[test]
    fn adding_a_node_moves_only_its_share() {
        let map = place(&ids(0..3), 64, 1).unwrap();
        let plan = plan_rebalance(&map, &ids(0..4), 1).unwrap();
        assert_eq!(plan.method(), PlanMethod::KeepCopies);
        // The new node holds 16 actives and 16 replicas; nothing else needs copying.
        assert_eq!(plan.copies_built(), 32);
        assert_eq!(plan.apply(&map).unwrap(), *plan.target());
    }

    #[test]
    fn apply_refuses_a_map_that_moved_on() {
        let map = place(&ids(0..2), 4, 1).unwrap();
        let plan = plan_rebalance(&map, &ids(0..3), 1).unwrap();
        let first = &plan.moves()[0];
        let other = map
            .with_chain(first.vb(), Chain::new(Some(NodeId(7)), vec![None]))
            .unwrap();
        assert!(matches!(
            plan.apply(&other),
            Err(ApplyError::ChainMismatch { .. })
        ));
        let bigger = place(&ids(0..2), 8, 1).unwrap();
        assert!(matches!(
            plan.apply(&bigger),
            Err(ApplyError::VbucketCount { .. })
        ));
    }
}
