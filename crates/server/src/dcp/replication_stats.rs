//! What this node's replication feeds applied, per feed (one per source node): changes,
//! bytes, and the replication latency, from the write on the active to the apply here.
//!
//! The latency is read off the change's CAS: the active's hybrid logical clock stamps every
//! write with its wall clock in nanoseconds (low 16 bits cleared, ~65 µs). On one machine, or
//! with synchronised clocks, `now - cas` is how long the change took to arrive and apply. A
//! CAS that runs ahead of the clock (a burst of writes within one tick) counts as 0. A
//! backfilled change carries its original CAS, so a replica catching up old data reports its
//! age, which is what "replication latency" means for it too.

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Largest latency recorded exactly; anything slower counts as this (an hour, in µs).
const LATENCY_US_MAX: u64 = 3_600_000_000;

/// Upper bounds (µs) of the buckets `/metrics` exports.
pub const EXPORT_BUCKETS_US: [u64; 18] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000, 60_000_000,
];

/// One feed's counters.
pub struct FeedStats {
    pub items: AtomicU64,
    /// Key + value bytes applied.
    pub bytes: AtomicU64,
    latency_us: Mutex<Histogram<u64>>,
}

impl FeedStats {
    pub(crate) fn new() -> FeedStats {
        FeedStats {
            items: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            latency_us: Mutex::new(
                Histogram::new_with_bounds(1, LATENCY_US_MAX, 2).expect("valid bounds"),
            ),
        }
    }

    /// One change applied: `cas_ns` is its CAS, `now_ns` the wall clock at the apply.
    pub fn record(&self, bytes: usize, cas_ns: u64, now_ns: u64) {
        self.items.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        let us = (now_ns.saturating_sub(cas_ns) / 1_000).clamp(1, LATENCY_US_MAX);
        self.latency_us.lock().saturating_record(us);
    }

    /// A copy of the latency histogram (µs).
    pub fn latency(&self) -> Histogram<u64> {
        self.latency_us.lock().clone()
    }
}

/// Every feed this node runs or ran since it started, by feed name, and the stage timings
/// of replicated writes through this node (its producers' and its consumers').
#[derive(Default)]
pub struct ReplicationStats {
    feeds: Mutex<BTreeMap<String, Arc<FeedStats>>>,
    pub stages: crate::dcp::stages::StageLatency,
}

impl ReplicationStats {
    /// The counters of feed `name`; a restarted feed of the same name keeps counting.
    pub fn feed(&self, name: &str) -> Arc<FeedStats> {
        self.feeds
            .lock()
            .entry(name.to_string())
            .or_insert_with(|| Arc::new(FeedStats::new()))
            .clone()
    }

    pub fn snapshot(&self) -> Vec<(String, Arc<FeedStats>)> {
        self.feeds
            .lock()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// Wall clock in nanoseconds since the Unix epoch (the clock CAS values come from).
pub fn now_unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_is_now_minus_cas_and_never_negative() {
        let s = ReplicationStats::default();
        let f = s.feed("replication:n0->n1:default");
        f.record(10, 1_000_000_000, 1_003_000_000); // 3 ms
        f.record(20, 2_000_000_000, 1_000_000_000); // CAS ahead of the clock: 0
        assert_eq!(f.items.load(Ordering::Relaxed), 2);
        assert_eq!(f.bytes.load(Ordering::Relaxed), 30);
        let h = f.latency();
        assert_eq!(h.len(), 2);
        assert!(h.max() >= 2_990 && h.max() <= 3_010, "{}", h.max());
        assert_eq!(h.min(), 1);
        // The same name is the same feed.
        assert_eq!(
            s.feed("replication:n0->n1:default")
                .items
                .load(Ordering::Relaxed),
            2
        );
        assert_eq!(s.snapshot().len(), 1);
    }
}
