//! The vbucket map: for each vbucket, the node holding the active copy and the nodes holding
//! its replicas, in promotion order.
//!
//! What must stay true of every `VbMap` (checked by `VbMap::new`, so a map that exists is valid):
//! - it has 1..=`VBUCKETS_MAX` vbuckets and at most `REPLICAS_MAX` replica slots per chain;
//! - every chain has exactly `replicas` replica slots. A slot is `None` when it is unfilled
//!   (fewer nodes than copies) or its node was lost; clients see it as -1;
//! - no node appears twice in one chain: two copies on one node protect nothing;
//! - a vbucket with no active has no replicas: a failover promotes any live replica before a
//!   vbucket is left without an active, so such a chain only describes lost data.
//!
//! Serialized (for the replicated metadata), a chain is the row clients see without the node
//! indirection, `[active, replica 1, ...]` with `null` for an empty slot, and a map is
//! `{"replicas": R, "chains": [...]}`. Deserializing a map runs the same checks as `new`, so
//! bytes from disk or the network cannot make a map that breaks the invariants.

use crate::limits::{REPLICAS_MAX, VBUCKETS_MAX};
use crate::node::NodeId;
use serde::{Deserialize, Serialize};
use sluice_types::VbId;
use std::collections::BTreeSet;
use std::fmt;

/// One vbucket's copies: the active, then the replica slots in promotion order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "Vec<Option<NodeId>>", try_from = "Vec<Option<NodeId>>")]
pub struct Chain {
    pub active: Option<NodeId>,
    pub replicas: Vec<Option<NodeId>>,
}

impl Chain {
    pub fn new(active: Option<NodeId>, replicas: Vec<Option<NodeId>>) -> Chain {
        Chain { active, replicas }
    }

    /// A chain with no copy anywhere: `replicas` empty slots and no active.
    pub fn lost(replicas: u8) -> Chain {
        Chain {
            active: None,
            replicas: vec![None; usize::from(replicas)],
        }
    }

    /// The nodes holding a copy, active first, then replicas in slot order.
    pub fn nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.active
            .iter()
            .chain(self.replicas.iter().flatten())
            .copied()
    }

    /// Whether `node` holds a copy of this vbucket.
    pub fn holds(&self, node: NodeId) -> bool {
        self.nodes().any(|n| n == node)
    }

    /// The same chain with `replicas` slots: padded with empty slots, or cut from the end
    /// (the last replicas are the ones a lower replica count gives up).
    pub fn resized(&self, replicas: u8) -> Chain {
        let mut slots = self.replicas.clone();
        slots.resize(usize::from(replicas), None);
        Chain::new(self.active, slots)
    }

    /// Whether two chains place the same copies in the same slots, treating missing trailing
    /// slots as empty: a chain that only gained empty slots has not moved.
    pub fn same_placement(&self, other: &Chain) -> bool {
        let len = self.replicas.len().max(other.replicas.len());
        let slot = |c: &Chain, i: usize| c.replicas.get(i).copied().flatten();
        self.active == other.active && (0..len).all(|i| slot(self, i) == slot(other, i))
    }
}

impl From<Chain> for Vec<Option<NodeId>> {
    fn from(chain: Chain) -> Self {
        std::iter::once(chain.active)
            .chain(chain.replicas)
            .collect()
    }
}

/// A serialized chain with no slot at all: even a lost chain has its active slot (`null`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a chain needs at least its active slot")]
pub struct EmptyChain;

impl TryFrom<Vec<Option<NodeId>>> for Chain {
    type Error = EmptyChain;

    fn try_from(slots: Vec<Option<NodeId>>) -> Result<Chain, EmptyChain> {
        let mut slots = slots.into_iter();
        let active = slots.next().ok_or(EmptyChain)?;
        Ok(Chain::new(active, slots.collect()))
    }
}

impl fmt::Display for Chain {
    /// `[n0 n3 -]`: active first, `-` for an empty slot.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |slot: Option<NodeId>| slot.map_or_else(|| "-".to_string(), |n| n.to_string());
        write!(f, "[{}", show(self.active))?;
        for &slot in &self.replicas {
            write!(f, " {}", show(slot))?;
        }
        write!(f, "]")
    }
}

/// A map that breaks one of the invariants above.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum MapError {
    #[error("a map needs at least one vbucket")]
    NoVbuckets,
    #[error("{count} vbuckets is more than the {max} a bucket may have")]
    TooManyVbuckets { count: usize, max: u16 },
    #[error("{replicas} replicas is more than the {max} a bucket may have")]
    TooManyReplicas { replicas: u8, max: u8 },
    #[error("{vb} has {len} replica slots where the map has {expected}")]
    ChainLength { vb: VbId, len: usize, expected: u8 },
    #[error("{vb} lists {node} twice; two copies on one node protect nothing")]
    DuplicateNode { vb: VbId, node: NodeId },
    #[error("{vb} has a replica but no active; a live replica is promoted first")]
    ReplicaWithoutActive { vb: VbId },
    #[error("{vb} is outside the map's {count} vbuckets")]
    UnknownVbucket { vb: VbId, count: u16 },
}

