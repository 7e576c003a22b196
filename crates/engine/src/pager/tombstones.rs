//! The tombstone purger: drops tombstones older than `tombstone_purge_age`, in memory and
//! (through the flusher's next commit) on disk.

use crate::bucket::Bucket;
use crate::stats::BucketStats;
use bytes::Bytes;
use sluice_types::{Seqno, VbId};

pub fn purge(bucket: &Bucket) {
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
                // Committed tombstones only: aborts and durable-delete prepares are not.
                Ok(r)
                    if r.meta.deleted
                        && r.meta.delete_time < cutoff
                        && r.kind == sluice_storage::RecordKind::Committed =>
                {
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
