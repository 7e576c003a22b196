//! The item pager's eviction: frees memory by dropping what can be read back from disk.

use crate::bucket::Bucket;
use crate::stats::BucketStats;
use crate::system_events::is_system_key;

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
                    // System event records stay (see `system_events`).
                    if sv.dirty || sv.meta.deleted || sv.value.is_none() || is_system_key(key) {
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
                .filter(|(k, sv)| {
                    !sv.dirty && (sv.value.is_none() || sv.meta.deleted) && !is_system_key(k)
                })
                .map(|(k, _)| k.into())
                .collect();
            let freed: usize = victims.iter().map(|k| inner.evict_key(k)).sum();
            (freed, victims.len())
        };
        BucketStats::add(&bucket.stats.evictions, n as u64);
        bucket.memory.add(-(freed as isize));
    }
}
