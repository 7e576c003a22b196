//! What one replication step measures, target by target, and the sans-IO arithmetic that turns
//! the 100 ms lag readings into the seeds' figures: items remaining (avg/max) and replication
//! bytes per second over non-overlapping 1 s windows (avg/max/min).

use serde::Serialize;
use std::time::{Duration, Instant};

use crate::load::latency::Latency;

/// How often the monitor reads the lag.
pub const MONITOR_EVERY: Duration = Duration::from_millis(100);
/// The window of the bytes-per-second figures.
pub const RATE_WINDOW: Duration = Duration::from_secs(1);

/// One writer pool's step.
#[derive(Debug, Default)]
pub struct WriteOutcome {
    /// Sets answered with success after the warm-up.
    pub done_measured: u64,
    /// Sets that failed (any time in the step).
    pub errors: u64,
    /// Scheduled sets never sent by the end of the step.
    pub behind: u64,
    /// From each set's scheduled time to its answer, after the warm-up.
    pub latency: Latency,
}

impl WriteOutcome {
    /// One set's answer: `ok` or not, scheduled at `due`, answered at `at`. Only sets due
    /// after the warm-up (`measure_from`) count toward the rate and the latency.
    pub fn account(&mut self, ok: bool, due: Instant, at: Instant, measure_from: Instant) {
        if !ok {
            self.errors += 1;
        } else if due >= measure_from {
            self.done_measured += 1;
            self.latency.record(at - due);
        }
    }

    pub fn merge(&mut self, other: WriteOutcome) {
        self.done_measured += other.done_measured;
        self.errors += other.errors;
        self.behind += other.behind;
        self.latency.merge(&other.latency);
    }
}

/// The replication-latency samples of one step (poll method).
#[derive(Debug, Default)]
pub struct SampleOutcome {
    /// From sending a set to the active/primary to reading the value on the replica.
    pub latency: Latency,
    /// Samples whose value was not visible on the replica within the sample timeout.
    pub timeouts: u64,
    /// Replica reads over all measured samples (the method's resolution is one read).
    pub polls: u64,
    /// Sample sets or reads that failed outright.
    pub errors: u64,
    /// (seconds after the warm-up, latency in ms) of each measured sample, for the charts.
    pub points: Vec<(f64, f64)>,
}

/// One reading of the lag monitor.
#[derive(Debug, Clone, Copy)]
pub struct LagReading {
    /// How far the replicas are behind, in the target's unit (Sluice: changes; Redis:
    /// replication-stream bytes, converted per write afterwards).
    pub behind: f64,
    /// Replication bytes sent so far (a counter).
    pub bytes_total: u64,
    /// The producer's own items-remaining stat, where the target has one (Sluice).
    pub producer_remaining: Option<u64>,
}

#[derive(Debug, Clone, Copy)]
pub struct LagSample {
    pub at: Instant,
    pub reading: LagReading,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LagSummary {
    pub samples: usize,
    pub items_remaining_avg: f64,
    pub items_remaining_max: f64,
    /// Sluice's producer-side `items_remaining` stat (what is not yet read into a stream).
    pub producer_remaining_avg: Option<f64>,
    pub producer_remaining_max: Option<f64>,
    /// Decimal MB per second.
    pub bytes_mb_per_s_avg: f64,
    pub bytes_mb_per_s_max: f64,
    pub bytes_mb_per_s_min: f64,
}

/// The items the replicas are behind at each reading; `units_per_item` converts `behind`
/// to items (anything but a positive figure counts as 1).
pub fn items_behind(samples: &[LagSample], units_per_item: f64) -> impl Iterator<Item = f64> + '_ {
    let per_item = if units_per_item > 0.0 {
        units_per_item
    } else {
        1.0
    };
    samples
        .iter()
        .map(move |s| s.reading.behind.max(0.0) / per_item)
}

/// Summarizes the readings (all taken after the warm-up); `units_per_item` converts
/// `behind` to items.
pub fn summarize_lag(samples: &[LagSample], units_per_item: f64) -> LagSummary {
    if samples.is_empty() {
        return LagSummary::default();
    }
    let items: Vec<f64> = items_behind(samples, units_per_item).collect();
    let producer: Vec<f64> = samples
        .iter()
        .filter_map(|s| s.reading.producer_remaining.map(|v| v as f64))
        .collect();
    let rates = window_rates(samples);
    let avg = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let max = |v: &[f64]| v.iter().copied().fold(f64::MIN, f64::max);
    let min = |v: &[f64]| v.iter().copied().fold(f64::MAX, f64::min);
    let (r_avg, r_max, r_min) = if rates.is_empty() {
        (0.0, 0.0, 0.0)
    } else {
        (avg(&rates), max(&rates), min(&rates))
    };
    LagSummary {
        samples: samples.len(),
        items_remaining_avg: avg(&items),
        items_remaining_max: max(&items),
        producer_remaining_avg: (!producer.is_empty()).then(|| avg(&producer)),
        producer_remaining_max: (!producer.is_empty()).then(|| max(&producer)),
        bytes_mb_per_s_avg: r_avg / 1e6,
        bytes_mb_per_s_max: r_max / 1e6,
        bytes_mb_per_s_min: r_min / 1e6,
    }
}

