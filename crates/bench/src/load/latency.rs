//! Latency recording (hdrhistogram, in nanoseconds) and its summary (in microseconds).

use hdrhistogram::Histogram;
use serde::Serialize;
use std::time::Duration;

/// Longest latency kept apart from the rest; anything slower is recorded as this.
const LATENCY_NS_MAX: u64 = 60_000_000_000;
/// 3 significant digits: 0.1 % error on every percentile.
const SIGNIFICANT_DIGITS: u8 = 3;

#[derive(Debug, Clone)]
pub struct Latency(Histogram<u64>);

impl Latency {
    pub fn new() -> Latency {
        Latency(
            Histogram::new_with_bounds(1, LATENCY_NS_MAX, SIGNIFICANT_DIGITS)
                .expect("static histogram bounds are valid"),
        )
    }

    pub fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1);
        self.0.saturating_record(ns);
    }

    pub fn merge(&mut self, other: &Latency) {
        self.0
            .add(&other.0)
            .expect("histograms with the same bounds merge");
    }

    /// The value at quantile `q` (0.0–1.0) in µs; 0 when empty.
    pub fn quantile_us(&self, q: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        self.0.value_at_quantile(q) as f64 / 1000.0
    }

    pub fn summary(&self) -> LatencySummary {
        let h = &self.0;
        let us = |ns: u64| ns as f64 / 1000.0;
        if h.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: h.len(),
            mean_us: h.mean() / 1000.0,
            min_us: us(h.min()),
            p50_us: us(h.value_at_quantile(0.50)),
            p95_us: us(h.value_at_quantile(0.95)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
        }
    }
}

impl Default for Latency {
    fn default() -> Latency {
        Latency::new()
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_us: f64,
    pub min_us: f64,
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

/// µs below a millisecond, ms above, with 3 significant digits' worth of decimals.
pub fn format_us(us: f64) -> String {
    if us < 1000.0 {
        format!("{us:.0} µs")
    } else if us < 100_000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{:.0} ms", us / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= b * 0.001 + 0.001
    }

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut l = Latency::new();
        for us in 1..=1000u64 {
            l.record(Duration::from_micros(us));
        }
        let s = l.summary();
        assert_eq!(s.count, 1000);
        assert!(close(s.p50_us, 500.0), "{s:?}");
        assert!(close(s.p95_us, 950.0), "{s:?}");
        assert!(close(s.p99_us, 990.0), "{s:?}");
        assert!(close(s.max_us, 1000.0), "{s:?}");
        assert!(close(s.min_us, 1.0), "{s:?}");
        assert!(close(s.mean_us, 500.5), "{s:?}");
    }

    #[test]
    fn merging_keeps_the_tail_of_either_side() {
        let mut fast = Latency::new();
        let mut slow = Latency::new();
        for _ in 0..98 {
            fast.record(Duration::from_micros(100));
        }
        for _ in 0..2 {
            slow.record(Duration::from_millis(50));
        }
        fast.merge(&slow);
        let s = fast.summary();
        assert_eq!(s.count, 100);
        assert!(close(s.p50_us, 100.0) && close(s.p99_us, 50_000.0), "{s:?}");
    }

    #[test]
    fn empty_and_out_of_range_values_do_not_panic() {
        assert_eq!(Latency::new().summary(), LatencySummary::default());
        let mut l = Latency::new();
        l.record(Duration::ZERO);
        l.record(Duration::from_secs(3600));
        let s = l.summary();
        assert_eq!(s.count, 2);
        assert!(
            s.max_us >= 59_000_000.0,
            "clamped to the histogram's top: {s:?}"
        );
    }

    #[test]
    fn formats_in_readable_units() {
        assert_eq!(format_us(312.4), "312 µs");
        assert_eq!(format_us(1534.0), "1.53 ms");
        assert_eq!(format_us(250_000.0), "250 ms");
    }
}
