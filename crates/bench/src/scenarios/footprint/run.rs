//! [`run_footprint`]: seed 003's rows, one fresh bucket each. A row stores `--items`
//! documents, reads its memory (the engine's own accounting and the process's RSS growth, per
//! item), then runs an update phase (100 % sets of stored keys) and a GET phase (100 % gets),
//! each after a warm-up of the same load. In-process rows call the engine from threads of
//! this process; socket rows drive a `sluice server` (and, with `--vs memcached`, memcached
//! with the same memory limit) over loopback with closed-loop connections.

use sluice_client::Client;
use sluice_engine::BucketType;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use crate::harness::memory_stats::MemoryStats;
use crate::harness::proc_stats::rss_bytes;
use crate::load::connect::connect_all;
use crate::load::in_process::{open_bucket, prefill as fill_in_process, timed_run, InProcessSpec};
use crate::load::measure::{self, RunSpec};
use crate::load::prefill::prefill;
use crate::load::workload::Workload;
use crate::report::progress::{Length, Ticker};
use crate::report::scenario_out::{out_dir, save_config};
use crate::scenarios::footprint::args::{FootprintArgs, Mode};
use crate::scenarios::footprint::error::{RowError, RunFootprintError};
use crate::scenarios::footprint::report::{FootprintReport, FootprintRow, Phases};
use crate::scenarios::kv::args::{BucketTypeArg, Peer};
use crate::scenarios::kv::targets::{start_memcached_with, start_sluice, ServerSpec, Target};

pub async fn run_footprint(args: FootprintArgs) -> Result<(), RunFootprintError> {
    let given = args;
    let args = given.effective();
    args.validate()?;
    let out_dir = out_dir(args.out.as_deref(), "footprint")?;
    save_config(&out_dir, "footprint", &given)?;
    let mut rows = Vec::new();
    for &mode in &args.modes {
        for &bucket_type in &args.bucket_types {
            for &quota in &args.quotas_mb {
                let label = format!("{mode:?} {} {quota} MiB", bucket_type.as_str());
                eprintln!("{label}");
                let row = match mode {
                    Mode::InProcess => in_process_row(&args, bucket_type, quota).await,
                    Mode::Sockets => socket_row(&args, bucket_type, quota).await,
                };
                rows.push(row.map_err(|source| RunFootprintError::Row { label, source })?);
            }
        }
    }
    if args.vs == Some(Peer::Memcached) && args.modes.contains(&Mode::Sockets) {
        for &quota in &args.quotas_mb {
            let row = memcached_row(&args, quota).await.map_err(|source| {
                RunFootprintError::Memcached {
                    quota_mb: quota,
                    source,
                }
            })?;
            rows.push(row);
        }
    }
    let report = FootprintReport::new(args.clone(), rows);
    report.write(&out_dir)?;
    print!("{}", report.table().to_text());
    eprintln!("wrote {}/report.md and results.json", out_dir.display());
    Ok(())
}

/// The update and the GET workload over the same keys and value.
fn workloads(args: &FootprintArgs) -> (Arc<Workload>, Arc<Workload>) {
    (
        Arc::new(Workload::new(args.items, 0.0, args.value_bytes)),
        Arc::new(Workload::new(args.items, 1.0, args.value_bytes)),
    )
}

async fn in_process_row(
    args: &FootprintArgs,
    bucket_type: BucketTypeArg,
    quota_mb: u64,
) -> Result<FootprintRow, RowError> {
    let (updates, gets) = workloads(args);
    let completed = Arc::new(AtomicU64::new(0));
    let spec = InProcessSpec {
        completed: completed.clone(),
        threads: args.threads(),
        quota_bytes: quota_mb * 1024 * 1024,
        num_vbuckets: args.vbuckets,
        warmup: Duration::from_secs(args.warmup_s),
        duration: Duration::from_secs(args.duration_s),
        runs: args.runs,
    };
    let engine_type = match bucket_type {
        BucketTypeArg::Couchbase => BucketType::Couchbase,
        BucketTypeArg::Ephemeral => BucketType::Ephemeral,
    };
    let phase = spec.warmup + spec.duration;
    let bar = Ticker::start(
        "in-process".into(),
        Length::Time(phase * 2 * args.runs),
        completed,
    );
    let items = args.items;
    let outcome = tokio::task::spawn_blocking(move || -> Result<FootprintRow, RowError> {
        let me = std::process::id();
        let rss_before = rss(me)?;
        let (bucket, dir) = open_bucket(&spec, engine_type)?;
        fill_in_process(&bucket, &updates, spec.threads).map_err(RowError::Store)?;
        let engine_bytes = bucket.memory().used_bytes;
        let rss_after = rss(me)?;
        let mut phases = Phases::default();
        for run in 0..spec.runs {
            let u = timed_run(&bucket, &updates, &spec, u64::from(run));
            phases.add_update(u.ops as f64 / spec.duration.as_secs_f64(), u.errors, 0);
            phases.add_refused(u.refused);
            let g = timed_run(&bucket, &gets, &spec, u64::from(run));
            phases.add_refused(g.refused);
            phases.add_get(
                g.ops as f64 / spec.duration.as_secs_f64(),
                g.errors,
                g.misses,
            );
        }
        bucket.shutdown().map_err(RowError::Shutdown)?;
        // The storage engine's last cleanups need the directory: it goes after the bucket.
        drop(bucket);
        drop(dir);
        Ok(FootprintRow::new(
            "sluice",
            Mode::InProcess,
            Some(bucket_type),
            quota_mb,
            items,
            phases,
            Some(engine_bytes),
            rss_after.saturating_sub(rss_before),
            None,
        ))
    })
    .await;
    bar.finish();
    outcome.map_err(RowError::InProcessThread)?
}

