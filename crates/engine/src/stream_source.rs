//! What DCP streams read from a bucket: a vbucket's stream facts, checkpoint cursors for the
//! in-memory phase, and backfills for what memory no longer holds.
//!
//! A stream that has everything up to `after` first tries [`Bucket::stream_cursor`]: when the
//! checkpoints still hold `after + 1` onwards it gets a cursor and reads memory. Otherwise it
//! runs a [`Backfill`] over `(after, end]` and asks again with `after = end`. The loop
//! converges because `end` is what the flusher had persisted when the backfill began, and
//! the flusher frees a checkpoint only after reading it:
//!
//! - **couchbase bucket**: the backfill waits until everything older than the oldest
//!   checkpoint is persisted, then scans a storage snapshot up to the snapshot's own high
//!   seqno (`end`), so the disk snapshot is exactly the vbucket's state at `end`. No cursor
//!   is held while it runs, so a long backfill pins no checkpoint memory. Keys rewritten
//!   after `end` arrive later, at their newer seqno (deduplication, never a gap).
//! - **ephemeral bucket**: the hash table is the only copy. The backfill collects the
//!   versions with seqnos in `(after, high]` and registers the cursor after `high` under the
//!   same lock, so the handover is exact.

use crate::bucket::Bucket;
use crate::checkpoint::{CursorChunk, CursorId, QueueOp, QueuedItem};
use crate::error::EngineError;
use crate::vbucket::tombstone_op;
use sluice_storage::{RecordKind, StoreSnapshot};
use sluice_types::{FailoverLog, Seqno, VbId, VbState};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

/// How long a backfill waits for the flusher to persist what memory no longer holds.
const BACKFILL_PERSIST_WAIT: Duration = Duration::from_secs(30);

/// A vbucket's facts a stream request is checked against.
#[derive(Debug, Clone)]
pub struct StreamInfo {
    pub state: VbState,
    pub high_seqno: Seqno,
    pub purge_seqno: Seqno,
    /// Highest durable seqno (the high seqno for an ephemeral bucket).
    pub persisted_seqno: Seqno,
    pub failover: FailoverLog,
}

enum Source {
    Disk(Box<dyn StoreSnapshot>),
    Memory(VecDeque<Arc<QueuedItem>>),
}

/// A scan of one vbucket's versions with seqnos in `(after, end]`, read in chunks.
pub struct Backfill {
    pub vb: VbId,
    pub after: Seqno,
    pub end: Seqno,
    /// The newest visible change in `(after, end]` (a mutation, deletion or commit), `after`
    /// if none: a consumer that sees no prepares or aborts gets a snapshot ending there.
    pub max_visible: Seqno,
    /// The newest prepare completed at `end` (as the vbucket's metadata recorded it with the
    /// snapshot): a sync-write consumer counts every prepare of the snapshot at or below it
    /// as completed, its commit having been deduplicated away.
    pub high_completed: Seqno,
    /// Next scan position: everything up to it was returned.
    pos: Seqno,
    source: Source,
    /// Ephemeral buckets: the cursor registered with the scan, to read from once it is done.
    pub cursor: Option<CursorId>,
}

impl Backfill {
    /// Up to about `bytes_max` of items (at least one, if any are left), in seqno order. An
    /// empty chunk means the backfill is complete.
    pub fn next_chunk(&mut self, bytes_max: usize) -> Result<Vec<Arc<QueuedItem>>, EngineError> {
        let mut out = Vec::new();
        let mut bytes = 0;
        match &mut self.source {
            Source::Memory(items) => {
                while let Some(item) = items.front() {
                    if bytes >= bytes_max && !out.is_empty() {
                        break;
                    }
                    bytes += item.mem_bytes();
                    out.push(items.pop_front().expect("peeked"));
                }
            }
            Source::Disk(snapshot) => {
                for record in snapshot.scan_seqnos(self.vb, self.pos, self.end) {
                    let r = record.map_err(|e| EngineError::Storage(e.to_string()))?;
                    let item = QueuedItem {
                        op: match r.kind {
                            RecordKind::Committed => tombstone_op(&r.meta),
                            RecordKind::Prepare(level) => QueueOp::Prepare(level),
                            RecordKind::Abort { prepared } => QueueOp::Abort { prepared },
                        },
                        key: r.key,
                        meta: r.meta,
                        value: r.value,
                        first_version: false,
                    };
                    bytes += item.mem_bytes();
                    out.push(Arc::new(item));
                    if bytes >= bytes_max {
                        break;
                    }
                }
            }
        }
        if let Some(last) = out.last() {
            debug_assert!(last.meta.seqno > self.pos && last.meta.seqno <= self.end);
            self.pos = last.meta.seqno;
        } else {
            self.pos = self.end;
        }
        Ok(out)
    }
}

impl Bucket {
    pub fn stream_info(&self, vb: VbId) -> Result<StreamInfo, EngineError> {
        let persisted = self.persisted_seqno(vb)?;
        let persistent = self.store.is_some();
        self.with_vb(vb, |inner| StreamInfo {
            state: inner.state,
            high_seqno: inner.high_seqno,
            purge_seqno: inner.purge_seqno,
            persisted_seqno: if persistent {
                persisted
            } else {
                inner.high_seqno
            },
            failover: inner.failover.clone(),
        })
    }

