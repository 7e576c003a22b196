//! Replica vbuckets: applying a producer's changes as they are, and starting over.
//!
//! A replica keeps the producer's seqno, CAS, rev seqno, expiry and flags for every change,
//! queues it into its own checkpoints (its flusher persists it, and it can be streamed from
//! in turn) and never assigns seqnos itself. Seqnos must increase: a change at or below the
//! replica's high seqno is refused (`ERANGE` on the wire), since applying it would fork the
//! histories.
//!
//! Rollback: storage keeps one version per key, so a replica cannot undo changes above a
//! rollback point exactly. When the producer asks it to roll back below its high seqno, the
//! replica vbucket starts over from 0 and streams everything again ([`Bucket::reset_vbucket`]).

use crate::bucket::Bucket;
use crate::checkpoint::{QueueOp, QueuedItem};
use crate::error::EngineError;
use crate::hash_table::StoredValue;
use crate::prepares::{PendingError, Prepare, ReplicaEvent, ReplicaOutcome, SnapshotKind};
use crate::vbucket::VbInner;
use bytes::Bytes;
use sluice_types::{
    DurabilityLevel, FailoverEntry, FailoverLog, ItemMeta, Seqno, VbId, VbState, VbUuid,
};
use std::sync::atomic::Ordering;

/// One change as a producer sent it.
#[derive(Debug, Clone)]
pub struct ReplicaChange {
    pub key: Bytes,
    /// Empty for a commit or an abort (a commit's version is its prepare's).
    pub value: Bytes,
    /// Exactly the producer's (tombstones and durable deletes have `deleted` set). For a
    /// commit or an abort only `seqno` is the producer's: the rest comes from the prepare.
    pub meta: ItemMeta,
    pub op: QueueOp,
}

/// Where a replica vbucket stands, to ask its producer for what follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaPosition {
    pub vb_uuid: VbUuid,
    pub high_seqno: Seqno,
    pub snap_start: Seqno,
    pub snap_end: Seqno,
    /// Part-way through a disk snapshot: deduplicated, so what it holds is no prefix of the
    /// producer's history (a failover must not promote it).
    pub in_disk_snapshot: bool,
}

impl VbInner {
    pub(crate) fn apply_replica(
        &mut self,
        c: ReplicaChange,
        persistent: bool,
    ) -> Result<(), EngineError> {
        if !matches!(self.state, VbState::Replica | VbState::Pending) {
            return Err(EngineError::NotMyVbucket);
        }
        let seqno = c.meta.seqno;
        if seqno <= self.high_seqno {
            return Err(EngineError::SeqnoNotIncreasing {
                got: seqno,
                high: self.high_seqno,
            });
        }
        let event = match c.op {
            QueueOp::Prepare(_) => ReplicaEvent::Prepare,
            QueueOp::Commit { prepared } => ReplicaEvent::Commit { prepared },
            QueueOp::Abort { prepared } => ReplicaEvent::Abort { prepared },
            QueueOp::Mutation | QueueOp::Deletion | QueueOp::Expiration => ReplicaEvent::Committed,
        };
        let (outcome, delta) =
            self.prepares
                .on_replica(&c.key, event, self.replica_snapshot_kind)?;
        self.mem_delta += delta;
        let c = match (c.op, outcome) {
            (QueueOp::Prepare(level), _) => {
                self.replica_prepare(c, level);
                return Ok(());
            }
            (QueueOp::Abort { .. }, _) => {
                self.high_seqno = seqno;
                self.queue_or_skip(QueuedItem {
                    key: c.key,
                    meta: ItemMeta {
                        seqno,
                        deleted: true,
                        ..ItemMeta::default()
                    },
                    value: Bytes::new(),
                    op: c.op,
                    first_version: false,
                });
                return Ok(());
            }
            // The committed version is the prepare's, at the commit's seqno.
            (QueueOp::Commit { .. }, ReplicaOutcome::Completed(p)) => ReplicaChange {
                key: c.key,
                value: p.value,
                meta: ItemMeta { seqno, ..p.meta },
                op: c.op,
            },
            // `on_replica` answers a commit with its prepare or an error; kept as an error
            // rather than a panic should the table ever change.
            (QueueOp::Commit { prepared }, _) => {
                return Err(PendingError::UnknownPrepare {
                    prepared,
                    pending: None,
                }
                .into())
            }
            _ => c,
        };
        let mut was_live = false;
        let meta = c.meta;
        let value = c.value.clone();
        self.mem_delta += self.ht.replace_with(&c.key, |old| {
            was_live = old.is_some_and(|o| !o.meta.deleted);
            StoredValue {
                meta,
                value: Some(value),
                dirty: persistent,
                referenced: true,
                disk_seqno: Seqno::ZERO,
            }
        });
        match (was_live, meta.deleted) {
            (false, false) => {
                self.num_items += 1;
                self.collection_items.add(&c.key, 1);
            }
            (true, true) => {
                self.num_items = self.num_items.saturating_sub(1);
                self.collection_items.add(&c.key, -1);
            }
            _ => {}
        }
        self.hlc.observe(meta.cas.0);
        self.high_seqno = seqno;
        self.max_visible_seqno = seqno;
        self.queue_or_skip(QueuedItem {
            key: c.key,
            meta,
            value: c.value,
            op: c.op,
            first_version: false,
        });
        Ok(())
    }