/// The resident set of process `pid`.
fn rss(pid: u32) -> Result<u64, RowError> {
    rss_bytes(pid).map_err(|source| RowError::Rss { pid, source })
}

async fn socket_row(
    args: &FootprintArgs,
    bucket_type: BucketTypeArg,
    quota_mb: u64,
) -> Result<FootprintRow, RowError> {
    let target = start_sluice(&ServerSpec {
        bucket: args.login.bucket.clone(),
        bucket_type,
        memory_quota_mb: quota_mb,
        index_memory_quota_mb: None,
        vbuckets: args.vbuckets,
        username: args.login.username.clone(),
        password: args.login.password.clone(),
        tls: false,
    })
    .await
    .map_err(RowError::StartSluice)?;
    let outcome = over_sockets(args, &target, Some(bucket_type), quota_mb).await;
    target.stop().await?;
    outcome
}

async fn memcached_row(args: &FootprintArgs, quota_mb: u64) -> Result<FootprintRow, RowError> {
    let target = start_memcached_with(&args.memcached_bin, quota_mb)
        .await
        .map_err(RowError::StartMemcached)?;
    let outcome = over_sockets(args, &target, None, quota_mb).await;
    target.stop().await?;
    outcome
}

/// Store, measure memory, then the update and GET phases, on a started server.
async fn over_sockets(
    args: &FootprintArgs,
    target: &Target,
    bucket_type: Option<BucketTypeArg>,
    quota_mb: u64,
) -> Result<FootprintRow, RowError> {
    let (updates, gets) = workloads(args);
    let pid = target.pid().ok_or(RowError::NoPid)?;
    let clients = connect_all(target.addr, &target.options, args.connections).await?;
    let mut stats = Client::connect(target.addr, target.options.clone()).await?;
    let rss_before = rss(pid)?;
    let completed = Arc::new(AtomicU64::new(0));
    let bar = Ticker::start(
        format!("{} store", target.name),
        Length::Ops(args.items),
        completed.clone(),
    );
    let filled = prefill(clients, updates.clone(), completed).await;
    bar.finish();
    let mut clients = filled.map_err(RowError::Store)?;
    let rss_after = rss(pid)?;
    let engine_bytes = engine_bytes(&mut stats, bucket_type.is_some()).await?;
    let resident_pct = if bucket_type.is_some() {
        MemoryStats::read(&mut stats).await?.resident_pct
    } else {
        None
    };
    let spec = RunSpec {
        pipeline: 1,
        rate_ops_per_s: None,
        warmup: Duration::from_secs(args.warmup_s),
        duration: Duration::from_secs(args.duration_s),
    };
    let mut phases = Phases::default();
    for run in 0..args.runs {
        for (name, work) in [("updates", &updates), ("GETs", &gets)] {
            let completed = Arc::new(AtomicU64::new(0));
            let bar = Ticker::start(
                format!("{} {name}", target.name),
                Length::Time(spec.warmup + spec.duration),
                completed.clone(),
            );
            let outcome =
                measure::run(clients, work.clone(), spec, u64::from(run), completed).await;
            bar.finish();
            let (back, r) = outcome.map_err(|source| RowError::Phase {
                target: target.name,
                phase: name,
                source,
            })?;
            clients = back;
            phases.add_refused(r.refused);
            if work.get_ratio > 0.0 {
                phases.add_get(r.ops_per_s, r.errors, r.get_misses);
                phases.get_p99_us.push(r.latency.p99_us);
            } else {
                phases.add_update(r.ops_per_s, r.errors, 0);
                phases.update_p99_us.push(r.latency.p99_us);
            }
        }
    }
    Ok(FootprintRow::new(
        target.name,
        Mode::Sockets,
        bucket_type,
        quota_mb,
        args.items,
        phases,
        Some(engine_bytes),
        rss_after.saturating_sub(rss_before),
        resident_pct,
    ))
}

/// What the server itself says it holds: Sluice's `mem_used`, memcached's item `bytes`.
async fn engine_bytes(stats: &mut Client, sluice: bool) -> Result<u64, RowError> {
    if sluice {
        return MemoryStats::read(stats)
            .await?
            .mem_used_bytes
            .ok_or(RowError::NoMemUsed);
    }
    let pairs = stats.stats("").await?;
    pairs
        .iter()
        .find(|(k, _)| k == "bytes")
        .and_then(|(_, v)| v.parse().ok())
        .ok_or(RowError::NoBytes)
}