/// Bytes per second over consecutive, non-overlapping windows of at least [`RATE_WINDOW`].
fn window_rates(samples: &[LagSample]) -> Vec<f64> {
    let mut rates = Vec::new();
    let mut from = 0;
    for (i, s) in samples.iter().enumerate().skip(1) {
        let span = s.at - samples[from].at;
        if span >= RATE_WINDOW {
            let bytes = s
                .reading
                .bytes_total
                .saturating_sub(samples[from].reading.bytes_total);
            rates.push(bytes as f64 / span.as_secs_f64());
            from = i;
        }
    }
    rates
}

/// Poisson-timed instants from `start` to `until`, `hz` a second on average: the sampler's
/// and the durable probes' clock.
pub struct PoissonClock {
    next: Instant,
    until: Instant,
    hz: f64,
    rng: crate::load::workload::Rng,
}

impl PoissonClock {
    pub fn new(start: Instant, until: Instant, hz: f64, seed: u64) -> PoissonClock {
        PoissonClock {
            next: start,
            until,
            hz,
            rng: crate::load::workload::Rng::new(seed),
        }
    }

    /// Sleeps until the next instant; `false` once it would fall past the end.
    pub async fn tick(&mut self) -> bool {
        self.next += poisson_gap(self.hz, self.rng.next_f64());
        if self.next >= self.until {
            return false;
        }
        tokio::time::sleep_until(self.next.into()).await;
        true
    }
}

/// Exponential gap with mean `1/hz` for Poisson-timed samples, from a uniform `u` in [0, 1).
pub fn poisson_gap(hz: f64, u: f64) -> Duration {
    let gap = -(1.0 - u).ln() / hz;
    // Capped so one unlucky draw cannot swallow a whole short step.
    Duration::from_secs_f64(gap.min(10.0 / hz))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t0: Instant, ms: u64, behind: f64, bytes: u64) -> LagSample {
        LagSample {
            at: t0 + Duration::from_millis(ms),
            reading: LagReading {
                behind,
                bytes_total: bytes,
                producer_remaining: None,
            },
        }
    }

    #[test]
    fn items_are_averaged_and_converted_from_bytes() {
        let t0 = Instant::now();
        let s = vec![
            sample(t0, 0, 0.0, 0),
            sample(t0, 100, 2130.0, 0),
            sample(t0, 200, 4260.0, 0),
            sample(t0, 300, -5.0, 0),
        ];
        let sum = summarize_lag(&s, 1065.0);
        assert_eq!(sum.samples, 4);
        assert!((sum.items_remaining_avg - 1.5).abs() < 1e-9, "{sum:?}");
        assert_eq!(sum.items_remaining_max, 4.0);
        assert_eq!(sum.producer_remaining_avg, None);
    }

    #[test]
    fn byte_rates_use_whole_windows_only() {
        let t0 = Instant::now();
        // 10 MB/s for the first second, 20 MB/s for the second, then a 0.5 s tail.
        let s: Vec<LagSample> = (0..=25)
            .map(|i| {
                let ms = i * 100;
                let bytes = if ms <= 1000 {
                    ms * 10_000
                } else {
                    10_000_000 + (ms - 1000) * 20_000
                };
                sample(t0, ms, 0.0, bytes)
            })
            .collect();
        let sum = summarize_lag(&s, 1.0);
        assert!((sum.bytes_mb_per_s_min - 10.0).abs() < 1e-6, "{sum:?}");
        assert!((sum.bytes_mb_per_s_max - 20.0).abs() < 1e-6, "{sum:?}");
        assert!((sum.bytes_mb_per_s_avg - 15.0).abs() < 1e-6, "{sum:?}");
    }

    #[test]
    fn no_readings_give_zeros() {
        assert_eq!(summarize_lag(&[], 1.0), LagSummary::default());
    }

    #[test]
    fn poisson_gaps_have_the_right_mean_and_a_cap() {
        let hz = 100.0;
        let n = 10_000;
        let mean: f64 = (0..n)
            .map(|i| poisson_gap(hz, (i as f64 + 0.5) / n as f64).as_secs_f64())
            .sum::<f64>()
            / n as f64;
        assert!((mean - 0.01).abs() < 0.0005, "{mean}");
        assert_eq!(poisson_gap(hz, 0.999_999_999), Duration::from_millis(100));
        assert_eq!(poisson_gap(hz, 0.0), Duration::ZERO);
    }
}