    /// A prepare the producer sent: pending here too, queued for this node's flusher and
    /// its own streams.
    fn replica_prepare(&mut self, c: ReplicaChange, level: DurabilityLevel) {
        let meta = c.meta;
        self.hlc.observe(meta.cas.0);
        self.high_seqno = meta.seqno;
        let p = Prepare {
            meta,
            value: c.value.clone(),
            level,
            maybe_visible: false,
        };
        self.mem_delta += self.prepares.insert(c.key.clone(), p);
        self.queue_or_skip(QueuedItem {
            key: c.key,
            meta,
            value: c.value,
            op: c.op,
            first_version: false,
        });
    }
}

impl VbInner {
    /// The key's version on this replica vbucket: the live document, or with `deleted` its
    /// current version even when that is a tombstone (a replica-read lookup with
    /// access-deleted). `NeedsFetch` when only the disk may know.
    fn get_replica(
        &mut self,
        key: &[u8],
        now_unix_s: u32,
        deleted: bool,
    ) -> Result<crate::item::Document, EngineError> {
        if self.state != VbState::Replica {
            return Err(EngineError::NotMyVbucket);
        }
        let on_disk_only = self.keys_evicted || (deleted && self.tombstones_only_on_disk);
        match self.ht.get(key) {
            None if on_disk_only => Err(EngineError::NeedsFetch),
            None => Err(EngineError::KeyNotFound),
            // The placeholder a disk read that found nothing leaves.
            Some(sv) if sv.meta.seqno == Seqno::ZERO => Err(EngineError::KeyNotFound),
            Some(sv) if sv.meta.deleted && deleted => Ok(crate::item::Document {
                meta: sv.meta,
                // A tombstone's value is its xattrs, if it kept any.
                value: match &sv.value {
                    Some(v) => v.clone(),
                    None if !sv.meta.datatype.is_xattr() => Bytes::new(),
                    None => return Err(EngineError::NeedsFetch),
                },
            }),
            // A replica never expires items itself (the active sends the expiration), but
            // it does not serve one whose time has passed either.
            Some(sv) if sv.meta.deleted || sv.meta.expiry.is_expired(now_unix_s) => {
                Err(EngineError::KeyNotFound)
            }
            Some(sv) => Ok(crate::item::Document {
                meta: sv.meta,
                value: sv.value.clone().ok_or(EngineError::NeedsFetch)?,
            }),
        }
    }
}

impl Bucket {
    /// GET_REPLICA: a document from a replica vbucket.
    pub fn get_replica(&self, vb: VbId, key: &[u8]) -> Result<crate::item::Document, EngineError> {
        let now = self.ctx().now_unix_s;
        self.with_vb(vb, |inner| inner.get_replica(key, now, false))?
    }

    /// A replica vbucket's current version of `key`, a tombstone included (replica-read
    /// lookups with access-deleted).
    pub fn get_replica_with_deleted(
        &self,
        vb: VbId,
        key: &[u8],
    ) -> Result<crate::item::Document, EngineError> {
        let now = self.ctx().now_unix_s;
        self.with_vb(vb, |inner| inner.get_replica(key, now, true))?
    }

    /// Sets a vbucket's state. Becoming active starts a new failover-log branch at the high
    /// seqno: from here on this node writes history.
    pub fn set_vbucket_state(&self, vb: VbId, state: VbState) -> Result<(), EngineError> {
        self.with_vb(vb, |inner| {
            if inner.state == state {
                return;
            }
            if state == VbState::Active {
                let high = inner.high_seqno;
                // Lock order: the vbucket, then the uuids (never the other way round).
                let uuid = self.vb_uuids.lock().next();
                inner.failover.new_branch(uuid, high);
                if inner.prepares.inherit() {
                    // Lock order: the vbucket, then this set.
                    self.inherited_prepares.lock().insert(vb);
                }
            }
            inner.state = state;
            inner.locks.clear();
            inner.meta_dirty = true;
        })?;
        if state == VbState::Active {
            // A promoted replica may not have heard of every scope and collection change.
            let live = self.live_collections();
            self.reconcile_system_events(vb, &live);
        }
        self.flusher_wake.notify();
        Ok(())
    }

