//! Operation counters, cheap enough to bump on every request from every thread.
//!
//! Each counter is split into per-thread slots on separate cache lines, so two connection
//! threads bumping `cmd_get` never fight over one line; a reading sums the slots.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

const SLOTS: usize = 8;

#[derive(Debug, Default)]
#[repr(align(64))]
struct Slot(AtomicU64);

/// A monotonic counter with per-thread slots.
#[derive(Debug, Default)]
pub struct Counter([Slot; SLOTS]);

static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static MY_SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

fn my_slot() -> usize {
    MY_SLOT.with(|s| {
        if s.get() == usize::MAX {
            s.set(NEXT_SLOT.fetch_add(1, Ordering::Relaxed) % SLOTS);
        }
        s.get()
    })
}

impl Counter {
    pub fn add(&self, n: u64) {
        self.0[my_slot()].0.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.iter().map(|s| s.0.load(Ordering::Relaxed)).sum()
    }
}

macro_rules! counters {
    ($($name:ident),* $(,)?) => {
        #[derive(Debug, Default)]
        pub struct BucketStats { $(pub $name: Counter),* }
        impl BucketStats {
            /// (name, value) pairs, in declaration order.
            pub fn pairs(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name.get())),*]
            }
        }
    };
}

counters! {
    cmd_get, get_hits, get_misses, cmd_set, cmd_delete, delete_misses, incr_hits, decr_hits,
    incr_misses, decr_misses, cas_hits, cas_badval, cas_misses, cmd_touch, touch_hits,
    touch_misses, bg_fetches, evictions, expired_by_pager, tmp_fails,
    flusher_commits, flusher_items, flusher_bytes, flusher_commit_us, flusher_round_us,
    tombstones_purged, items_warmed_up, collection_items_swept,
    cursors_dropped, checkpoint_recovery_passes,
    // Couchbase's names: prepares made on this node's actives, and how they completed.
    vb_active_sync_write_accepted_count, vb_active_sync_write_committed_count,
    vb_active_sync_write_aborted_count,
}

impl BucketStats {
    pub fn bump(counter: &Counter) {
        counter.add(1);
    }
    pub fn add(counter: &Counter, n: u64) {
        counter.add(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_from_many_threads_add_up() {
        let c = std::sync::Arc::new(Counter::default());
        let threads: Vec<_> = (0..12)
            .map(|_| {
                let c = c.clone();
                std::thread::spawn(move || (0..1000).for_each(|_| c.add(1)))
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(c.get(), 12_000);
    }
}
