//! One timed run: every connection drives the same window; their tallies are merged.

use serde::Serialize;
use sluice_client::Client;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

use crate::error::BenchError;
use crate::load::drive::{drive, Tally, Window};
use crate::load::latency::LatencySummary;
use crate::load::pacer::Pacer;
use crate::load::stop::Stop;
use crate::load::workload::{Rng, Workload};

/// Gives every task time to be scheduled before the first send, so connection 0 does not
/// start ahead of connection 49.
const START_DELAY: Duration = Duration::from_millis(50);

#[derive(Debug, Clone, Copy)]
pub struct RunSpec {
    pub pipeline: usize,
    /// Total ops/s for the open loop; `None` = closed loop.
    pub rate_ops_per_s: Option<f64>,
    pub warmup: Duration,
    pub duration: Duration,
}

/// The measured part of one run, over all connections.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunResult {
    pub ops: u64,
    pub ops_per_s: f64,
    /// Length of the measured part: the run's duration, or less if it was stopped early.
    pub measured_s: f64,
    pub gets: u64,
    pub sets: u64,
    pub get_misses: u64,
    /// Temporary failures (ETMPFAIL), each followed by a back-off; not in `ops`.
    pub refused: u64,
    pub errors: u64,
    pub behind_schedule: u64,
    /// From the scheduled send (open loop) or the actual send (closed loop).
    pub latency: LatencySummary,
    /// From the actual send.
    pub service_latency: LatencySummary,
}

/// Runs `spec` on `clients` (one task each) and gives the clients back for the next run.
/// `seed` makes each run's key sequence differ while staying reproducible.
pub async fn run(
    clients: Vec<Client>,
    work: Arc<Workload>,
    spec: RunSpec,
    seed: u64,
    completed: Arc<AtomicU64>,
) -> Result<(Vec<Client>, RunResult), BenchError> {
    run_until(clients, work, spec, seed, completed, Stop::new()).await
}

/// [`run`], ending early once `stop` is signalled (the rate then counts the shorter
/// measured part).
pub async fn run_until(
    clients: Vec<Client>,
    work: Arc<Workload>,
    spec: RunSpec,
    seed: u64,
    completed: Arc<AtomicU64>,
    stop: Stop,
) -> Result<(Vec<Client>, RunResult), BenchError> {
    let start = Instant::now() + START_DELAY;
    let window = Window {
        measure_from: start + spec.warmup,
        end: start + spec.warmup + spec.duration,
        stop,
    };
    let n = clients.len() as u64;
    let mut tasks = JoinSet::new();
    for (i, mut client) in clients.into_iter().enumerate() {
        let i = i as u64;
        let work = work.clone();
        let completed = completed.clone();
        let pacer = spec.rate_ops_per_s.map(|r| Pacer::new(start, r, n, i));
        let rng = Rng::new(seed.wrapping_mul(1_000_003).wrapping_add(i));
        let window = window.clone();
        tasks.spawn(async move {
            tokio::time::sleep_until(start.into()).await;
            let tally = drive(
                &mut client,
                &work,
                window,
                spec.pipeline,
                pacer,
                rng,
                &completed,
            )
            .await?;
            Ok::<_, BenchError>((client, tally))
        });
    }
    let mut clients = Vec::with_capacity(n as usize);
    let mut total = Tally::default();
    while let Some(joined) = tasks.join_next().await {
        let (client, tally) = joined.map_err(|e| BenchError::Io(std::io::Error::other(e)))??;
        total.merge(&tally);
        clients.push(client);
    }
    let measured = window
        .end_now()
        .saturating_duration_since(window.measure_from)
        .as_secs_f64();
    let result = RunResult {
        ops: total.ops,
        ops_per_s: if measured > 0.0 {
            total.ops as f64 / measured
        } else {
            0.0
        },
        measured_s: measured,
        gets: total.gets,
        sets: total.sets,
        get_misses: total.get_misses,
        refused: total.refused,
        errors: total.errors,
        behind_schedule: total.behind_schedule,
        latency: total.latency.summary(),
        service_latency: total.service.summary(),
    };
    Ok((clients, result))
}
