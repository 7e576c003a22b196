//! One timed drain: a single consumer streams the settled bucket from seqno 0 to the high
//! seqnos it had when the run started, while the server's and the bench's CPU are metered.

use serde::Serialize;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use crate::error::BenchError;
use crate::harness::proc_stats::{CpuSplit, PhaseCpu};
use crate::report::progress::{Length, Ticker};
use crate::scenarios::dcp::args::DcpArgs;
use crate::scenarios::dcp::bucket_setup::{LoadedBucket, Settled};
use crate::scenarios::dcp::consumer::{consume, ConsumerResult};

/// Decimal megabytes, as the peer baselines report MB/s.
pub const MB: f64 = 1e6;

#[derive(Debug, Clone, Serialize)]
pub struct DrainRun {
    pub settled: Settled,
    /// Seqnos the stream covers (sum of the vbuckets' high seqnos).
    pub target_seqnos: u64,
    pub consumer: ConsumerResult,
    pub items_per_s: f64,
    /// Key + value bytes.
    pub payload_mb_per_s: f64,
    pub wire_mb_per_s: f64,
    /// Cores the server, the bench (the consumer's decoding) and the rest of the box used
    /// during the drain (1.0 = one core all the time).
    pub cpu: CpuSplit,
}

pub async fn drain_once(
    bucket: &mut LoadedBucket,
    args: &DcpArgs,
    run: u32,
) -> Result<DrainRun, BenchError> {
    let (settled, spec) = bucket.prepare_streams(args).await?;
    let targets = spec.targets.clone();
    let completed = Arc::new(AtomicU64::new(0));
    let ticker = Ticker::start(
        format!(
            "{} drain {}/{}",
            bucket.shape.setup.as_str(),
            run + 1,
            args.runs
        ),
        Length::Ops(targets.total_seqnos()),
        completed.clone(),
    );
    let phase = PhaseCpu::start(bucket.pid)?;
    let outcome = consume(&spec, Instant::now(), &completed).await;
    let cpu = phase.split()?;
    ticker.finish();
    let consumer = outcome?;
    let secs = consumer.stream_s;
    Ok(DrainRun {
        settled,
        target_seqnos: targets.total_seqnos(),
        items_per_s: consumer.items() as f64 / secs,
        payload_mb_per_s: consumer.payload_bytes as f64 / MB / secs,
        wire_mb_per_s: consumer.wire_bytes as f64 / MB / secs,
        consumer,
        cpu,
    })
}
