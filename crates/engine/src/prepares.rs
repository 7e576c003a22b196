//! A vbucket's pending SyncWrites: at most one prepare per key, kept beside the hash table
//! (which holds committed versions only, so readers never see a prepare).
//!
//! ```text
//!   durable write ──► prepare(seqno p) ──┬─ level met ─► commit(seqno c > p): the committed
//!   (key free)           key pending      │               version replaces the hash table's
//!                                         └─ timeout ──► abort(seqno a > p): nothing visible
//! ```
//!
//! The active adds prepares and completes them as its durability monitor decides. A replica
//! applies what its producer sends, and the rules of [`Prepares::on_replica`] say when that
//! is consistent:
//!
//! | event (key k)               | memory snapshot                    | disk snapshot                       |
//! |-----------------------------|------------------------------------|-------------------------------------|
//! | PREPARE p                   | k must have no prepare             | an older prepare of k is completed  |
//! | COMMIT / ABORT of p         | k's prepare must be p              | ABORT of an unknown p is a no-op    |
//! | MUTATION / DELETION         | k must have no prepare             | an older prepare of k is completed  |
//!
//! A disk snapshot is deduplicated: the commit of a prepare reaches the replica as the
//! committed document (storage keeps no commit records), an abort may stand in for a
//! prepare it never sent, and a later prepare of the key replaces an earlier one. Memory
//! snapshots are never deduplicated across sync writes (the checkpoint does not dedup them),
//! so there every completion must match.

use bytes::Bytes;
use hashbrown::HashMap;
use sluice_types::{DurabilityLevel, ItemMeta, Seqno};
use std::collections::BTreeMap;

/// A prepare: the version it would commit (`meta.seqno` is the prepare's seqno, `meta.cas`
/// the CAS the committed version keeps, `meta.deleted` for a durable delete).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepare {
    pub meta: ItemMeta,
    pub value: Bytes,
    pub level: DurabilityLevel,
    /// Inherited by an active that did not make it (a promoted replica's, or one loaded at
    /// warmup): it may have been committed and acknowledged elsewhere, so the key's old value
    /// must not be served until it is re-committed.
    pub maybe_visible: bool,
}

/// Bytes a prepare costs beyond its key and value.
const PREPARE_OVERHEAD_BYTES: usize = std::mem::size_of::<Prepare>() + 64;

/// Where a replica's change came from (see the table in the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotKind {
    Memory,
    Disk,
}

/// A change a replica received, as far as pending writes are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaEvent {
    Prepare,
    Commit {
        prepared: Seqno,
    },
    Abort {
        prepared: Seqno,
    },
    /// A plain mutation, deletion or expiration.
    Committed,
}

/// Why a replica's change contradicts its pending writes: the stream is broken and the
/// consumer must reconnect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PendingError {
    #[error("a change of a key with the prepare {pending} outstanding, in a memory snapshot")]
    PrepareOutstanding { pending: Seqno },
    #[error("a completion of prepare {prepared}, but the key's prepare is {pending:?}")]
    UnknownPrepare {
        prepared: Seqno,
        pending: Option<Seqno>,
    },
}

/// What [`Prepares::on_replica`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicaOutcome {
    /// Nothing pending was touched (apply the change).
    Apply,
    /// The key's older prepare is complete without a commit or abort of its own (disk
    /// snapshots); it was removed. Apply the change.
    Superseded(Prepare),
    /// The commit or abort matched this prepare, which was removed.
    Completed(Prepare),
    /// An abort of a prepare this replica never held (disk snapshots): nothing to do
    /// beyond moving the high seqno.
    AbortOfUnknown,
}

#[derive(Debug, Default)]
pub struct Prepares {
    by_key: HashMap<Bytes, Prepare>,
    /// seqno → key, the order commits follow.
    by_seqno: BTreeMap<Seqno, Bytes>,
    high_prepared: Seqno,
    high_completed: Seqno,
    mem_bytes: usize,
}

impl Prepares {
    pub fn get(&self, key: &[u8]) -> Option<&Prepare> {
        self.by_key.get(key)
    }

    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    pub fn mem_bytes(&self) -> usize {
        self.mem_bytes
    }

    /// Highest prepare seqno ever added.
    pub fn high_prepared_seqno(&self) -> Seqno {
        self.high_prepared
    }

    /// Highest prepare seqno completed (committed, aborted or superseded).
    pub fn high_completed_seqno(&self) -> Seqno {
        self.high_completed
    }

    /// The key of the prepare at `seqno`, if it is pending.
    pub fn key_at(&self, seqno: Seqno) -> Option<&Bytes> {
        self.by_seqno.get(&seqno)
    }

