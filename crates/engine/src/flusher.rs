//! The flusher: the first cursor of every vbucket's checkpoints. It gathers dirty items across
//! the vbuckets marked in [`crate::dirty_vbuckets`] into one batch (bounded in bytes), commits
//! it with one sync, then marks the items clean and moves each vbucket's persisted seqno.
//!
//! Group commit falls out of the loop: while one commit syncs, new writes queue up and the
//! next round takes them all. A failed commit is never retried: the bucket refuses writes
//! from then on and the reason is logged and shown in stats.
//!
//! `schedule` decides (the CPU share, where a round starts, what follows it) from the time and
//! the backlog passed in; `round` is one round's work; this thread joins them.

mod round;
mod schedule;

use crate::bucket::Bucket;
use schedule::{FlusherAction, FlusherObservation, FlusherSchedule};
use std::sync::atomic::Ordering;
use std::time::Instant;

pub fn run(bucket: &Bucket) {
    crate::background::mark_current_thread_as_batch();
    let mut schedule = FlusherSchedule::new(bucket.config.flush_interval, bucket.vbuckets.len());
    loop {
        let m = &bucket.memory;
        let seen = FlusherObservation {
            checkpoint_bytes: m.checkpoint_used(),
            checkpoint_bytes_max: m.checkpoint_bytes_max(),
            stopping: bucket.shutdown.load(Ordering::SeqCst),
        };
        match schedule.step(Instant::now(), seen) {
            FlusherAction::SetShare(share) => {
                crate::background::set_current_batch_share(share);
                tracing::debug!(wanted = ?share, "flusher CPU share changed with its backlog");
            }
            FlusherAction::Flush { first_vb } => {
                schedule.round_done(round::flush_once(bucket, first_vb));
            }
            FlusherAction::Sleep(rest) => std::thread::sleep(rest),
            FlusherAction::Wait(idle) => {
                bucket.flusher_wake.wait_timeout(idle);
            }
            FlusherAction::Stop => return,
        }
    }
}
