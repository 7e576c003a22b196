//! The active side of the durability monitor: which tracked prepares to commit or abort, for
//! one vbucket, as acks, local persistence, time and chain changes come in.
//!
//! ```text
//!   add(seqno, level, deadline)
//!      │ NotIncreasing · Impossible: refused, nothing tracked
//!      ▼
//!   Tracked ── satisfied and first in seqno order ─────────────────────► Commit
//!      │  ▲      (checked after add, ack, persisted, tick and set_chain)
//!      │  └── satisfied behind an earlier pending write: waits, and is
//!      │      checked again when it reaches the front (acks may go down)
//!      │
//!      ├── tick(now), deadline <= now, in any order ─────────────────────► Abort
//!      │      (the commits it unblocks follow in the same answer)
//!      │
//!      └── clear(): dropped unresolved (the vbucket is no longer active here)
//! ```
//!
//! Satisfaction is computed when a write reaches the front, never remembered: an ack can go
//! down (the replica rolled back), a connection can close (`forget`) and the chain can change,
//! and a write must be durable at the moment it is committed.
//!
//! State is bounded by what is tracked: the writes, their deadlines, and one ack per replica
//! of the current chain. Resolved seqnos leave no trace beyond the high completed seqno.

use super::chain::{Chain, Impossible};
use sluice_types::{DurabilityLevel, Seqno};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// How far a replica holds the vbucket, cumulatively.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplicaAck {
    pub in_memory: Seqno,
    /// Clamped to `in_memory` on receipt: nothing is on disk that was not applied.
    pub persisted: Seqno,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Commit,
    Abort,
}

