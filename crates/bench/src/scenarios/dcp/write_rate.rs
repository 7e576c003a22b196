//! The node's write throughput on the same server and documents: a closed-loop, set-only
//! run of the KV load (`measure`), one set in flight per connection, over the loaded keys.

use serde::Serialize;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use crate::error::BenchError;
use crate::harness::memory_stats::MemoryStats;
use crate::harness::proc_stats::{CpuSplit, PhaseCpu};
use crate::load::measure::{self, RunResult, RunSpec};
use crate::report::progress::{Length, Ticker};
use crate::scenarios::dcp::args::DcpArgs;
use crate::scenarios::dcp::bucket_setup::LoadedBucket;
use crate::scenarios::dcp::drain::MB;

#[derive(Debug, Clone, Serialize)]
pub struct WriteRun {
    pub load: RunResult,
    pub sets_per_s: f64,
    /// Key + value bytes written per second.
    pub mb_per_s: f64,
    pub cpu: CpuSplit,
    pub memory_after: MemoryStats,
}

pub async fn write_once(
    bucket: &mut LoadedBucket,
    args: &DcpArgs,
    run: u32,
) -> Result<WriteRun, BenchError> {
    let spec = RunSpec {
        pipeline: 1,
        rate_ops_per_s: None,
        warmup: Duration::from_secs(args.write_warmup_s),
        duration: Duration::from_secs(args.write_duration_s),
    };
    let completed = Arc::new(AtomicU64::new(0));
    let ticker = Ticker::start(
        format!(
            "{} writes {}/{}",
            bucket.shape.setup.as_str(),
            run + 1,
            args.runs
        ),
        Length::Time(spec.warmup + spec.duration),
        completed.clone(),
    );
    let phase = PhaseCpu::start(bucket.pid)?;
    let clients = std::mem::take(&mut bucket.clients);
    let outcome = measure::run(
        clients,
        bucket.work.clone(),
        spec,
        u64::from(run),
        completed,
    )
    .await;
    let cpu = phase.split()?;
    ticker.finish();
    let (clients, load) = outcome?;
    bucket.clients = clients;
    let memory_after = MemoryStats::read(&mut bucket.admin).await?;
    let sets_per_s = load.sets as f64 / load.measured_s;
    Ok(WriteRun {
        sets_per_s,
        mb_per_s: sets_per_s * bucket.shape.doc_bytes() as f64 / MB,
        load,
        cpu,
        memory_after,
    })
}
