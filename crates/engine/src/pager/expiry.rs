//! The expiry pager: expires items whose time has passed, so they leave memory and disk
//! without waiting for a read to find them.

use crate::bucket::Bucket;
use crate::stats::BucketStats;
use sluice_types::VbId;

/// Expirations per vbucket per pass, so one pass never holds a lock for long.
const EXPIRIES_PER_VB_MAX: usize = 10_000;

pub fn expire(bucket: &Bucket) {
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
