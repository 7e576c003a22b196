//! The open-loop schedule. The whole run has one global schedule — slot `s` is due at
//! `start + s / rate` — dealt round-robin over the connections: connection `i` of `n` owns slots
//! `i, i + n, i + 2n, …`. Due times are computed from the slot number, never by adding
//! intervals, so rounding cannot drift and a late sender catches up instead of shifting the
//! schedule. Sans-IO: the caller passes `now`.

use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Pacer {
    start: Instant,
    rate_per_s: f64,
    /// Number of connections sharing the schedule.
    stride: u64,
    /// This connection's first slot.
    first: u64,
    /// This connection's next untaken request (its k-th slot).
    next: u64,
}

impl Pacer {
    /// `rate_per_s` is the total rate over all `stride` connections.
    pub fn new(start: Instant, rate_per_s: f64, stride: u64, first: u64) -> Pacer {
        assert!(
            rate_per_s > 0.0 && rate_per_s.is_finite(),
            "a positive rate"
        );
        assert!(
            first < stride,
            "the first slot belongs to one of the connections"
        );
        Pacer {
            start,
            rate_per_s,
            stride,
            first,
            next: 0,
        }
    }

    /// When this connection's `k`-th request is due.
    pub fn due(&self, k: u64) -> Instant {
        let slot = self.first + k * self.stride;
        self.start + Duration::from_secs_f64(slot as f64 / self.rate_per_s)
    }

    pub fn next_due(&self) -> Instant {
        self.due(self.next)
    }

    /// Takes the next request if it is due at `now`, returning its scheduled time (the
    /// instant its latency is measured from).
    pub fn take_due(&mut self, now: Instant) -> Option<Instant> {
        let due = self.next_due();
        if due <= now {
            self.next += 1;
            Some(due)
        } else {
            None
        }
    }

    /// Requests due strictly before `until` that were not taken: how far behind schedule the
    /// connection ended.
    pub fn behind(&self, until: Instant) -> u64 {
        let elapsed_slots =
            until.saturating_duration_since(self.start).as_secs_f64() * self.rate_per_s;
        let mine = elapsed_slots - self.first as f64;
        if mine <= 0.0 {
            return 0;
        }
        let due_before = (mine / self.stride as f64).ceil() as u64;
        due_before.saturating_sub(self.next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn slots_are_exact_multiples_of_the_interval() {
        let t0 = Instant::now();
        let p = Pacer::new(t0, 1000.0, 1, 0);
        assert_eq!(p.due(0), t0);
        assert_eq!(p.due(1), t0 + MS);
        assert_eq!(p.due(1000), t0 + Duration::from_secs(1));
    }

    #[test]
    fn no_drift_with_intervals_that_do_not_divide_a_second() {
        let t0 = Instant::now();
        let p = Pacer::new(t0, 3.0, 1, 0); // 333,333,333.3 ns apart
        assert_eq!(p.due(3), t0 + Duration::from_secs(1));
        let late = p.due(3_000_000) - t0;
        assert!(late.abs_diff(Duration::from_secs(1_000_000)) < Duration::from_micros(1));
    }

    #[test]
    fn connections_interleave_on_one_global_schedule() {
        let t0 = Instant::now();
        // 4 connections at 4000/s total: each sends every 1 ms, offset by 0.25 ms.
        let pacers: Vec<Pacer> = (0..4).map(|i| Pacer::new(t0, 4000.0, 4, i)).collect();
        let mut all: Vec<Instant> = pacers
            .iter()
            .flat_map(|p| (0..10).map(|k| p.due(k)))
            .collect();
        all.sort();
        for (s, due) in all.iter().enumerate() {
            assert_eq!(*due, t0 + Duration::from_micros(250 * s as u64));
        }
    }

    #[test]
    fn take_due_hands_out_each_slot_once_and_catches_up() {
        let t0 = Instant::now();
        let mut p = Pacer::new(t0, 1000.0, 1, 0);
        assert_eq!(p.take_due(t0), Some(t0));
        assert_eq!(p.take_due(t0), None, "slot 1 is due at 1 ms");
        // The sender wakes 3.5 ms late: slots 1, 2 and 3 are due at once, keeping their times.
        let now = t0 + Duration::from_micros(3500);
        let burst: Vec<Instant> = std::iter::from_fn(|| p.take_due(now)).collect();
        assert_eq!(burst, vec![t0 + MS, t0 + 2 * MS, t0 + 3 * MS]);
        assert_eq!(p.next_due(), t0 + 4 * MS);
    }

    #[test]
    fn behind_counts_due_slots_not_taken() {
        let t0 = Instant::now();
        let mut p = Pacer::new(t0, 1000.0, 2, 1); // slots 1, 3, 5 … → 1 ms, 3 ms, 5 ms …
        assert_eq!(p.behind(t0), 0);
        assert_eq!(p.behind(t0 + MS), 0, "due strictly before");
        assert_eq!(p.behind(t0 + 6 * MS), 3, "1, 3 and 5 ms");
        p.take_due(t0 + 6 * MS);
        assert_eq!(p.behind(t0 + 6 * MS), 2);
        while p.take_due(t0 + 6 * MS).is_some() {}
        assert_eq!(p.behind(t0 + 6 * MS), 0);
    }
}
