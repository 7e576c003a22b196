//! Background housekeeping on one thread:
//! - the **item pager**: above the high watermark, evicts values of clean items (second-chance:
//!   a value read since the last pass survives one more) until usage is below the low watermark;
//! - the **expiry pager**: every `expiry_pager_interval`, expires items whose time has passed;
//! - the **tombstone purger**: drops tombstones older than `tombstone_purge_age` (in memory for
//!   ephemeral buckets, on disk through the flusher for couchbase buckets).

use crate::bucket::Bucket;
use crate::stats::BucketStats;
use bytes::Bytes;
use sluice_types::{Seqno, VbId};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const TICK: Duration = Duration::from_millis(250);
/// Pause after a checkpoint-recovery pass that freed nothing. Every write above the recovery
/// threshold wakes the pager, so without it a flusher that lags behind the writes keeps the
/// pager spinning over every vbucket's lock (measured: a fifth of a core, and thousands of
/// tiny checkpoints) while only the flusher can make room.
const FUTILE_RECOVERY_PAUSE: Duration = Duration::from_millis(20);
/// Expirations per vbucket per pass, so one pass never holds a lock for long.
const EXPIRIES_PER_VB_MAX: usize = 10_000;

pub fn run(bucket: &Bucket) {
    let mut last_expiry = Instant::now();
    let mut last_purge = Instant::now();
    let purge_every = (bucket.config.tombstone_purge_age / 2).max(Duration::from_secs(1));
    while !bucket.shutdown.load(Ordering::SeqCst) {
        let recovered = crate::checkpoint_recovery::recover(bucket);
        if recovered > 0 {
            bucket.room_freed();
        }
        let futile = recovered == 0 && crate::checkpoint_recovery::needed(bucket);
        if bucket.memory.above_high_watermark() {
            evict(bucket);
        }
        if last_expiry.elapsed() >= bucket.config.expiry_pager_interval {
            expire(bucket);
            last_expiry = Instant::now();
        }
        if last_purge.elapsed() >= purge_every {
            purge(bucket);
            last_purge = Instant::now();
        }
        if futile {
            std::thread::sleep(FUTILE_RECOVERY_PAUSE);
        }
        bucket.pager_wake.wait_timeout(TICK);
    }
}

/// Evicts until below the low watermark: values first (two passes, so recently read values
/// get a second chance); if that is not enough, whole clean items (metadata too).
pub fn evict(bucket: &Bucket) {
    if !bucket.config.is_persistent() {
        return;
    }
    evict_values(bucket);
    if bucket.memory.above_low_watermark() {
        evict_keys(bucket);
    }
    bucket.room_freed();
}

fn evict_values(bucket: &Bucket) {
    for _pass in 0..2 {
        for vbucket in bucket.vbuckets.iter() {
            if !bucket.memory.above_low_watermark() {
                return;
            }
            let freed = {
                let mut inner = vbucket.inner.lock();
                let mut victims: Vec<Box<[u8]>> = Vec::new();
                for (key, sv) in inner.ht.iter_mut() {
                    if sv.dirty || sv.meta.deleted || sv.value.is_none() {
                        continue;
                    }
                    if sv.referenced {
                        sv.referenced = false;
                    } else {
                        victims.push(key.into());
                    }
                }
                let mut freed = 0;
                for key in &victims {
                    freed += inner.ht.evict_value(key);
                }
                BucketStats::add(&bucket.stats.evictions, victims.len() as u64);
                freed
            };
            bucket.memory.add(-(freed as isize));
        }
    }
}

/// Full eviction: drops clean entries (values already gone, tombstones, "known absent"
/// markers) until below the low watermark. The vbucket then answers misses from disk.
fn evict_keys(bucket: &Bucket) {
    for vbucket in bucket.vbuckets.iter() {
        if !bucket.memory.above_low_watermark() {
            return;
        }
        let (freed, n) = {
            let mut inner = vbucket.inner.lock();
            let victims: Vec<Box<[u8]>> = inner
                .ht
                .iter()
                .filter(|(_, sv)| !sv.dirty && (sv.value.is_none() || sv.meta.deleted))
                .map(|(k, _)| k.into())
                .collect();
            let freed: usize = victims.iter().map(|k| inner.evict_key(k)).sum();
            (freed, victims.len())
        };
        BucketStats::add(&bucket.stats.evictions, n as u64);
        bucket.memory.add(-(freed as isize));
    }
}

fn expire(bucket: &Bucket) {
    let ctx = bucket.ctx();
    let mut n = 0;
    for vb in 0..bucket.num_vbuckets() {
        n += bucket
            .with_vb(VbId(vb), |inner| {
                inner.expire_due(&ctx, EXPIRIES_PER_VB_MAX)
            })
            .unwrap_or(0);
    }
    if n > 0 {
        BucketStats::add(&bucket.stats.expired_by_pager, n as u64);
        bucket.flusher_wake.notify();
    }
}

fn purge(bucket: &Bucket) {
    let now_s = bucket.ctx().now_unix_s;
    let cutoff = now_s.saturating_sub(bucket.config.tombstone_purge_age.as_secs() as u32);
    let mut purged = 0;
    for vb in 0..bucket.num_vbuckets() {
        let vb = VbId(vb);
        purged += bucket
            .with_vb(vb, |inner| inner.purge_tombstones(cutoff).0)
            .unwrap_or(0);
        let Some(store) = &bucket.store else {
            continue;
        };
        // Persisted tombstones: found on disk, removed by the flusher's next commit.
        let mut found: Vec<(VbId, Bytes, Seqno)> = Vec::new();
        for record in store.scan_vb(vb) {
            match record {
                Ok(r) if r.meta.deleted && r.meta.delete_time < cutoff => {
                    found.push((vb, r.key, r.meta.seqno));
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(%vb, error = %e, "tombstone purge scan failed");
                    break;
                }
            }
        }
        if let Some(high) = found.iter().map(|f| f.2).max() {
            purged += found.len();
            let _ = bucket.with_vb(vb, |inner| {
                if high > inner.purge_seqno {
                    inner.purge_seqno = high;
                    inner.meta_dirty = true;
                }
            });
            bucket.pending_purges.lock().extend(found);
        }
    }
    if purged > 0 {
        BucketStats::add(&bucket.stats.tombstones_purged, purged as u64);
        bucket.flusher_wake.notify();
    }
}
