//! The flusher: the first cursor of every vbucket's checkpoints. It gathers dirty items across
//! the vbuckets marked in [`crate::dirty_vbuckets`] into one batch (bounded in bytes), commits
//! it with one sync, then marks the items clean and moves each vbucket's persisted seqno.
//!
//! Group commit falls out of the loop: while one commit syncs, new writes queue up and the
//! next round takes them all. A failed commit is never retried: the bucket refuses writes
//! from then on and the reason is logged and shown in stats.

use crate::background::Share;
use crate::bucket::Bucket;
use crate::stats::BucketStats;
use sluice_storage::{FlushBatch, ItemRecord, OnDisk, VbMeta};
use sluice_types::{Seqno, VbId};
use std::ops::Range;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long the flusher sleeps when there is nothing to do (it is woken on every write).
const IDLE_WAIT: Duration = Duration::from_millis(100);

/// The flusher takes a fair share of the CPU from this share of the checkpoint budget on
/// (writes are refused at the whole budget)...
const FAIR_SHARE_FROM: f64 = 0.5;
/// ...and goes back to the leftovers below this one.
const LEFTOVER_SHARE_BELOW: f64 = 0.2;

pub fn run(bucket: &Bucket) {
    crate::background::mark_current_thread_as_batch();
    let mut share = Share::Leftover;
    let mut start_vb = 0usize;
    loop {
        let m = &bucket.memory;
        let wanted = share_for(m.checkpoint_used(), m.checkpoint_bytes_max, share);
        if wanted != share {
            crate::background::set_current_batch_share(wanted);
            tracing::debug!(?wanted, "flusher CPU share changed with its backlog");
            share = wanted;
        }
        let stopping = bucket.shutdown.load(Ordering::SeqCst);
        let began = Instant::now();
        match flush_once(bucket, &mut start_vb) {
            Ok(true) => {
                // Let the next batch gather (see BucketConfig::flush_interval). Writes keep
                // raising `flusher_wake` meanwhile; the next round finds them.
                if let Some(rest) = bucket.config.flush_interval.checked_sub(began.elapsed()) {
                    if !stopping {
                        std::thread::sleep(rest);
                    }
                }
            }
            Ok(false) if stopping => return,
            Ok(false) => {
                bucket.flusher_wake.wait_timeout(IDLE_WAIT);
            }
            Err(()) => return,
        }
    }
}

/// The flusher's CPU share for a backlog of `backlog` checkpoint bytes, with hysteresis: low
/// priority keeps request latency low while the flusher keeps up; once writes pile up
/// towards the budget (where they would be refused), persistence needs the CPU more.
fn share_for(backlog: u64, budget: u64, current: Share) -> Share {
    let share_of_budget = backlog as f64 / budget.max(1) as f64;
    match current {
        Share::Leftover if share_of_budget >= FAIR_SHARE_FROM => Share::Fair,
        Share::Fair if share_of_budget < LEFTOVER_SHARE_BELOW => Share::Leftover,
        same => same,
    }
}

/// What was flushed for one vbucket, to acknowledge after the commit: its items are
/// `batch.items[items]` (the batch outlives the commit, so no key is copied for this).
struct Flushed {
    vb: VbId,
    items: Range<usize>,
    high_seqno: Seqno,
}

/// One round. Ok(true) if it committed something; Err(()) once storage has failed.
fn flush_once(bucket: &Bucket, start_vb: &mut usize) -> Result<bool, ()> {
    let Some(store) = &bucket.store else {
        return Ok(false);
    };
    // A vbucket reset must not fall between reading the cursors and committing.
    let _round = bucket.flush_lock.lock();
    let round_began = Instant::now();
    let n = bucket.vbuckets.len();
    let mut batch = FlushBatch::default();
    let mut flushed = Vec::new();
    let mut bytes = 0usize;
    let budget = bucket.config.flush_batch_bytes_max;
    let dirty = bucket.dirty.take(*start_vb);
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
            batch.on_disk.push(if item.first_version {
                OnDisk::Absent
            } else {
                inner.on_disk(&item.key)
            });
            batch.items.push(ItemRecord {
                vb: vbucket.id,
                key: item.key.clone(),
                meta: item.meta,
                value: item.value.clone(),
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
        return Err(());
    }
    for f in flushed {
        let vbucket = &bucket.vbuckets[usize::from(f.vb.0)];
        let mut inner = vbucket.inner.lock();
        for item in &batch.items[f.items] {
            inner.mark_persisted(&item.key, item.meta.seqno);
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
    Ok(true)
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_follows_the_backlog_with_hysteresis() {
        let budget = 1000;
        assert_eq!(share_for(0, budget, Share::Leftover), Share::Leftover);
        assert_eq!(share_for(499, budget, Share::Leftover), Share::Leftover);
        assert_eq!(share_for(500, budget, Share::Leftover), Share::Fair);
        // Between the two thresholds the share stays what it was.
        assert_eq!(share_for(300, budget, Share::Fair), Share::Fair);
        assert_eq!(share_for(300, budget, Share::Leftover), Share::Leftover);
        assert_eq!(share_for(199, budget, Share::Fair), Share::Leftover);
        // A bucket with no checkpoint budget never divides by zero.
        assert_eq!(share_for(5, 0, Share::Leftover), Share::Fair);
    }
}
