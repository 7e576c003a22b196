//! The flusher: the first cursor of every vbucket's checkpoints. It gathers dirty items across
//! vbuckets into one batch (bounded in bytes), commits it with one sync, then marks the
//! items clean and moves each vbucket's persisted seqno.
//!
//! Group commit falls out of the loop: while one commit syncs, new writes queue up and the
//! next round takes them all. A failed commit is never retried: the bucket refuses writes
//! from then on and the reason is logged and shown in stats.

use crate::bucket::Bucket;
use crate::stats::BucketStats;
use bytes::Bytes;
use sluice_storage::{FlushBatch, ItemRecord, VbMeta};
use sluice_types::{Seqno, VbId};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How long the flusher sleeps when there is nothing to do (it is woken on every write).
const IDLE_WAIT: Duration = Duration::from_millis(100);

pub fn run(bucket: &Bucket) {
    crate::background::mark_current_thread_as_batch();
    let mut start_vb = 0usize;
    loop {
        let stopping = bucket.shutdown.load(Ordering::SeqCst);
        match flush_once(bucket, &mut start_vb) {
            Ok(true) => continue,
            Ok(false) if stopping => return,
            Ok(false) => {
                bucket.flusher_wake.wait_timeout(IDLE_WAIT);
            }
            Err(()) => return,
        }
    }
}

/// What was flushed for one vbucket, to acknowledge after the commit.
struct Flushed {
    vb: VbId,
    items: Vec<(Bytes, Seqno)>,
    high_seqno: Seqno,
}

/// One round. Ok(true) if it committed something; Err(()) once storage has failed.
fn flush_once(bucket: &Bucket, start_vb: &mut usize) -> Result<bool, ()> {
    let Some(store) = &bucket.store else {
        return Ok(false);
    };
    // A vbucket reset must not fall between reading the cursors and committing.
    let _round = bucket.flush_lock.lock();
    let n = bucket.vbuckets.len();
    let mut batch = FlushBatch::default();
    let mut flushed = Vec::new();
    let mut bytes = 0usize;
    let budget = bucket.config.flush_batch_bytes_max;
    for i in 0..n {
        if bytes >= budget {
            break;
        }
        let vbucket = &bucket.vbuckets[(*start_vb + i) % n];
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
            items: Vec::new(),
            high_seqno: vbucket.persisted_seqno(),
        };
        for item in chunks.iter().flat_map(|c| c.items.iter()) {
            bytes += item.mem_bytes();
            f.items.push((item.key.clone(), item.meta.seqno));
            f.high_seqno = f.high_seqno.max(item.meta.seqno);
            batch.items.push(ItemRecord {
                vb: vbucket.id,
                key: item.key.clone(),
                meta: item.meta,
                value: item.value.clone(),
            });
        }
        batch.vb_meta.push((
            vbucket.id,
            VbMeta {
                state: inner.state,
                failover_log: inner.failover.clone(),
                high_seqno: f.high_seqno,
                purge_seqno: inner.purge_seqno,
                max_cas: inner.hlc.max_cas(),
            },
        ));
        inner.meta_dirty = false;
        flushed.push(f);
    }
    *start_vb = (*start_vb + 1) % n;
    batch.purges = std::mem::take(&mut *bucket.pending_purges.lock());
    if batch.is_empty() {
        return Ok(false);
    }
    let items = batch.items.len() as u64;
    if let Err(e) = store.commit(batch) {
        let reason = e.to_string();
        tracing::error!(bucket = %bucket.config.name, error = %reason,
            "storage commit failed; the bucket refuses writes from now on");
        *bucket.write_failure.lock() = Some(reason);
        bucket.writes_refused.store(true, Ordering::Release);
        bucket.persisted.notify();
        return Err(());
    }
    for f in flushed {
        let vbucket = &bucket.vbuckets[usize::from(f.vb.0)];
        let mut inner = vbucket.inner.lock();
        for (key, seqno) in &f.items {
            inner.mark_persisted(key, *seqno);
        }
        let (mem, ckpt) = inner.take_deltas();
        vbucket
            .persisted_seqno
            .fetch_max(f.high_seqno.0, Ordering::AcqRel);
        drop(inner);
        bucket.memory.add(mem);
        bucket.memory.add_checkpoint(ckpt);
    }
    BucketStats::bump(&bucket.stats.flusher_commits);
    BucketStats::add(&bucket.stats.flusher_items, items);
    BucketStats::add(&bucket.stats.flusher_bytes, bytes as u64);
    bucket.persisted.notify();
    Ok(true)
}
