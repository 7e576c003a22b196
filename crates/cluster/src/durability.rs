//! When a durable write may be acknowledged: the rule, without the waiting.
//!
//! A vbucket's chain is its active and its replica slots. A durable write needs a majority of
//! the chain (`len / 2 + 1`, empty slots included in `len`), with the active always among
//! them:
//!
//! | level                      | the active              | each replica counted when it  |
//! |----------------------------|-------------------------|-------------------------------|
//! | majority                   | counts at once          | holds the seqno in memory     |
//! | majority + persist active  | counts once persisted   | holds the seqno in memory     |
//! | persist to majority        | counts once persisted   | has persisted the seqno       |
//!
//! When fewer nodes are in the chain than the majority needs (a failover left a slot empty,
//! say), the write is impossible and is refused before it is made.
//!
//! Sluice has no prepared (pending) writes: the write is applied, then the active waits for
//! the replicas' seqno acknowledgements. A reader can see it before it is durable, and a
//! write that timed out stays applied; the client was told its outcome is unknown.

use crate::{Chain, NodeId};
use sluice_types::{Seqno, VbUuid};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Majority,
    MajorityAndPersistActive,
    PersistToMajority,
}

/// How far one replica's copy of a vbucket is, as it last acknowledged, and on which branch of
/// the vbucket's history (the active's vbucket uuid when the ack arrived).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaAck {
    pub vb_uuid: VbUuid,
    pub in_memory: Seqno,
    pub persisted: Seqno,
}

/// The chain cannot reach a majority.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("durability needs {needed} of {chain_len} copies and only {present} are placed")]
pub struct Impossible {
    pub needed: usize,
    pub chain_len: usize,
    pub present: usize,
}

/// What one durable write waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub level: Level,
    /// The replicas of the chain (placed slots only).
    pub replicas: Vec<NodeId>,
    /// How many copies, the active included, must hold the write.
    pub needed: usize,
}

impl Requirement {
    /// The requirement of a write at `level` to the vbucket of `chain`, made on its active.
    pub fn new(level: Level, chain: &Chain) -> Result<Requirement, Impossible> {
        let chain_len = 1 + chain.replicas.len();
        let needed = chain_len / 2 + 1;
        let replicas: Vec<NodeId> = chain.replicas.iter().flatten().copied().collect();
        let present = usize::from(chain.active.is_some()) + replicas.len();
        if present < needed {
            return Err(Impossible {
                needed,
                chain_len,
                present,
            });
        }
        Ok(Requirement {
            level,
            replicas,
            needed,
        })
    }

    /// Whether the active must persist the write before it counts.
    pub fn persist_active(&self) -> bool {
        self.level != Level::Majority
    }

    /// Whether the write at `seqno` on branch `vb_uuid` is durable, given whether the active
    /// persisted it and each replica's last ack. An ack from another branch does not count:
    /// its seqnos number a different history.
    pub fn met(
        &self,
        seqno: Seqno,
        vb_uuid: VbUuid,
        active_persisted: bool,
        ack: impl Fn(NodeId) -> Option<ReplicaAck>,
    ) -> bool {
        if self.persist_active() && !active_persisted {
            return false;
        }
        let replicas_holding = self
            .replicas
            .iter()
            .filter_map(|&n| ack(n))
            .filter(|a| a.vb_uuid == vb_uuid)
            .filter(|a| match self.level {
                Level::PersistToMajority => a.persisted >= seqno,
                _ => a.in_memory >= seqno,
            })
            .count();
        1 + replicas_holding >= self.needed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UUID: VbUuid = VbUuid(7);

    fn chain(active: u32, replicas: &[Option<u32>]) -> Chain {
        Chain::new(
            Some(NodeId(active)),
            replicas.iter().map(|r| r.map(NodeId)).collect(),
        )
    }

    fn ack(in_memory: u64, persisted: u64) -> Option<ReplicaAck> {
        Some(ReplicaAck {
            vb_uuid: UUID,
            in_memory: Seqno(in_memory),
            persisted: Seqno(persisted),
        })
    }

    #[test]
    fn majority_of_the_chain_with_empty_slots_counted() {
        let r = Requirement::new(Level::Majority, &chain(0, &[])).unwrap();
        assert_eq!(r.needed, 1);
        assert!(r.met(Seqno(5), UUID, false, |_| None), "alone: at once");
        let r = Requirement::new(Level::Majority, &chain(0, &[Some(1)])).unwrap();
        assert_eq!(r.needed, 2);
        let r = Requirement::new(Level::Majority, &chain(0, &[Some(1), None])).unwrap();
        assert_eq!((r.needed, r.replicas.clone()), (2, vec![NodeId(1)]));
        let r = Requirement::new(Level::Majority, &chain(0, &[Some(1), Some(2), None])).unwrap();
        assert_eq!(r.needed, 3);
        assert_eq!(
            Requirement::new(Level::Majority, &chain(0, &[None])),
            Err(Impossible {
                needed: 2,
                chain_len: 2,
                present: 1
            })
        );
        assert!(Requirement::new(Level::Majority, &chain(0, &[None, None, Some(3)])).is_err());
    }

    #[test]
    fn each_level_counts_what_it_needs() {
        let c = chain(0, &[Some(1), Some(2)]);
        let at = Seqno(10);
        let maj = Requirement::new(Level::Majority, &c).unwrap();
        let persist_active = Requirement::new(Level::MajorityAndPersistActive, &c).unwrap();
        let persist_all = Requirement::new(Level::PersistToMajority, &c).unwrap();
        // Node 1 holds it in memory only, node 2 nothing yet.
        let mem_only = |n: NodeId| {
            if n == NodeId(1) {
                ack(10, 3)
            } else {
                ack(9, 9)
            }
        };
        assert!(maj.met(at, UUID, false, mem_only));
        assert!(
            !persist_active.met(at, UUID, false, mem_only),
            "active not persisted"
        );
        assert!(persist_active.met(at, UUID, true, mem_only));
        assert!(
            !persist_all.met(at, UUID, true, mem_only),
            "nobody else persisted"
        );
        let persisted = |n: NodeId| if n == NodeId(2) { ack(12, 11) } else { None };
        assert!(persist_all.met(at, UUID, true, persisted));
        assert!(!persist_all.met(at, UUID, false, persisted));
        assert!(!maj.met(at, UUID, true, |_| None));
    }

    #[test]
    fn acks_from_another_branch_do_not_count() {
        let r = Requirement::new(Level::Majority, &chain(0, &[Some(1)])).unwrap();
        let other = |_| {
            Some(ReplicaAck {
                vb_uuid: VbUuid(8),
                in_memory: Seqno(100),
                persisted: Seqno(100),
            })
        };
        assert!(!r.met(Seqno(10), UUID, true, other));
        assert!(r.met(Seqno(10), UUID, true, |_| ack(10, 0)));
    }

    #[test]
    fn acks_only_count_for_the_chains_replicas() {
        let r = Requirement::new(Level::Majority, &chain(0, &[Some(1)])).unwrap();
        let from_node_2 = |n: NodeId| if n == NodeId(2) { ack(50, 50) } else { None };
        assert!(!r.met(Seqno(10), UUID, true, from_node_2));
    }
}
