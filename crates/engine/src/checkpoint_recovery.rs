//! Keeping checkpoint memory within its budget when streams lag.
//!
//! Recovery starts above [`RECOVERY_START`] of the budget and stops below [`RECOVERY_STOP`],
//! in this order, cheapest first:
//! 1. close open checkpoints, so those every cursor has read can be freed;
//! 2. expel items every cursor has passed from the oldest checkpoints;
//! 3. drop the slowest stream cursors (never the flusher's), the vbuckets holding the most
//!    checkpoint memory first. Their streams find the cursor gone on their next read and
//!    backfill from disk, or end as too slow (see the server's DCP producer).
//!
//! Only when none of this gets below the budget do writes get a temporary failure
//! (`Bucket::admit_write`).

use crate::bucket::Bucket;
use crate::stats::BucketStats;

pub const RECOVERY_START: f64 = 0.9;
pub const RECOVERY_STOP: f64 = 0.6;

fn over(bucket: &Bucket, share: f64) -> bool {
    let m = &bucket.memory;
    m.checkpoint_used() as f64 > m.checkpoint_bytes_max() as f64 * share
}

/// Whether recovery should run now.
pub fn needed(bucket: &Bucket) -> bool {
    over(bucket, RECOVERY_START)
}

/// One recovery pass. Returns the checkpoint bytes it freed (0 when it was not needed, or
/// when nothing could be freed: every byte is still waiting for the flusher).
pub fn recover(bucket: &Bucket) -> usize {
    if !needed(bucket) {
        return 0;
    }
    BucketStats::bump(&bucket.stats.checkpoint_recovery_passes);
    let before = bucket.memory.checkpoint_used();
    for vbucket in bucket.vbuckets.iter() {
        let _ = bucket.with_vb(vbucket.id, |inner| {
            inner.checkpoint_delta += inner.checkpoints.close_open_checkpoint();
            inner.checkpoint_delta += inner.checkpoints.expel_read_items();
        });
    }
    let freed = |bucket: &Bucket| before.saturating_sub(bucket.memory.checkpoint_used()) as usize;
    if !over(bucket, RECOVERY_STOP) {
        return freed(bucket);
    }
    let mut by_memory: Vec<(usize, usize)> = bucket
        .vbuckets
        .iter()
        .enumerate()
        .map(|(i, v)| (v.inner.lock().checkpoints.mem_bytes(), i))
        .filter(|(bytes, _)| *bytes > 0)
        .collect();
    by_memory.sort_unstable_by(|a, b| b.cmp(a));
    for (_, i) in by_memory {
        if !over(bucket, RECOVERY_STOP) {
            break;
        }
        let vbucket = &bucket.vbuckets[i];
        let _ = bucket.with_vb(vbucket.id, |inner| {
            while let Some(c) = inner.checkpoints.slowest_cursor(inner.flusher_cursor) {
                inner.checkpoint_delta += inner.checkpoints.remove_cursor(c);
                BucketStats::bump(&bucket.stats.cursors_dropped);
            }
            inner.checkpoint_delta += inner.checkpoints.expel_read_items();
        });
    }
    freed(bucket)
}
