//! The sweep of dropped collections (see `crate::collections` for the whole story): memory
//! first, vbucket by vbucket, then the disk, searched by key prefix with the flusher's
//! round lock held, its finds removed by the flusher's next commit.

use crate::bucket::Bucket;
use crate::stats::BucketStats;
use sluice_types::VbId;
use std::sync::atomic::Ordering;

/// Most on-disk keys one sweep queues for removal; the rest wait for the next pass (the
/// queue is memory the flusher's next batch holds).
const SWEEP_KEYS_MAX: usize = 64 * 1024;

/// Whether a sweep is due: a new live set, or documents of dropped collections in memory
/// again (a write admitted just before the drop, a replica's late change).
pub fn due(bucket: &Bucket) -> bool {
    if bucket.collection_sweep_wanted.swap(false, Ordering::AcqRel) {
        return true;
    }
    let live = bucket.live_collections();
    if !live.any_dropped() {
        return false;
    }
    bucket
        .vbuckets
        .iter()
        .any(|v| v.inner.lock().collection_items.holds_dropped(&live))
}

pub fn sweep(bucket: &Bucket) {
    let live = bucket.live_collections();
    if !live.any_dropped() {
        return;
    }
    let persistent = bucket.store.is_some();
    let mut removed = 0;
    for vb in 0..bucket.num_vbuckets() {
        removed += bucket
            .with_vb(VbId(vb), |inner| inner.drop_collections(&live, persistent))
            .unwrap_or(0);
    }
    if let Some(store) = &bucket.store {
        // A round in flight may still write changes of a dropped collection (it read them
        // before the live set changed); the next ones skip them. Search once it is done.
        let _round = bucket.flush_lock.lock();
        let mut swept = bucket.collections_swept_on_disk.lock();
        let mut queued = Vec::new();
        let mut complete = true;
        let unswept: Vec<_> = live.dropped().filter(|c| !swept.contains(c)).collect();
        'collections: for cid in unswept {
            let prefix = cid.prefix();
            for vb in 0..bucket.num_vbuckets() {
                let vb = VbId(vb);
                let room = SWEEP_KEYS_MAX - queued.len();
                match store.keys_with_prefix(vb, &prefix, room) {
                    Ok(found) => {
                        let full = found.len() == room;
                        queued.extend(found.into_iter().map(|(k, s)| (vb, k, s)));
                        if full {
                            complete = false;
                            break 'collections;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(%vb, error = %e, "dropped collection: disk search failed");
                        complete = false;
                        break 'collections;
                    }
                }
            }
            swept.insert(cid);
        }
        drop(swept);
        removed += queued.len();
        if !queued.is_empty() {
            bucket.pending_purges.lock().extend(queued);
            bucket.flusher_wake.notify();
        }
        if !complete {
            // The rest next pass: what was queued is gone from disk by then, or is
            // queued again and ignored (a purge applies only to the version it names).
            bucket
                .collection_sweep_wanted
                .store(true, Ordering::Release);
        }
    }
    if removed > 0 {
        BucketStats::add(&bucket.stats.collection_items_swept, removed as u64);
        tracing::info!(bucket = %bucket.config.name, removed, "dropped collections swept");
    }
}
