//! Background housekeeping on one thread:
//! - the **item pager**: above the high watermark, evicts values of clean items (second-chance:
//!   a value read since the last pass survives one more) until usage is below the low watermark;
//! - the **expiry pager**: every `expiry_pager_interval`, expires items whose time has passed;
//! - the **tombstone purger**: drops tombstones older than `tombstone_purge_age` (in memory for
//!   ephemeral buckets, on disk through the flusher for couchbase buckets);
//! - the **collection sweep** (`collections`): removes what dropped collections left, when
//!   the live set changes or their documents turn up in memory again.
//!
//! When each runs is decided by [`schedule::PagerSchedule`], which takes the time and the
//! memory counters as parameters; this thread only reads them and does the work
//! (`evict`, `expiry`, `tombstones`, and `crate::checkpoint_recovery`).

mod collections;
mod evict;
mod expiry;
mod schedule;
mod tombstones;

use crate::bucket::Bucket;
use schedule::{MemoryPressure, PagerAction, PagerSchedule};
use std::sync::atomic::Ordering;
use std::time::Instant;

pub fn run(bucket: &Bucket) {
    let config = &bucket.config;
    let mut schedule = PagerSchedule::new(
        Instant::now(),
        config.expiry_pager_interval,
        config.tombstone_purge_age,
    );
    while !bucket.shutdown.load(Ordering::SeqCst) {
        if collections::due(bucket) {
            collections::sweep(bucket);
        }
        // One pass: the schedule's actions up to its wait.
        loop {
            let memory = MemoryPressure {
                recovery_needed: crate::checkpoint_recovery::needed(bucket),
                above_high_watermark: bucket.memory.above_high_watermark(),
            };
            match schedule.step(Instant::now(), memory) {
                PagerAction::RecoverCheckpoints => {
                    let freed_bytes = crate::checkpoint_recovery::recover(bucket);
                    if freed_bytes > 0 {
                        bucket.room_freed();
                    }
                    schedule.recovered(freed_bytes);
                }
                PagerAction::Evict => evict::evict(bucket),
                PagerAction::RunExpiry => expiry::expire(bucket),
                PagerAction::PurgeTombstones => tombstones::purge(bucket),
                PagerAction::Pause(pause) => std::thread::sleep(pause),
                PagerAction::Wait(tick) => {
                    bucket.pager_wake.wait_timeout(tick);
                    break;
                }
            }
        }
    }
}
