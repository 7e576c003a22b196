//! Operation counters, cheap enough to bump on every request.

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($($name:ident),* $(,)?) => {
        #[derive(Debug, Default)]
        pub struct BucketStats { $(pub $name: AtomicU64),* }
        impl BucketStats {
            /// (name, value) pairs, in declaration order.
            pub fn pairs(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name.load(Ordering::Relaxed))),*]
            }
        }
    };
}

counters! {
    cmd_get, get_hits, get_misses, cmd_set, cmd_delete, delete_misses, incr_hits, decr_hits,
    incr_misses, decr_misses, cas_hits, cas_badval, cas_misses, cmd_touch, touch_hits,
    touch_misses, bg_fetches, evictions, expired_on_access, expired_by_pager, tmp_fails,
    flusher_commits, flusher_items, flusher_bytes, tombstones_purged, items_warmed_up,
}

impl BucketStats {
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}