/// Every vbucket's chain, indexed by vbucket id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "VbMapRepr", try_from = "VbMapRepr")]
pub struct VbMap {
    /// Replica slots per chain (the bucket's configured replica count, filled or not).
    replicas: u8,
    chains: Vec<Chain>,
}

/// `VbMap` as serialized: the same fields, unchecked until `try_from` checks them.
#[derive(Serialize, Deserialize)]
struct VbMapRepr {
    replicas: u8,
    chains: Vec<Chain>,
}

impl From<VbMap> for VbMapRepr {
    fn from(map: VbMap) -> Self {
        VbMapRepr {
            replicas: map.replicas,
            chains: map.chains,
        }
    }
}

impl TryFrom<VbMapRepr> for VbMap {
    type Error = MapError;

    fn try_from(repr: VbMapRepr) -> Result<VbMap, MapError> {
        VbMap::new(repr.replicas, repr.chains)
    }
}

/// The id of the vbucket at `index`. Maps hold at most `VBUCKETS_MAX` chains, so it fits.
pub(crate) fn vb_id(index: usize) -> VbId {
    VbId(u16::try_from(index).expect("a map has at most VBUCKETS_MAX vbuckets"))
}

impl VbMap {
    /// A map from its chains; refused if any invariant fails.
    pub fn new(replicas: u8, chains: Vec<Chain>) -> Result<VbMap, MapError> {
        let map = VbMap { replicas, chains };
        map.check()?;
        Ok(map)
    }

    /// Checks every invariant in the module comment. Maps built through `new` always pass;
    /// the planner calls it again on what it builds, as an assertion.
    pub fn check(&self) -> Result<(), MapError> {
        if self.chains.is_empty() {
            return Err(MapError::NoVbuckets);
        }
        if self.chains.len() > usize::from(VBUCKETS_MAX) {
            return Err(MapError::TooManyVbuckets {
                count: self.chains.len(),
                max: VBUCKETS_MAX,
            });
        }
        if self.replicas > REPLICAS_MAX {
            return Err(MapError::TooManyReplicas {
                replicas: self.replicas,
                max: REPLICAS_MAX,
            });
        }
        for (vb, chain) in self.iter() {
            check_chain(vb, chain, self.replicas)?;
        }
        Ok(())
    }

    /// Replica slots per chain.
    pub fn replicas(&self) -> u8 {
        self.replicas
    }

    pub fn num_vbuckets(&self) -> u16 {
        vb_id(self.chains.len()).0
    }

    pub fn chain(&self, vb: VbId) -> Option<&Chain> {
        self.chains.get(usize::from(vb.0))
    }

    /// Chains in vbucket order.
    pub fn iter(&self) -> impl Iterator<Item = (VbId, &Chain)> {
        self.chains.iter().enumerate().map(|(i, c)| (vb_id(i), c))
    }

    /// Every node that holds at least one copy, in id order.
    pub fn nodes(&self) -> BTreeSet<NodeId> {
        self.chains.iter().flat_map(Chain::nodes).collect()
    }

    /// Vbuckets with no copy left anywhere.
    pub fn lost(&self) -> Vec<VbId> {
        self.iter()
            .filter(|(_, c)| c.active.is_none())
            .map(|(vb, _)| vb)
            .collect()
    }

    /// This map with one chain replaced: each step of a rebalance publishes such a map.
    pub fn with_chain(&self, vb: VbId, chain: Chain) -> Result<VbMap, MapError> {
        let count = self.num_vbuckets();
        let mut chains = self.chains.clone();
        let slot = chains
            .get_mut(usize::from(vb.0))
            .ok_or(MapError::UnknownVbucket { vb, count })?;
        *slot = chain;
        VbMap::new(self.replicas, chains)
    }

    /// This map with `replicas` slots per chain (see `Chain::resized`).
    pub fn with_replicas(&self, replicas: u8) -> Result<VbMap, MapError> {
        let chains = self.chains.iter().map(|c| c.resized(replicas)).collect();
        VbMap::new(replicas, chains)
    }
}