    /// The pending prepares in seqno order.
    pub fn iter(&self) -> impl Iterator<Item = (&Bytes, &Prepare)> + '_ {
        self.by_seqno
            .values()
            .filter_map(|k| self.by_key.get_key_value(k))
    }

    /// Adds a prepare of a key that has none. Returns the memory delta.
    pub fn insert(&mut self, key: Bytes, p: Prepare) -> isize {
        let seqno = p.meta.seqno;
        assert!(
            !self.by_key.contains_key(&key),
            "one prepare per key: the caller refuses a second"
        );
        assert!(seqno > self.high_prepared, "prepares come in seqno order");
        self.high_prepared = seqno;
        let bytes = cost(&key, &p);
        self.mem_bytes += bytes;
        self.by_seqno.insert(seqno, key.clone());
        self.by_key.insert(key, p);
        self.debug_check();
        bytes as isize
    }

    /// Removes the key's prepare if it is the one at `prepared`. Returns it and the memory
    /// delta.
    pub fn complete(&mut self, key: &[u8], prepared: Seqno) -> Option<(Prepare, isize)> {
        if self.by_key.get(key)?.meta.seqno != prepared {
            return None;
        }
        let (key, p) = self.by_key.remove_entry(key)?;
        self.by_seqno.remove(&prepared);
        self.high_completed = self.high_completed.max(prepared);
        let bytes = cost(&key, &p);
        self.mem_bytes -= bytes;
        self.debug_check();
        Some((p, -(bytes as isize)))
    }

    /// The rules of the module doc for a change of `key` at `seqno` a replica received.
    /// On `Ok`, pending writes reflect the change except for a `Prepare` event, which the
    /// caller then [`Self::insert`]s. Returns the outcome and the memory delta.
    pub fn on_replica(
        &mut self,
        key: &[u8],
        event: ReplicaEvent,
        snapshot: SnapshotKind,
    ) -> Result<(ReplicaOutcome, isize), PendingError> {
        let pending = self.by_key.get(key).map(|p| p.meta.seqno);
        match (event, pending, snapshot) {
            (ReplicaEvent::Prepare | ReplicaEvent::Committed, None, _) => {
                Ok((ReplicaOutcome::Apply, 0))
            }
            (ReplicaEvent::Prepare | ReplicaEvent::Committed, Some(p), SnapshotKind::Disk) => {
                let (old, delta) = self.complete(key, p).expect("pending");
                Ok((ReplicaOutcome::Superseded(old), delta))
            }
            (ReplicaEvent::Prepare | ReplicaEvent::Committed, Some(p), SnapshotKind::Memory) => {
                Err(PendingError::PrepareOutstanding { pending: p })
            }
            (ReplicaEvent::Commit { prepared } | ReplicaEvent::Abort { prepared }, Some(p), _)
                if p == prepared =>
            {
                let (done, delta) = self.complete(key, p).expect("pending");
                Ok((ReplicaOutcome::Completed(done), delta))
            }
            (ReplicaEvent::Abort { prepared }, Some(p), SnapshotKind::Disk) if p < prepared => {
                // The abort stands in for a later prepare this replica never got; the one it
                // holds was completed before that prepare was made.
                let (_, delta) = self.complete(key, p).expect("pending");
                self.high_completed = self.high_completed.max(prepared);
                Ok((ReplicaOutcome::AbortOfUnknown, delta))
            }
            (ReplicaEvent::Abort { prepared }, None, SnapshotKind::Disk) => {
                self.high_completed = self.high_completed.max(prepared);
                Ok((ReplicaOutcome::AbortOfUnknown, 0))
            }
            (ReplicaEvent::Commit { prepared } | ReplicaEvent::Abort { prepared }, pending, _) => {
                Err(PendingError::UnknownPrepare { prepared, pending })
            }
        }
    }

    /// Marks every pending prepare as inherited (the vbucket became active here). Returns
    /// whether there were any.
    pub fn inherit(&mut self) -> bool {
        self.by_key
            .values_mut()
            .for_each(|p| p.maybe_visible = true);
        !self.by_key.is_empty()
    }

    /// Forgets everything (a replica vbucket starting over). Returns the memory delta.
    pub fn clear(&mut self) -> isize {
        let freed = self.mem_bytes as isize;
        *self = Prepares::default();
        -freed
    }

    fn debug_check(&self) {
        if cfg!(debug_assertions) {
            self.check_invariants();
        }
    }

    /// Both indexes hold the same prepares, each under its own seqno, none above the high
    /// prepared seqno, and `mem_bytes` is their cost.
    pub fn check_invariants(&self) {
        assert_eq!(self.by_key.len(), self.by_seqno.len());
        let mut bytes = 0;
        for (seqno, key) in &self.by_seqno {
            let p = self.by_key.get(key).expect("indexed by key");
            assert_eq!(p.meta.seqno, *seqno);
            assert!(*seqno <= self.high_prepared);
            bytes += cost(key, p);
        }
        assert_eq!(bytes, self.mem_bytes);
    }
}

fn cost(key: &[u8], p: &Prepare) -> usize {
    key.len() + p.value.len() + PREPARE_OVERHEAD_BYTES
}

#[cfg(test)]
mod tests;
