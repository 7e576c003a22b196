//! One step of `bench replication`: a fixed set rate held for the step's length, with three
//! things running side by side on the target:
//! - the writers (open loop: each set is due at its slot of one global schedule, and its
//!   latency counts from there);
//! - the sampler (poll method: a set sent to the active/primary, then the replica read in a
//!   loop until it serves the value; latency = visible − sent);
//! - the monitor (lag and replication bytes every 100 ms).
//!
//! Everything before `measure_from` (the warm-up) is left out of the figures.

use bytes::Bytes;
use serde::Serialize;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

use crate::load::latency::LatencySummary;
use crate::scenarios::replication::durable::{self, DurableLatency, DurableLevel};
use crate::scenarios::replication::indexes::IndexBacklog;
use crate::scenarios::replication::measure::{
    items_behind, summarize_lag, LagSample, LagSummary, PoissonClock, SampleOutcome, WriteOutcome,
    MONITOR_EVERY,
};
use crate::scenarios::replication::stages::{StageError, StageTiming};
use crate::scenarios::replication::target::{Target, TargetError};
use crate::scenarios::replication::values::Docs;
use crate::scenarios::replication::xdcr::XdcrWindow;

/// Why a step did not finish.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error(transparent)]
    Target(#[from] TargetError),
    /// A writer, the sampler, the monitor, a durable probe or the stage snapshot task.
    #[error(transparent)]
    Task(#[from] tokio::task::JoinError),
    /// The stage histograms of the step's start and end do not subtract.
    #[error(transparent)]
    Stages(#[from] StageError),
}

/// A sample not visible on the replica by then counts as a timeout.
const SAMPLE_TIMEOUT: Duration = Duration::from_secs(2);
/// A step whose writers reached less than this share of the rate did not sustain it.
const SUSTAINED_SHARE: f64 = 0.95;

#[derive(Debug, Clone)]
pub struct WritePlan {
    pub start: Instant,
    pub measure_from: Instant,
    pub until: Instant,
    /// Total sets per second over all writers.
    pub rate: f64,
    pub writers: u64,
    pub in_flight_max: usize,
    pub items: u64,
    /// The documents of this step's writes (JSON of the value size; the salt is the step's).
    pub docs: Docs,
    /// Sets answered with success so far (for the progress bar).
    pub done: Arc<AtomicU64>,
}

/// Steps started by this process, to number their sample keys.
static STEPS_STARTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// What the step is asked to do, beyond the rate.
#[derive(Debug, Clone)]
pub struct StepConfig {
    pub length: Duration,
    pub warmup: Duration,
    pub writers: u32,
    pub in_flight_max: u32,
    pub items: u64,
    /// The documents written (their size; each step salts them its own way).
    pub docs: Docs,
    pub sample_hz: f64,
    /// Starts every sample key, and differs from one invocation to the next: a sample
    /// written again with the value of an earlier invocation is on the replica before it
    /// is even sent, and would measure one read instead of the replication.
    pub sample_key_prefix: String,
    /// Snapshot the nodes' stage histograms at the warm-up's end and the step's end.
    pub breakdown: bool,
    /// Durable writes per second of each level's probe (0: none).
    pub durable_hz: f64,
    /// The bucket persists (so `persistToMajority` is probed too).
    pub persistent_bucket: bool,
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ReplLatency {
    pub samples: u64,
    pub p50_us: f64,
    pub p80_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    pub timeouts: u64,
    pub errors: u64,
    /// Replica reads per sample: how many round trips the value took to appear.
    pub polls_per_sample: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct StepResult {
    pub target: String,
    pub run: u32,
    pub rate: f64,
    pub achieved_per_s: f64,
    pub set_errors: u64,
    /// Scheduled sets never sent (the writers fell behind).
    pub sets_behind: u64,
    pub sustained: bool,
    pub set_latency: LatencySummary,
    pub repl_latency: ReplLatency,
    pub lag: LagSummary,
    /// Redis: replication-stream bytes per SET, measured over the step.
    pub stream_bytes_per_set: Option<f64>,
    /// Sluice: the lowest active resident ratio over the nodes at the step's end, in %.
    pub resident_pct: Option<u64>,
    /// Sluice with `--breakdown`: each stage of the measured part of the step.
    pub stages: Option<Vec<StageTiming>>,
    /// The durable probes, one per level the target offers (empty with `--durable-hz 0`).
    pub durable: Vec<DurableLatency>,
    /// A views column: its indexes' items remaining over the measured part.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index_backlog: Option<IndexBacklog>,
    /// An XDCR column: the replication to the second cluster over the measured part.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xdcr: Option<XdcrWindow>,
    /// The step over time, for the charts (not in results.json: the figures above are).
    #[serde(skip)]
    pub timeline: Timeline,
}

/// A step's samples over time, in seconds after the warm-up.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    /// (s, replication latency in ms), one point per sample.
    pub latency_ms: Vec<(f64, f64)>,
    /// (s, items remaining), one point per lag reading.
    pub items_remaining: Vec<(f64, f64)>,
}

pub async fn run_step(
    target: Arc<Target>,
    label: &str,
    run: u32,
    rate: f64,
    cfg: &StepConfig,
    done: Arc<AtomicU64>,
) -> Result<StepResult, StepError> {
    let before = redis_offsets(&target).await?;
    // Steps repeat rates (a ladder may list one twice, and every run has the same ones):
    // each step of the invocation gets its own keys and its own documents.
    let step_no = STEPS_STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let start = Instant::now() + Duration::from_millis(20);
    let plan = WritePlan {
        start,
        measure_from: start + cfg.warmup,
        until: start + cfg.length,
        rate,
        writers: u64::from(cfg.writers),
        in_flight_max: cfg.in_flight_max as usize,
        items: cfg.items,
        docs: cfg.docs.salted(cfg.docs.salt ^ (step_no + 1)),
        done,
    };
    let mut writers = JoinSet::new();
    for i in 0..plan.writers {
        let (t, p) = (target.clone(), plan.clone());
        writers.spawn(async move { t.write(p, i).await });
    }
    let seed = run as u64 * 1_000_003 + rate as u64;
    let tag = format!("{}:{label}:{run}:{rate}:{step_no}", cfg.sample_key_prefix);
    let sampler = tokio::spawn(sample(
        target.clone(),
        plan.clone(),
        cfg.sample_hz,
        tag,
        seed,
    ));
    let monitor = tokio::spawn(monitor(target.clone(), plan.clone()));
    let mut durable_probes = JoinSet::new();
    if cfg.durable_hz > 0.0 {
        for (i, level) in durable_levels(&target, cfg).into_iter().enumerate() {
            let (t, p) = (target.clone(), plan.clone());
            let tag = format!(
                "{}:durable:{label}:{run}:{rate}:{step_no}",
                cfg.sample_key_prefix
            );
            let seed = seed ^ (0x9e37_79b9 + i as u64);
            durable_probes.spawn(durable::probe(t, p, level, cfg.durable_hz, tag, seed));
        }
    }
    let stages_from = cfg.breakdown.then(|| {
        let (t, at) = (target.clone(), plan.measure_from);
        tokio::spawn(async move {
            tokio::time::sleep_until(at.into()).await;
            t.stage_snapshot().await
        })
    });

    let mut writes = WriteOutcome::default();
    while let Some(w) = writers.join_next().await {
        writes.merge(w??);
    }
    let mut samples = sampler.await??;
    let mut durable = Vec::new();
    while let Some(d) = durable_probes.join_next().await {
        durable.push(d??);
    }
    durable.sort_by_key(|d| d.level.name());
    let lag_samples = monitor.await??;
    let stages = match stages_from {
        Some(from) => {
            let from = from.await??;
            let to = target.stage_snapshot().await?;
            match (to, from) {
                (Some(to), Some(from)) => Some(to.since(&from)?),
                _ => None,
            }
        }
        None => None,
    };
    let after = redis_offsets(&target).await?;

    let per_set = match (before, after) {
        (Some((o1, s1)), Some((o2, s2))) if s2 > s1 => Some((o2 - o1) as f64 / (s2 - s1) as f64),
        _ => None,
    };
    let measured = (plan.until - plan.measure_from).as_secs_f64();
    let achieved = writes.done_measured as f64 / measured;
    let polls = samples.polls as f64 / samples.latency.summary().count.max(1) as f64;
    let units_per_item = per_set.unwrap_or(1.0);
    let timeline = Timeline {
        latency_ms: std::mem::take(&mut samples.points),
        items_remaining: lag_samples
            .iter()
            .map(|l| {
                l.at.saturating_duration_since(plan.measure_from)
                    .as_secs_f64()
            })
            .zip(items_behind(&lag_samples, units_per_item))
            .collect(),
    };
    let resident_pct = target.resident_pct().await?;
    Ok(StepResult {
        target: label.to_string(),
        run,
        rate,
        achieved_per_s: achieved,
        set_errors: writes.errors,
        sets_behind: writes.behind,
        sustained: writes.errors == 0 && achieved >= SUSTAINED_SHARE * rate,
        set_latency: writes.latency.summary(),
        repl_latency: ReplLatency {
            samples: samples.latency.summary().count,
            p50_us: samples.latency.quantile_us(0.50),
            p80_us: samples.latency.quantile_us(0.80),
            p95_us: samples.latency.quantile_us(0.95),
            p99_us: samples.latency.quantile_us(0.99),
            max_us: samples.latency.quantile_us(1.0),
            timeouts: samples.timeouts,
            errors: samples.errors,
            polls_per_sample: polls,
        },
        lag: summarize_lag(&lag_samples, units_per_item),
        stream_bytes_per_set: per_set,
        resident_pct,
        stages,
        durable,
        index_backlog: None,
        xdcr: None,
        timeline,
    })
}

/// The durability levels a target is probed at: Redis has only its `WAIT`; an ephemeral
/// bucket cannot persist.
fn durable_levels(target: &Target, cfg: &StepConfig) -> Vec<DurableLevel> {
    match target {
        Target::Sluice(_) if cfg.persistent_bucket => {
            vec![DurableLevel::Majority, DurableLevel::PersistToMajority]
        }
        Target::Sluice(_) | Target::Redis(_) => vec![DurableLevel::Majority],
    }
}

async fn redis_offsets(target: &Target) -> Result<Option<(u64, u64)>, TargetError> {
    match target {
        Target::Redis(r) => Ok(Some(r.offset_and_sets().await?)),
        Target::Sluice(_) => Ok(None),
    }
}

async fn sample(
    target: Arc<Target>,
    plan: WritePlan,
    hz: f64,
    tag: String,
    seed: u64,
) -> Result<SampleOutcome, TargetError> {
    let mut out = SampleOutcome::default();
    let errors_before = target.sample_errors();
    let mut clock = PoissonClock::new(plan.start, plan.until, hz, seed);
    for n in 0u64.. {
        if !clock.tick().await {
            break;
        }
        let key = Bytes::from(format!("{tag}:{n}"));
        // Its number first: every sample's value differs.
        let value = plan.docs.sample(n);
        let sent = Instant::now();
        if target
            .send_sample(key.clone(), value.clone())
            .await
            .is_err()
        {
            out.errors += 1;
            continue;
        }
        let mut polls = 0;
        loop {
            polls += 1;
            match target.visible(&key, &value).await {
                Ok(true) => {
                    if sent >= plan.measure_from {
                        let took = sent.elapsed();
                        out.latency.record(took);
                        out.polls += polls;
                        let at = (sent - plan.measure_from).as_secs_f64();
                        out.points.push((at, took.as_secs_f64() * 1e3));
                    }
                    break;
                }
                Ok(false) if sent.elapsed() < SAMPLE_TIMEOUT => {}
                Ok(false) => {
                    out.timeouts += 1;
                    break;
                }
                Err(_) => {
                    out.errors += 1;
                    break;
                }
            }
        }
    }
    out.errors += target.sample_errors() - errors_before;
    Ok(out)
}

async fn monitor(target: Arc<Target>, plan: WritePlan) -> Result<Vec<LagSample>, TargetError> {
    let mut out = Vec::new();
    let mut tick = tokio::time::interval_at(plan.measure_from.into(), MONITOR_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let asked = Instant::now();
        if asked >= plan.until {
            return Ok(out);
        }
        let reading = target.probe().await?;
        // The reading is placed midway through the round trip that took it.
        let at = asked + (Instant::now() - asked) / 2;
        out.push(LagSample { at, reading });
    }
}