fn check_chain(vb: VbId, chain: &Chain, replicas: u8) -> Result<(), MapError> {
    if chain.replicas.len() != usize::from(replicas) {
        return Err(MapError::ChainLength {
            vb,
            len: chain.replicas.len(),
            expected: replicas,
        });
    }
    if chain.active.is_none() && chain.replicas.iter().any(Option::is_some) {
        return Err(MapError::ReplicaWithoutActive { vb });
    }
    let mut seen = BTreeSet::new();
    for node in chain.nodes() {
        if !seen.insert(node) {
            return Err(MapError::DuplicateNode { vb, node });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: NodeId = NodeId(0);
    const B: NodeId = NodeId(1);
    const C: NodeId = NodeId(2);

    fn chain(active: Option<NodeId>, replicas: &[Option<NodeId>]) -> Chain {
        Chain::new(active, replicas.to_vec())
    }

    #[test]
    fn a_valid_map_passes() {
        let map = VbMap::new(
            2,
            vec![
                chain(Some(A), &[Some(B), None]),
                chain(Some(B), &[Some(C), Some(A)]),
                Chain::lost(2),
            ],
        )
        .unwrap();
        assert_eq!(map.check(), Ok(()));
        assert_eq!(map.num_vbuckets(), 3);
        assert_eq!(map.nodes().into_iter().collect::<Vec<_>>(), vec![A, B, C]);
        assert_eq!(map.lost(), vec![VbId(2)]);
    }

    #[test]
    fn a_node_twice_in_a_chain_is_refused() {
        let err = VbMap::new(1, vec![chain(Some(A), &[Some(A)])]).unwrap_err();
        assert_eq!(
            err,
            MapError::DuplicateNode {
                vb: VbId(0),
                node: A
            }
        );
        let err = VbMap::new(2, vec![chain(Some(A), &[Some(B), Some(B)])]).unwrap_err();
        assert_eq!(
            err,
            MapError::DuplicateNode {
                vb: VbId(0),
                node: B
            }
        );
    }

    #[test]
    fn chain_lengths_must_match_the_map() {
        let err = VbMap::new(
            1,
            vec![chain(Some(A), &[Some(B)]), chain(Some(B), &[Some(A), None])],
        )
        .unwrap_err();
        assert_eq!(
            err,
            MapError::ChainLength {
                vb: VbId(1),
                len: 2,
                expected: 1
            }
        );
    }

    #[test]
    fn limits_and_emptiness_are_refused() {
        assert_eq!(VbMap::new(0, vec![]), Err(MapError::NoVbuckets));
        let too_many = vec![chain(Some(A), &[]); usize::from(VBUCKETS_MAX) + 1];
        assert!(matches!(
            VbMap::new(0, too_many),
            Err(MapError::TooManyVbuckets { .. })
        ));
        assert!(matches!(
            VbMap::new(4, vec![Chain::lost(4)]),
            Err(MapError::TooManyReplicas { .. })
        ));
    }

    #[test]
    fn a_replica_without_an_active_is_refused() {
        let err = VbMap::new(1, vec![chain(None, &[Some(A)])]).unwrap_err();
        assert_eq!(err, MapError::ReplicaWithoutActive { vb: VbId(0) });
    }

    #[test]
    fn with_chain_checks_the_result() {
        let map = VbMap::new(1, vec![chain(Some(A), &[Some(B)])]).unwrap();
        let moved = map.with_chain(VbId(0), chain(Some(C), &[Some(B)])).unwrap();
        assert_eq!(moved.chain(VbId(0)), Some(&chain(Some(C), &[Some(B)])));
        assert!(map.with_chain(VbId(0), chain(Some(C), &[Some(C)])).is_err());
        assert_eq!(
            map.with_chain(VbId(1), Chain::lost(1)),
            Err(MapError::UnknownVbucket {
                vb: VbId(1),
                count: 1
            })
        );
    }

    #[test]
    fn resizing_pads_or_cuts_from_the_end() {
        let c = chain(Some(A), &[Some(B), Some(C)]);
        assert_eq!(c.resized(1), chain(Some(A), &[Some(B)]));
        assert_eq!(c.resized(3), chain(Some(A), &[Some(B), Some(C), None]));
        assert!(c.same_placement(&c.resized(3)));
        assert!(!c.same_placement(&c.resized(1)));
        assert_eq!(c.resized(3).to_string(), "[n0 n1 n2 -]");
    }

    #[test]
    fn serde_keeps_the_map_and_checks_it() {
        let map = VbMap::new(2, vec![chain(Some(A), &[Some(B), None]), Chain::lost(2)]).unwrap();
        let json = serde_json::to_value(&map).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"replicas": 2, "chains": [[0, 1, null], [null, null, null]]})
        );
        assert_eq!(serde_json::from_value::<VbMap>(json).unwrap(), map);
        // Bytes that break an invariant do not make a map.
        let twice = serde_json::json!({"replicas": 1, "chains": [[0, 0]]});
        assert!(serde_json::from_value::<VbMap>(twice).is_err());
        let empty_chain = serde_json::json!({"replicas": 0, "chains": [[]]});
        assert!(serde_json::from_value::<VbMap>(empty_chain).is_err());
    }
}