    /// A cursor that next reads the first change after `after`, if memory still holds
    /// everything after it; `None` means [`Self::backfill`] first.
    pub fn stream_cursor(&self, vb: VbId, after: Seqno) -> Result<Option<CursorId>, EngineError> {
        self.with_vb(vb, |inner| inner.checkpoints.register_cursor_after(after))
    }

    /// Reads up to `bytes_max` for a stream's cursor. `None`: the cursor was dropped to free
    /// checkpoint memory, and the stream must backfill from what it last sent.
    pub fn read_stream_cursor(
        &self,
        vb: VbId,
        cursor: CursorId,
        bytes_max: usize,
    ) -> Result<Option<Vec<CursorChunk>>, EngineError> {
        let persistent = self.store.is_some();
        self.with_vb(vb, |inner| {
            let (chunks, delta) = inner.checkpoints.try_read(cursor, bytes_max)?;
            inner.checkpoint_delta += delta;
            if persistent && !chunks.is_empty() {
                // The flusher closes a checkpoint every cursor has read, but it only comes
                // back to this vbucket after the next write: the last reader frees it now.
                inner.checkpoint_delta += inner.checkpoints.close_if_fully_read();
            }
            Some(chunks)
        })
    }

    pub fn release_stream_cursor(&self, vb: VbId, cursor: CursorId) {
        let _ = self.with_vb(vb, |inner| {
            inner.checkpoint_delta += inner.checkpoints.remove_cursor(cursor);
        });
    }

    /// Starts a backfill of `(after, end]`. Blocking (it may wait for the flusher): call it
    /// from a thread that may block.
    pub fn backfill(&self, vb: VbId, after: Seqno) -> Result<Backfill, EngineError> {
        let Some(store) = &self.store else {
            return self.with_vb(vb, |inner| {
                let high = inner.high_seqno;
                let mut items: Vec<Arc<QueuedItem>> = inner
                    .ht
                    .iter()
                    .filter(|(_, sv)| sv.meta.seqno > after && sv.meta.seqno <= high)
                    .map(|(key, sv)| {
                        Arc::new(QueuedItem {
                            key: bytes::Bytes::copy_from_slice(key),
                            meta: sv.meta,
                            value: sv.value.clone().unwrap_or_default(),
                            op: tombstone_op(&sv.meta),
                            first_version: false,
                        })
                    })
                    .collect();
                // Pending prepares too (for sync-write consumers). An ephemeral bucket keeps
                // no aborts: a consumer holding an aborted prepare learns of it only from a
                // later change of the key.
                items.extend(
                    inner
                        .prepares
                        .iter()
                        .filter(|(_, p)| p.meta.seqno > after && p.meta.seqno <= high)
                        .map(|(key, p)| {
                            Arc::new(QueuedItem {
                                key: key.clone(),
                                meta: p.meta,
                                value: p.value.clone(),
                                op: QueueOp::Prepare(p.level),
                                first_version: false,
                            })
                        }),
                );
                items.sort_unstable_by_key(|i| i.meta.seqno);
                let max_visible = items
                    .iter()
                    .rev()
                    .find(|i| i.op.visible())
                    .map_or(after, |i| i.meta.seqno);
                let cursor = inner
                    .checkpoints
                    .register_cursor_after(high)
                    .expect("memory always holds what follows the high seqno");
                Backfill {
                    vb,
                    after,
                    end: high,
                    max_visible,
                    high_completed: inner.prepares.high_completed_seqno(),
                    pos: after,
                    source: Source::Memory(items.into()),
                    cursor: Some(cursor),
                }
            });
        };
        let oldest_in_memory = self.with_vb(vb, |inner| inner.checkpoints.oldest_snap_start())?;
        let needed = Seqno(oldest_in_memory.0.saturating_sub(1));
        if !self.wait_persisted(vb, needed, BACKFILL_PERSIST_WAIT)? {
            return Err(EngineError::TempFail);
        }
        // The scan ends at the snapshot's own high seqno, not at `persisted_seqno` read
        // beside it: a commit landing between the two would rewrite a key past the end and
        // leave the snapshot without it.
        let snapshot = store.snapshot();
        let end = snapshot
            .high_seqno(vb)
            .map_err(|e| EngineError::Storage(e.to_string()))?;
        debug_assert!(end >= needed, "what was waited for is in the snapshot");
        let max_visible = snapshot
            .max_visible_seqno(vb, after, end)
            .map_err(|e| EngineError::Storage(e.to_string()))?
            .unwrap_or(after);
        let high_completed = snapshot
            .high_completed_seqno(vb)
            .map_err(|e| EngineError::Storage(e.to_string()))?;
        Ok(Backfill {
            vb,
            after,
            end: end.max(after),
            max_visible,
            high_completed,
            pos: after,
            source: Source::Disk(snapshot),
            cursor: None,
        })
    }
}
