//! One catch-up run: `--consumers` consumers, each on its own connection, all started at
//! once from seqno 0 on the settled bucket, each stopping at the high seqnos read just
//! before the start. The server's RSS is sampled every 100 ms. With `--write-rate`, an
//! open-loop set load (the KV load's pacer) runs from the start until the last consumer is
//! done.

use serde::Serialize;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

use crate::error::BenchError;
use crate::harness::proc_stats::{CpuSplit, PhaseCpu};
use crate::harness::rss_sampler::{RssSampler, RssSummary};
use crate::load::measure::{self, RunResult, RunSpec};
use crate::load::stop::Stop;
use crate::report::median;
use crate::report::progress::{Length, Ticker};
use crate::scenarios::dcp::args::DcpArgs;
use crate::scenarios::dcp::bucket_setup::{LoadedBucket, Settled};
use crate::scenarios::dcp::consumer::{consume, ConsumerResult};
use crate::scenarios::dcp::drain::MB;

/// The write load's window if it is never stopped: a bound, so the loop always ends.
const WRITE_LOAD_MAX: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, Serialize)]
pub struct CatchUpRun {
    pub settled: Settled,
    pub target_seqnos: u64,
    /// From the common start to the last consumer's last StreamEnd.
    pub total_s: f64,
    /// Each consumer's time from the common start (connect included) to its last StreamEnd.
    pub consumer_min_s: f64,
    pub consumer_median_s: f64,
    pub consumer_max_s: f64,
    pub items: u64,
    /// Consumers that were caught up without having received every document, and the
    /// documents they missed in all (zero in a healthy run).
    pub consumers_missing_documents: u64,
    pub missed_documents: u64,
    /// Items over all consumers ÷ `total_s`.
    pub aggregate_items_per_s: f64,
    pub aggregate_payload_mb_per_s: f64,
    pub rss: RssSummary,
    pub cpu: CpuSplit,
    /// The open-loop write load, when `--write-rate` was given.
    pub writes: Option<RunResult>,
    pub consumers: Vec<ConsumerResult>,
}

pub async fn catch_up_once(
    bucket: &mut LoadedBucket,
    args: &DcpArgs,
    run: u32,
) -> Result<CatchUpRun, BenchError> {
    let (settled, spec) = bucket.prepare_streams(args).await?;
    let targets = spec.targets.clone();
    let completed = Arc::new(AtomicU64::new(0));
    let ticker = Ticker::start(
        format!("catch-up {}/{}", run + 1, args.runs),
        Length::Ops(targets.total_seqnos() * u64::from(args.consumers)),
        completed.clone(),
    );
    let rss = RssSampler::start(bucket.pid)?;
    let phase = PhaseCpu::start(bucket.pid)?;
    let stop = Stop::new();
    let writes = (args.write_rate_ops_per_s > 0.0).then(|| {
        let spec = RunSpec {
            pipeline: 1,
            rate_ops_per_s: Some(args.write_rate_ops_per_s),
            warmup: Duration::ZERO,
            duration: WRITE_LOAD_MAX,
        };
        let (clients, work) = (std::mem::take(&mut bucket.clients), bucket.work.clone());
        let (seed, stop) = (1000 + u64::from(run), stop.clone());
        let progress = Arc::new(AtomicU64::new(0));
        tokio::spawn(measure::run_until(
            clients, work, spec, seed, progress, stop,
        ))
    });
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for _ in 0..args.consumers {
        let (spec, completed) = (spec.clone(), completed.clone());
        tasks.spawn(async move { consume(&spec, start, &completed).await });
    }
    let mut consumers = Vec::with_capacity(args.consumers as usize);
    let mut failure = None;
    while let Some(joined) = tasks.join_next().await {
        match joined.map_err(|e| BenchError::Io(std::io::Error::other(e))) {
            Ok(Ok(c)) => consumers.push(c),
            Ok(Err(e)) | Err(e) => {
                failure.get_or_insert(e);
                tasks.abort_all();
            }
        }
    }
    let total_s = start.elapsed().as_secs_f64();
    stop.now();
    let cpu = phase.split()?;
    let rss = rss.finish(bucket.pid);
    ticker.finish();
    let writes = match writes {
        Some(task) => {
            let (clients, result) = task
                .await
                .map_err(|e| BenchError::Io(std::io::Error::other(e)))??;
            bucket.clients = clients;
            Some(result)
        }
        None => None,
    };
    if let Some(e) = failure {
        return Err(e);
    }
    let times: Vec<f64> = consumers.iter().map(|c| c.done_s).collect();
    let items: u64 = consumers.iter().map(ConsumerResult::items).sum();
    let payload: u64 = consumers.iter().map(|c| c.payload_bytes).sum();
    Ok(CatchUpRun {
        settled,
        target_seqnos: targets.total_seqnos(),
        total_s,
        consumer_min_s: times.iter().copied().fold(f64::INFINITY, f64::min),
        consumer_median_s: median(&times),
        consumer_max_s: times.iter().copied().fold(0.0, f64::max),
        items,
        consumers_missing_documents: consumers.iter().filter(|c| c.missed_documents > 0).count()
            as u64,
        missed_documents: consumers.iter().map(|c| c.missed_documents).sum(),
        aggregate_items_per_s: items as f64 / total_s,
        aggregate_payload_mb_per_s: payload as f64 / MB / total_s,
        rss,
        cpu,
        writes,
        consumers,
    })
}