/// A tracked write's fate, for the caller to carry out (write the commit or abort, answer the
/// client).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolution {
    pub seqno: Seqno,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddError {
    #[error(transparent)]
    Impossible(#[from] Impossible),
    #[error("prepare {got} is not above the high prepared seqno {high}")]
    NotIncreasing { got: Seqno, high: Seqno },
}

#[derive(Debug, Clone, Copy)]
struct Tracked {
    level: DurabilityLevel,
    deadline: Option<Instant>,
}

/// One vbucket's tracked SyncWrites on its active node.
#[derive(Debug)]
pub struct ActiveMonitor<N> {
    chain: Chain<N>,
    /// The active's persisted seqno.
    local_persisted: Seqno,
    /// The last ack of each replica of the current chain that has acked since it became one.
    acks: BTreeMap<N, ReplicaAck>,
    /// Pending writes by seqno; the first is the only one that may commit.
    writes: BTreeMap<Seqno, Tracked>,
    /// The deadlines of pending writes that have one, soonest first.
    deadlines: BTreeSet<(Instant, Seqno)>,
    high_prepared: Seqno,
    high_completed: Seqno,
}

impl<N: Copy + Ord + std::fmt::Debug> ActiveMonitor<N> {
    /// `local_persisted`: the active's persisted seqno now.
    pub fn new(chain: Chain<N>, local_persisted: Seqno) -> Self {
        ActiveMonitor {
            chain,
            local_persisted,
            acks: BTreeMap::new(),
            writes: BTreeMap::new(),
            deadlines: BTreeSet::new(),
            high_prepared: Seqno::ZERO,
            high_completed: Seqno::ZERO,
        }
    }

    /// Tracks the prepare at `seqno`. `deadline: None` never times out (prepares loaded at
    /// warmup, or held by a promoted replica). Refuses when the chain cannot reach a majority,
    /// or when `seqno` does not exceed every seqno added before. A write already satisfied
    /// (and first in line) is committed in the answer.
    pub fn add(
        &mut self,
        seqno: Seqno,
        level: DurabilityLevel,
        deadline: Option<Instant>,
    ) -> Result<Vec<Resolution>, AddError> {
        // A caller bug is reported before the cluster's state.
        if seqno <= self.high_prepared {
            return Err(AddError::NotIncreasing {
                got: seqno,
                high: self.high_prepared,
            });
        }
        self.chain.check_possible()?;
        self.high_prepared = seqno;
        self.writes.insert(seqno, Tracked { level, deadline });
        if let Some(d) = deadline {
            self.deadlines.insert((d, seqno));
        }
        let mut out = Vec::new();
        self.commit_front(&mut out);
        self.debug_check();
        Ok(out)
    }

    /// A replica's cumulative ack; the latest is the truth, even when lower (the replica
    /// rolled back). Acks of nodes that are not replicas of the current chain are ignored:
    /// they would count a copy the chain does not place.
    pub fn ack(&mut self, node: N, ack: ReplicaAck) -> Vec<Resolution> {
        if !self.chain.is_replica(node) {
            return Vec::new();
        }
        let ack = ReplicaAck {
            in_memory: ack.in_memory,
            persisted: ack.persisted.min(ack.in_memory),
        };
        self.acks.insert(node, ack);
        let mut out = Vec::new();
        self.commit_front(&mut out);
        self.debug_check();
        out
    }

    /// The replica's connection closed: its ack says nothing about what it will hold next.
    /// Nothing can commit from a copy less, so nothing is returned.
    pub fn forget(&mut self, node: N) {
        self.acks.remove(&node);
        self.debug_check();
    }

    /// The active persisted up to `seqno`; a lower value than already known is ignored.
    pub fn persisted(&mut self, seqno: Seqno) -> Vec<Resolution> {
        self.local_persisted = self.local_persisted.max(seqno);
        let mut out = Vec::new();
        self.commit_front(&mut out);
        self.debug_check();
        out
    }

    /// Aborts every tracked write whose deadline is `<= now`, whatever is pending before it,
    /// then commits what those aborts unblocked: aborts first, then commits, each in seqno
    /// order.
    pub fn tick(&mut self, now: Instant) -> Vec<Resolution> {
        let mut expired = Vec::new();
        while let Some(&(deadline, seqno)) = self.deadlines.first() {
            if deadline > now {
                break;
            }
            self.deadlines.pop_first();
            expired.push(seqno);
        }
        expired.sort_unstable();
        let mut out = Vec::with_capacity(expired.len());
        for seqno in expired {
            let removed = self.writes.remove(&seqno);
            assert!(removed.is_some(), "a deadline without its write: {seqno}");
            self.resolve(seqno, Outcome::Abort, &mut out);
        }
        self.commit_front(&mut out);
        self.debug_check();
        out
    }

    /// A new chain (map change): acks of nodes no longer its replicas are dropped, and the
    /// pending writes are judged against it (its majority may be smaller).
    pub fn set_chain(&mut self, chain: Chain<N>) -> Vec<Resolution> {
        self.chain = chain;
        let chain = &self.chain;
        self.acks.retain(|&n, _| chain.is_replica(n));
        let mut out = Vec::new();
        self.commit_front(&mut out);
        self.debug_check();
        out
    }

    pub fn chain(&self) -> &Chain<N> {
        &self.chain
    }

    /// The earliest deadline among tracked writes: when `tick` next has work.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|&(d, _)| d)
    }

    /// The highest seqno ever added.
    pub fn high_prepared_seqno(&self) -> Seqno {
        self.high_prepared
    }

    /// The highest seqno resolved, committed or aborted.
    pub fn high_completed_seqno(&self) -> Seqno {
        self.high_completed
    }

    pub fn tracked(&self) -> usize {
        self.writes.len()
    }

    pub fn is_tracked(&self, seqno: Seqno) -> bool {
        self.writes.contains_key(&seqno)
    }

    /// Drops every tracked write without resolving it (the vbucket stopped being active
    /// here; its next owner decides); returns their seqnos in order.
    pub fn clear(&mut self) -> Vec<Seqno> {
        self.deadlines.clear();
        let dropped = std::mem::take(&mut self.writes).into_keys().collect();
        self.debug_check();
        dropped
    }

    /// Whether the write at `seqno` is durable at `level` now.
    fn satisfied(&self, seqno: Seqno, level: DurabilityLevel) -> bool {
        if level.persist_active() && self.local_persisted < seqno {
            return false;
        }
        // `acks` holds one entry per current replica, so each node counts once.
        let replicas = self
            .acks
            .values()
            .filter(|a| {
                let held = if level.persist_replicas() {
                    a.persisted
                } else {
                    a.in_memory
                };
                held >= seqno
            })
            .count();
        1 + replicas >= self.chain.majority()
    }

    /// Commits from the front while the first pending write is satisfied: commits go in
    /// prepare order, so a satisfied write behind a pending one waits.
    fn commit_front(&mut self, out: &mut Vec<Resolution>) {
        while let Some((&seqno, &w)) = self.writes.first_key_value() {
            if !self.satisfied(seqno, w.level) {
                break;
            }
            self.writes.pop_first();
            if let Some(d) = w.deadline {
                let removed = self.deadlines.remove(&(d, seqno));
                assert!(removed, "a write's deadline is tracked: {seqno}");
            }
            self.resolve(seqno, Outcome::Commit, out);
        }
    }

    fn resolve(&mut self, seqno: Seqno, outcome: Outcome, out: &mut Vec<Resolution>) {
        self.high_completed = self.high_completed.max(seqno);
        out.push(Resolution { seqno, outcome });
    }

    /// [`Self::check_invariants`] after every event in debug builds, while few enough writes
    /// are tracked that a full walk per event stays cheap.
    fn debug_check(&self) {
        const FULL_CHECK_WRITES_MAX: usize = 4096;
        if cfg!(debug_assertions) && self.writes.len() <= FULL_CHECK_WRITES_MAX {
            self.check_invariants();
        }
    }

    /// Panics unless the module comment's claims hold. O(tracked writes).
    pub fn check_invariants(&self) {
        let mut last = None;
        for (&seqno, w) in &self.writes {
            assert!(last < Some(seqno), "tracked seqnos increase");
            assert!(
                seqno <= self.high_prepared,
                "tracked {seqno} above the high prepared seqno {}",
                self.high_prepared
            );
            if let Some(d) = w.deadline {
                assert!(self.deadlines.contains(&(d, seqno)), "{seqno}'s deadline");
            }
            last = Some(seqno);
        }
        assert_eq!(
            self.deadlines.len(),
            self.writes
                .values()
                .filter(|w| w.deadline.is_some())
                .count(),
            "one deadline per tracked write that has one"
        );
        assert!(
            self.high_completed <= self.high_prepared,
            "completed {} above prepared {}",
            self.high_completed,
            self.high_prepared
        );
        for (&n, a) in &self.acks {
            assert!(self.chain.is_replica(n), "an ack of {n:?}, not a replica");
            assert!(a.persisted <= a.in_memory, "{n:?} persisted above applied");
        }
        if let Some((&seqno, w)) = self.writes.first_key_value() {
            assert!(
                !self.satisfied(seqno, w.level),
                "the first tracked write {seqno} is satisfied and was not committed"
            );
        }
    }
}
