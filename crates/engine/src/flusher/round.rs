//! One flusher round: gathers the dirty vbuckets' items into one batch (bounded in bytes),
//! commits it with one sync, then marks the items clean and moves each vbucket's persisted
//! seqno.

use super::schedule::RoundOutcome;
use crate::bucket::Bucket;
use crate::checkpoint::QueueOp;
use crate::stats::BucketStats;
use sluice_storage::{FlushBatch, ItemRecord, OnDisk, RecordKind, VbMeta};
use sluice_types::{Seqno, VbId};
use std::ops::Range;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// What was flushed for one vbucket, to acknowledge after the commit: its items are
/// `batch.items[items]` (the batch outlives the commit, so no key is copied for this).
struct Flushed {
    vb: VbId,
    items: Range<usize>,
    high_seqno: Seqno,
}

/// One round over the dirty vbuckets, in order from `first_vb`.
pub fn flush_once(bucket: &Bucket, first_vb: usize) -> RoundOutcome {
    let Some(store) = &bucket.store else {
        return RoundOutcome::Empty;
    };
    // A vbucket reset must not fall between reading the cursors and committing.
    let _round = bucket.flush_lock.lock();
    let round_began = Instant::now();
    let mut batch = FlushBatch::default();
    let mut flushed = Vec::new();
    let mut bytes = 0usize;
    let budget = bucket.config.flush_batch_bytes_max;
    let dirty = bucket.dirty.take(first_vb);
    // Changes of collections dropped since they were queued never reach the disk.
    let live = bucket.live_collections();
    for (i, &vb) in dirty.iter().enumerate() {
        if bytes >= budget {
            // The batch is full: the rest wait for the next round.
            dirty[i..].iter().for_each(|&vb| bucket.dirty.mark(vb));
            break;
        }
        let vbucket = &bucket.vbuckets[usize::from(vb.0)];
        let mut inner = vbucket.inner.lock();
        let Some(cursor) = inner.flusher_cursor else {
            continue;
        };
        let (chunks, delta) = inner.checkpoints.read(cursor, budget - bytes);
        bucket.memory.add_checkpoint(delta);
        // Persisted-soon items need not sit in a half-empty open checkpoint; once the commit
        // below succeeds nothing else needs them (other cursors keep it open if they lag).
        let delta = inner.checkpoints.close_if_fully_read();
        bucket.memory.add_checkpoint(delta);
        if chunks.is_empty() && !inner.meta_dirty {
            continue;
        }
        let mut f = Flushed {
            vb: vbucket.id,
            items: batch.items.len()..batch.items.len(),
            high_seqno: vbucket.persisted_seqno(),
        };
        for item in chunks.iter().flat_map(|c| c.items.iter()) {
            bytes += item.mem_bytes();
            f.high_seqno = f.high_seqno.max(item.meta.seqno);
            if let QueueOp::Commit { prepared } | QueueOp::Abort { prepared } = item.op {
                // Counted before the commit: a failed commit stops the flusher for good,
                // so no metadata ever claims a completion without its record.
                inner.flushed_high_completed = inner.flushed_high_completed.max(prepared);
            }
            if live.drops_key(&item.key) {
                continue;
            }
            let kind = record_kind(item.op);
            // Hints speak of the committed namespace; storage looks pending records up.
            batch.on_disk.push(match kind {
                RecordKind::Committed if item.first_version => OnDisk::Absent,
                RecordKind::Committed => inner.on_disk(&item.key),
                RecordKind::Prepare(_) | RecordKind::Abort { .. } => OnDisk::Unknown,
            });
            batch.items.push(ItemRecord {
                vb: vbucket.id,
                key: item.key.clone(),
                meta: item.meta,
                value: item.value.clone(),
                kind,
            });
        }
        f.items.end = batch.items.len();
        if bytes >= budget {
            // The read stopped at the budget and may have left items behind.
            bucket.dirty.mark(vb);
        }
        batch.vb_meta.push((
            vbucket.id,
            VbMeta {
                state: inner.state,
                failover_log: inner.failover.clone(),
                high_seqno: f.high_seqno,
                purge_seqno: inner.purge_seqno,
                max_cas: inner.hlc.max_cas(),
                high_completed_seqno: inner.flushed_high_completed,
            },
        ));
        inner.meta_dirty = false;
        flushed.push(f);
    }
    batch.purges = std::mem::take(&mut *bucket.pending_purges.lock());
    if batch.is_empty() {
        return RoundOutcome::Empty;
    }
    let items = batch.items.len() as u64;
    let commit_began = Instant::now();
    let committed = store.commit(&batch);
    let commit_took = commit_began.elapsed();
    if let Err(e) = committed {
        let reason = e.to_string();
        tracing::error!(bucket = %bucket.config.name, error = %reason,
            "storage commit failed; the bucket refuses writes from now on");
        *bucket.write_failure.lock() = Some(reason);
        bucket.writes_refused.store(true, Ordering::Release);
        bucket.persisted.notify();
        return RoundOutcome::Failed;
    }
    for f in flushed {
        let vbucket = &bucket.vbuckets[usize::from(f.vb.0)];
        let mut inner = vbucket.inner.lock();
        for item in &batch.items[f.items] {
            if item.kind == RecordKind::Committed {
                inner.mark_persisted(&item.key, item.meta.seqno);
            }
        }
        let (mem, ckpt) = inner.take_deltas();
        vbucket
            .persisted_seqno
            .fetch_max(f.high_seqno.0, Ordering::AcqRel);
        drop(inner);
        bucket.memory.add(mem);
        bucket.memory.add_checkpoint(ckpt);
    }
    for (vb, key, seqno) in &batch.purges {
        let _ = bucket.with_vb(*vb, |inner| inner.purged_from_disk(key, *seqno));
    }
    BucketStats::bump(&bucket.stats.flusher_commits);
    BucketStats::add(&bucket.stats.flusher_items, items);
    BucketStats::add(&bucket.stats.flusher_bytes, bytes as u64);
    BucketStats::add(&bucket.stats.flusher_commit_us, micros(commit_took));
    BucketStats::add(
        &bucket.stats.flusher_round_us,
        micros(round_began.elapsed()),
    );
    bucket.persisted.notify();
    bucket.room_freed();
    RoundOutcome::Committed
}

/// Where a queued change is persisted: a commit is the committed version like any
/// mutation; prepares and aborts go to the pending namespace.
fn record_kind(op: QueueOp) -> RecordKind {
    match op {
        QueueOp::Mutation | QueueOp::Deletion | QueueOp::Expiration | QueueOp::Commit { .. } => {
            RecordKind::Committed
        }
        QueueOp::Prepare(level) => RecordKind::Prepare(level),
        QueueOp::Abort { prepared } => RecordKind::Abort { prepared },
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
