//! Where a replicated write's time goes: a histogram per stage of the way from the active's
//! checkpoint to the replica's memory, each of the time since the write.
//!
//! ```text
//!   write on the active (its CAS: the hybrid clock, ns)
//!     └─► cursor_read  the active's producer read it from its checkpoint cursor (wake-up)
//!          └─► sent     the bytes holding it were handed to the socket
//!               └─► received  the replica's consumer got it off its connection
//!                    └─► applied   the replica's engine holds it (readable there)
//! ```
//!
//! `sent` is taken when the write call returns: the replica may have read the bytes, even
//! applied the change, a moment before, so `sent` is an upper bound of the hand-over and
//! may read above `received` by that moment.
//!
//! Each stage records `now − CAS` when the change passes it, so the stages of one node's
//! producers and of its consumer line up with any other node's on the same clock (one
//! machine, or synchronised clocks). The difference between two stages' percentiles is
//! where the time went. The producer's stages are timed only on connections of the cluster
//! identity (replication and rebalance), never on external DCP clients'.
//!
//! STAT `replication` shows each stage's count and percentiles, and its histogram
//! serialised (HdrHistogram V2, base64) so a reader can merge nodes and subtract snapshots;
//! `/metrics` exports them as `sluice_replication_stage_latency_seconds{stage}`.

use base64::Engine as _;
use hdrhistogram::serialization::{Serializer, V2Serializer};
use hdrhistogram::Histogram;
use parking_lot::Mutex;

/// Largest time recorded exactly (an hour, in µs); anything slower counts as this.
const STAGE_US_MAX: u64 = 3_600_000_000;

/// A stage of a replicated write, in the order a change passes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    CursorRead,
    Sent,
    Received,
    Applied,
}

impl Stage {
    pub const ALL: [Stage; 4] = [
        Stage::CursorRead,
        Stage::Sent,
        Stage::Received,
        Stage::Applied,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Stage::CursorRead => "cursor_read",
            Stage::Sent => "sent",
            Stage::Received => "received",
            Stage::Applied => "applied",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// This node's stage histograms (µs since the write), for every feed and connection.
pub struct StageLatency {
    stages: [Mutex<Histogram<u64>>; 4],
}

impl Default for StageLatency {
    fn default() -> Self {
        let new = || Mutex::new(Histogram::new_with_bounds(1, STAGE_US_MAX, 2).expect("bounds"));
        StageLatency {
            stages: [new(), new(), new(), new()],
        }
    }
}

impl StageLatency {
    /// A change written at `cas_ns` passed `stage` at `now_ns` (a CAS ahead of the clock, a
    /// burst within one tick of the hybrid clock, counts as the smallest time).
    pub fn record(&self, stage: Stage, cas_ns: u64, now_ns: u64) {
        self.record_all(stage, std::iter::once(cas_ns), now_ns);
    }

    /// Records every CAS of `cas_ns` as passing `stage` at `now_ns`, under one lock; none
    /// (a socket write that completed no document) takes no lock.
    pub fn record_all(&self, stage: Stage, cas_ns: impl Iterator<Item = u64>, now_ns: u64) {
        let mut cas_ns = cas_ns.peekable();
        if cas_ns.peek().is_none() {
            return;
        }
        let mut h = self.stages[stage.index()].lock();
        for cas in cas_ns {
            let us = (now_ns.saturating_sub(cas) / 1_000).clamp(1, STAGE_US_MAX);
            h.saturating_record(us);
        }
    }

    /// A copy of `stage`'s histogram (µs).
    pub fn snapshot(&self, stage: Stage) -> Histogram<u64> {
        self.stages[stage.index()].lock().clone()
    }
}

/// `h` as HdrHistogram's V2 encoding in base64, which other HdrHistogram libraries read.
pub fn encode_histogram(h: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    V2Serializer::new()
        .serialize(h, &mut bytes)
        .expect("serialising into memory cannot fail");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::Deserializer;

    #[test]
    fn each_stage_keeps_the_time_since_the_write() {
        let s = StageLatency::default();
        s.record(Stage::CursorRead, 1_000_000_000, 1_000_200_000); // 200 µs
        s.record_all(
            Stage::Sent,
            [1_000_000_000, 2_000_000_000].into_iter(),
            1_001_000_000,
        ); // 1 ms, and a CAS ahead of the clock
           // Two significant digits: a value reads back as any in its bucket.
        let read = s.snapshot(Stage::CursorRead);
        assert_eq!(read.len(), 1);
        assert!(read.equivalent(read.max(), 200), "{}", read.max());
        let sent = s.snapshot(Stage::Sent);
        assert_eq!((sent.len(), sent.min()), (2, 1));
        assert!(sent.equivalent(sent.max(), 1_000), "{}", sent.max());
        assert!(s.snapshot(Stage::Applied).is_empty());
    }

    #[test]
    fn a_histogram_travels_as_base64_v2() {
        let s = StageLatency::default();
        s.record(Stage::Applied, 0, 5_000_000);
        let text = encode_histogram(&s.snapshot(Stage::Applied));
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .unwrap();
        let back: Histogram<u64> = Deserializer::new().deserialize(&mut &bytes[..]).unwrap();
        assert_eq!(back.len(), 1);
        assert!(back.equivalent(back.max(), 5_000), "{}", back.max());
    }
}
