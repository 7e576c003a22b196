//! One bucket setup of `sluice bench dcp`: a fresh server started by the bench, loaded with
//! the setup's documents by the KV prefill, then settled (persisted, CPU quiet) before every
//! timed phase.

use serde::Serialize;
use sluice_client::Client;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::BenchError;
use crate::harness::memory_stats::MemoryStats;
use crate::harness::proc_stats::{rss_bytes, CpuSplit};
use crate::harness::settle::{wait_persisted, wait_quiet};
use crate::load::connect::connect_all;
use crate::load::prefill::prefill;
use crate::load::workload::{Workload, KEY_BYTES};
use crate::report::progress::{Length, Ticker};
use crate::scenarios::dcp::args::{DcpArgs, Setup};
use crate::scenarios::dcp::consumer::ConsumerSpec;
use crate::scenarios::dcp::stream_targets::StreamTargets;
use crate::scenarios::kv::args::BucketTypeArg;
use crate::scenarios::kv::targets::{start_sluice, ServerSpec, Target};

/// Longest wait for the server's CPU to quiet down before a timed phase.
const QUIET_MAX: Duration = Duration::from_secs(30);

/// What a setup is made of.
#[derive(Debug, Clone, Serialize)]
pub struct SetupShape {
    pub setup: Setup,
    pub bucket_type: BucketTypeArg,
    pub memory_quota_mb: u64,
    pub items: u64,
    pub key_bytes: usize,
    pub value_bytes: usize,
}

impl SetupShape {
    pub fn of(setup: Setup, args: &DcpArgs) -> SetupShape {
        let (bucket_type, memory_quota_mb, items, value_bytes) = match setup {
            Setup::InMemory => (
                args.memory_bucket_type,
                args.memory_quota_mb,
                args.items,
                args.value_bytes,
            ),
            Setup::LargerThanMemory => (
                BucketTypeArg::Couchbase,
                args.ltm_quota_mb,
                args.ltm_items,
                args.ltm_value_bytes,
            ),
        };
        SetupShape {
            setup,
            bucket_type,
            memory_quota_mb,
            items,
            key_bytes: KEY_BYTES,
            value_bytes,
        }
    }

    /// Key + value bytes of one document.
    pub fn doc_bytes(&self) -> u64 {
        (self.key_bytes + self.value_bytes) as u64
    }
}

/// How loading went.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LoadSummary {
    pub prefill_s: f64,
    pub prefill_sets_per_s: f64,
    /// Waiting for the flusher after the prefill (0 for ephemeral buckets).
    pub persist_wait_s: f64,
    pub rss_after_load_bytes: u64,
    pub memory_after_load: MemoryStats,
}

/// Before a timed phase: how long the node took to settle.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Settled {
    pub persist_wait_s: f64,
    pub quiet_wait_s: f64,
    /// CPU use over the last quiet-check window.
    pub cpu: CpuSplit,
}

pub struct LoadedBucket {
    pub shape: SetupShape,
    pub target: Target,
    pub pid: u32,
    pub work: Arc<Workload>,
    /// The prefill's connections, kept for the write loads.
    pub clients: Vec<Client>,
    /// For stats and seqnos.
    pub admin: Client,
    pub load: LoadSummary,
}

impl LoadedBucket {
    /// Starts the setup's server and loads every document once.
    pub async fn load(setup: Setup, args: &DcpArgs) -> Result<LoadedBucket, BenchError> {
        let shape = SetupShape::of(setup, args);
        let target = start_sluice(&ServerSpec {
            bucket: args.login.bucket.clone(),
            bucket_type: shape.bucket_type,
            memory_quota_mb: shape.memory_quota_mb,
            index_memory_quota_mb: None,
            vbuckets: args.vbuckets,
            username: args.login.username.clone(),
            password: args.login.password.clone(),
            tls: false,
        })
        .await?;
        let pid = target.pid().expect("the bench started this server");
        let admin = Client::connect(target.addr, target.options.clone()).await?;
        let clients = connect_all(target.addr, &target.options, args.connections).await?;
        let work = Arc::new(Workload::new(shape.items, 0.0, shape.value_bytes));
        let completed = Arc::new(AtomicU64::new(0));
        let ticker = Ticker::start(
            format!("{} load", setup.as_str()),
            Length::Ops(shape.items),
            completed.clone(),
        );
        let began = Instant::now();
        let stall = Duration::from_secs(args.stall_timeout_s);
        let filled = tokio::select! {
            filled = prefill(clients, work.clone(), completed.clone()) => filled,
            stalled = watchdog(&completed, stall) => Err(stalled),
        };
        ticker.finish();
        let clients = filled?;
        let prefill_s = began.elapsed().as_secs_f64();
        let mut bucket = LoadedBucket {
            load: LoadSummary {
                prefill_s,
                prefill_sets_per_s: shape.items as f64 / prefill_s,
                ..LoadSummary::default()
            },
            shape,
            target,
            pid,
            work,
            clients,
            admin,
        };
        let settled = bucket.settle(stall).await?;
        bucket.load.persist_wait_s = settled.persist_wait_s;
        bucket.load.rss_after_load_bytes = rss_bytes(pid)?;
        bucket.load.memory_after_load = MemoryStats::read(&mut bucket.admin).await?;
        Ok(bucket)
    }

    /// Settles the bucket, reads each vbucket's high seqno, and describes what a consumer
    /// of it streams: the start of every timed DCP run (drain and catch-up alike).
    pub async fn prepare_streams(
        &mut self,
        args: &DcpArgs,
    ) -> Result<(Settled, ConsumerSpec), BenchError> {
        let stall = Duration::from_secs(args.stall_timeout_s);
        let settled = self.settle(stall).await?;
        let targets = Arc::new(StreamTargets::read(&mut self.admin).await?);
        let spec = ConsumerSpec {
            addr: self.target.addr,
            options: self.target.options.clone(),
            window_bytes: args.window_bytes,
            targets,
            documents: self.shape.items,
            stall,
        };
        Ok((settled, spec))
    }

    /// Waits until everything is persisted (couchbase buckets) and the server's CPU is
    /// quiet, so what follows measures one thing.
    pub async fn settle(&mut self, stall: Duration) -> Result<Settled, BenchError> {
        self.target.check_running()?;
        let persist_wait = match self.shape.bucket_type {
            BucketTypeArg::Couchbase => wait_persisted(&mut self.admin, stall).await?,
            BucketTypeArg::Ephemeral => Duration::ZERO,
        };
        let (quiet_wait, cpu) = wait_quiet(self.pid, QUIET_MAX).await?;
        Ok(Settled {
            persist_wait_s: persist_wait.as_secs_f64(),
            quiet_wait_s: quiet_wait.as_secs_f64(),
            cpu,
        })
    }

    /// Stops the server and keeps its log at `save_log_to`.
    pub async fn stop(self, save_log_to: Option<&Path>) -> Result<(), BenchError> {
        drop(self.clients);
        drop(self.admin);
        self.target.stop_saving_log(save_log_to).await
    }
}

/// Resolves (to the error to report) once `completed` has not moved for `stall`: a bucket
/// that answers every set with a temporary failure (an ephemeral bucket over its quota)
/// would otherwise keep the prefill retrying forever.
async fn watchdog(completed: &AtomicU64, stall: Duration) -> BenchError {
    let mut last = (completed.load(Ordering::Relaxed), Instant::now());
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = completed.load(Ordering::Relaxed);
        if now != last.0 {
            last = (now, Instant::now());
        } else if last.1.elapsed() >= stall {
            return BenchError::PrefillStalled {
                done: now,
                waited: stall,
            };
        }
    }
}