    /// Applies one change from a producer to a replica vbucket.
    pub fn apply_replica(&self, vb: VbId, c: ReplicaChange) -> Result<(), EngineError> {
        self.admit_write(c.key.len() + c.value.len())?;
        let persistent = self.config.is_persistent();
        self.with_vb(vb, |inner| inner.apply_replica(c, persistent))??;
        if self.store.is_some() {
            self.flusher_wake.notify();
        }
        Ok(())
    }

    /// A snapshot marker from the producer: remembered so a reconnect can say which
    /// snapshot the replica was in.
    pub fn replica_snapshot(
        &self,
        vb: VbId,
        start: Seqno,
        end: Seqno,
        kind: SnapshotKind,
    ) -> Result<(), EngineError> {
        self.with_vb(vb, |inner| {
            inner.replica_snapshot = (start, end);
            inner.replica_snapshot_kind = kind;
        })
    }

    /// Takes the producer's failover log (from its stream-request answer), so both sides
    /// share one history.
    pub fn set_failover_log(&self, vb: VbId, log: FailoverLog) -> Result<(), EngineError> {
        self.with_vb(vb, |inner| {
            inner.failover = log;
            inner.meta_dirty = true;
        })?;
        self.flusher_wake.notify();
        Ok(())
    }

    /// What to ask a producer for next.
    pub fn replica_position(&self, vb: VbId) -> Result<ReplicaPosition, EngineError> {
        self.with_vb(vb, |inner| {
            let high = inner.high_seqno;
            let (s, e) = inner.replica_snapshot;
            // A snapshot that ended (or was never seen since a restart) counts as complete.
            let inside = s <= high && high < e;
            let (snap_start, snap_end) = if inside { (s, e) } else { (high, high) };
            ReplicaPosition {
                vb_uuid: if high == Seqno::ZERO {
                    VbUuid(0)
                } else {
                    inner.failover.latest().uuid
                },
                high_seqno: high,
                snap_start,
                snap_end,
                in_disk_snapshot: inside && inner.replica_snapshot_kind == SnapshotKind::Disk,
            }
        })
    }

    /// Deletes a dead vbucket's copy, in memory and on disk (a rebalance moved it to other
    /// nodes). Refused for a vbucket in any other state. Returns whether there was anything
    /// to delete.
    pub fn drop_vbucket(&self, vb: VbId) -> Result<bool, EngineError> {
        let holds = self.with_vb(vb, |inner| {
            if inner.state != VbState::Dead {
                return Err(EngineError::NotMyVbucket);
            }
            Ok(inner.high_seqno != Seqno::ZERO || inner.num_items != 0 || inner.ht.len() != 0)
        })??;
        if !holds {
            return Ok(false);
        }
        self.reset(vb, true)?;
        Ok(true)
    }

    /// Empties a vbucket in memory and on disk (a replica that must roll back). The
    /// flusher is held off meanwhile, so no batch read before the reset is committed after it.
    pub fn reset_vbucket(&self, vb: VbId) -> Result<(), EngineError> {
        self.reset(vb, false)
    }

    /// With `only_dead`, the state is checked under the same lock as the reset: a vbucket
    /// that came back to life meanwhile is left alone.
    fn reset(&self, vb: VbId, only_dead: bool) -> Result<(), EngineError> {
        let _no_flush = self.flush_lock.lock();
        self.with_vb(vb, |inner| {
            if only_dead && inner.state != VbState::Dead {
                return Err(EngineError::NotMyVbucket);
            }
            inner.mem_delta -= inner.ht.clear() as isize;
            inner.mem_delta += inner.prepares.clear();
            inner.checkpoint_delta += inner.checkpoints.reset(Seqno::ZERO);
            inner.high_seqno = Seqno::ZERO;
            inner.max_visible_seqno = Seqno::ZERO;
            inner.flushed_high_completed = Seqno::ZERO;
            inner.purge_seqno = Seqno::ZERO;
            inner.num_items = 0;
            inner.collection_items.clear();
            inner.max_deleted_rev = 0;
            inner.keys_evicted = false;
            inner.replica_snapshot = (Seqno::ZERO, Seqno::ZERO);
            let oldest = *inner.failover.entries().last().expect("never empty");
            inner.failover = FailoverLog::from_entries(vec![FailoverEntry {
                uuid: oldest.uuid,
                seqno: Seqno::ZERO,
            }]);
            inner.meta_dirty = true;
            Ok(())
        })??;
        let vbucket = &self.vbuckets[usize::from(vb.0)];
        vbucket.persisted_seqno.store(0, Ordering::Release);
        if let Some(store) = &self.store {
            store
                .reset_vb(vb)
                .map_err(|e| EngineError::Storage(e.to_string()))?;
            // Only now is the disk as empty as memory.
            self.with_vb(vb, |inner| inner.tombstones_only_on_disk = false)?;
        }
        self.flusher_wake.notify();
        Ok(())
    }
}
