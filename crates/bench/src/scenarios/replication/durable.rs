//! Durable writes beside the load (issue 27: keep their latency in view). During each step a
//! probe per durability level sends one durable set at a time, Poisson-timed, to keys of its
//! own, and records how long each took to be answered: on Sluice `majority` (held in memory
//! by a majority of the vbucket's copies) and, on a couchbase bucket, `persistToMajority`
//! (persisted by a majority); on Redis a SET followed by `WAIT 1 1000`, which answers once
//! the replica acknowledged the write (Redis's closest to `majority`; it has nothing like
//! `persistToMajority` without AOF on the replica). A probe's writes are a few hundred a
//! second at most, so the load's rate is what the step says.

use bytes::Bytes;
use serde::Serialize;
use std::time::{Duration, Instant};

use crate::load::latency::{format_us, Latency};
use crate::scenarios::replication::measure::PoissonClock;
use crate::scenarios::replication::step::WritePlan;
use crate::scenarios::replication::target::{Target, TargetError};

/// The server's time limit for one durable write; past it the write counts as failed.
pub const DURABLE_TIMEOUT: Duration = Duration::from_secs(2);

/// What a probe asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum DurableLevel {
    /// Sluice `majority`; Redis SET + `WAIT 1`.
    Majority,
    /// Sluice `persistToMajority` (couchbase buckets only).
    PersistToMajority,
}

impl DurableLevel {
    pub fn name(self) -> &'static str {
        match self {
            DurableLevel::Majority => "majority",
            DurableLevel::PersistToMajority => "persistToMajority",
        }
    }
}

/// One probe's figures over the measured part of a step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DurableLatency {
    pub level: DurableLevel,
    pub writes: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// Writes refused, timed out or answered ambiguous.
    pub failed: u64,
}

/// Runs one probe of `level` over the step of `plan`, `hz` writes a second on average.
pub async fn probe(
    target: std::sync::Arc<Target>,
    plan: WritePlan,
    level: DurableLevel,
    hz: f64,
    tag: String,
    seed: u64,
) -> Result<DurableLatency, TargetError> {
    let mut latency = Latency::new();
    let (mut writes, mut failed) = (0u64, 0u64);
    // The load's documents, other field values: the probe's writes are indexed like the
    // load's.
    let docs = plan.docs.salted(plan.docs.salt ^ seed.rotate_left(17));
    let mut clock = PoissonClock::new(plan.start, plan.until, hz, seed);
    let mut n = 0u64;
    while clock.tick().await {
        n += 1;
        let key = Bytes::from(format!("{tag}:{}:{n}", level.name()));
        let sent = Instant::now();
        let ok = target.durable_set(key, docs.doc(n), level).await?;
        if sent < plan.measure_from {
            continue;
        }
        writes += 1;
        if ok {
            latency.record(sent.elapsed());
        } else {
            failed += 1;
        }
    }
    Ok(DurableLatency {
        level,
        writes,
        p50_us: latency.quantile_us(0.50),
        p99_us: latency.quantile_us(0.99),
        failed,
    })
}

/// Each level's medians over the runs of one (target, rate): p50 and p99 are medians of the
/// runs' figures, the counts are sums.
pub fn median_over_runs(runs: &[&[DurableLatency]]) -> Vec<DurableLatency> {
    let mut levels: Vec<DurableLevel> = runs
        .iter()
        .flat_map(|r| r.iter().map(|d| d.level))
        .collect();
    levels.sort_by_key(|l| l.name());
    levels.dedup();
    levels
        .into_iter()
        .map(|level| {
            let of: Vec<&DurableLatency> = runs
                .iter()
                .flat_map(|r| r.iter().filter(|d| d.level == level))
                .collect();
            let m = |f: fn(&DurableLatency) -> f64| {
                crate::report::median(&of.iter().map(|d| f(d)).collect::<Vec<_>>())
            };
            DurableLatency {
                level,
                writes: of.iter().map(|d| d.writes).sum(),
                p50_us: m(|d| d.p50_us),
                p99_us: m(|d| d.p99_us),
                failed: of.iter().map(|d| d.failed).sum(),
            }
        })
        .collect()
}

/// A report cell: each level's p50 / p99, and failures if any (`—` without probes).
pub fn cell(levels: &[DurableLatency]) -> String {
    if levels.is_empty() {
        return "—".to_string();
    }
    levels
        .iter()
        .map(|d| {
            let failed = match d.failed {
                0 => String::new(),
                n => format!(" ({n} failed)"),
            };
            format!(
                "{} {} / {}{failed}",
                d.level.name(),
                format_us(d.p50_us),
                format_us(d.p99_us)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(level: DurableLevel, p50_us: f64, p99_us: f64, failed: u64) -> DurableLatency {
        DurableLatency {
            level,
            writes: 100,
            p50_us,
            p99_us,
            failed,
        }
    }

    #[test]
    fn medians_per_level_over_runs_and_the_cell() {
        use DurableLevel::{Majority as M, PersistToMajority as P};
        let runs = [
            vec![d(M, 500.0, 2000.0, 0), d(P, 4000.0, 9000.0, 1)],
            vec![d(M, 700.0, 3000.0, 0), d(P, 5000.0, 7000.0, 0)],
            vec![d(M, 600.0, 2500.0, 0), d(P, 4500.0, 8000.0, 0)],
        ];
        let refs: Vec<&[DurableLatency]> = runs.iter().map(Vec::as_slice).collect();
        let m = median_over_runs(&refs);
        assert_eq!(
            m,
            vec![d(M, 600.0, 2500.0, 0), d(P, 4500.0, 8000.0, 1)]
                .into_iter()
                .map(|x| DurableLatency { writes: 300, ..x })
                .collect::<Vec<_>>()
        );
        assert_eq!(
            cell(&m),
            "majority 600 µs / 2.50 ms; persistToMajority 4.50 ms / 8.00 ms (1 failed)"
        );
        assert_eq!(cell(&[]), "—");
    }
}
