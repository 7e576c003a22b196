//! [`run_durability`]: for each run, each target in turn (the order reversed on odd runs):
//! start it fresh, write every key once, then for each of its rows (also reversed on odd
//! runs) wait until it is idle (Sluice: persisted), connect the row's loops and run them.
//! Then medians, report.md, results.json and the chart.

use bytes::Bytes;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::harness::redis_peer::find_redis_server;
use crate::load::workload::Workload;
use crate::report::progress::{Length, Ticker};
use crate::report::scenario_out::{out_dir, save_config};
use crate::scenarios::durability::args::{DurabilityArgs, DurabilityPeer};
use crate::scenarios::durability::closed_loop::{prefill, run_row, LoopPlan, RowMeasure};
use crate::scenarios::durability::error::{RunDurabilityError, TargetError};
use crate::scenarios::durability::redis::RedisSide;
use crate::scenarios::durability::report::{DurabilityReport, RowRun};
use crate::scenarios::durability::row::{Level, Target, Write};
use crate::scenarios::durability::sluice::SluiceSide;

/// Longest wait for quiet processes after the prefill, and before each row.
const SETTLE_AFTER_PREFILL: Duration = Duration::from_secs(30);
const SETTLE_BEFORE_ROW: Duration = Duration::from_secs(5);

pub async fn run_durability(given: DurabilityArgs) -> Result<(), RunDurabilityError> {
    let args = given.effective();
    args.validate()?;
    let out = out_dir(args.out.as_deref(), "durability")?;
    save_config(&out, "durability", &given)?;
    let redis = match args.vs {
        Some(DurabilityPeer::Redis) => Some(find_redis_server()?),
        None => None,
    };
    let mut targets = vec![Target::Sluice];
    if redis.is_some() {
        let mut modes = args.redis_persistence.clone();
        modes.dedup();
        targets.extend(modes.into_iter().map(Target::Redis));
    }
    let value = Workload::new(1, 0.0, args.value_bytes).value;
    let mut runs = Vec::new();
    for run in 0..args.runs {
        let mut order = targets.clone();
        if run % 2 == 1 {
            order.reverse();
        }
        for target in order {
            let done = run_target(target, run, &args, &value, &out, redis.as_deref())
                .await
                .map_err(|source| RunDurabilityError::Target {
                    target: target.label(),
                    run: run + 1,
                    source,
                })?;
            runs.extend(done);
        }
    }
    let rows: Vec<(Target, Write)> = targets
        .iter()
        .flat_map(|&t| Write::of(t, &args.levels).into_iter().map(move |w| (t, w)))
        .collect();
    let report = DurabilityReport::new(args.clone(), &rows, runs);
    report.write(&out)?;
    print!("{}", report.latency_table().to_text());
    if let Some(t) = report.ratio_table() {
        println!("against Redis (Sluice ÷ Redis, medians):");
        print!("{}", t.to_text());
    }
    eprintln!("wrote {}/report.md and results.json", out.display());
    Ok(())
}

/// One target's rows in run `run`, on a target started for them and stopped after.
async fn run_target(
    target: Target,
    run: u32,
    args: &DurabilityArgs,
    value: &Bytes,
    out: &Path,
    redis: Option<&Path>,
) -> Result<Vec<RowRun>, TargetError> {
    let mut writes = Write::of(target, &args.levels);
    if run % 2 == 1 {
        writes.reverse();
    }
    let mut results = Vec::new();
    match target {
        Target::Sluice => {
            let log = out.join(format!("cluster-run{}.log", run + 1));
            let mut side = SluiceSide::start(args, run, &log).await?;
            let rows = async {
                let plain = side.writers(args, Level::None, args.connections).await?;
                prefill(plain, args.keys, value, args.stuck_after()).await?;
                side.settle(SETTLE_AFTER_PREFILL).await?;
                for &w in &writes {
                    let Write::Sluice(level) = w else { continue };
                    side.settle(SETTLE_BEFORE_ROW).await?;
                    let writers = side.writers(args, level, args.connections).await?;
                    let m = timed_row(writers, target, w, run, args, value).await;
                    results.push(RowRun::new(target, w, run, &m));
                }
                Ok::<(), TargetError>(())
            }
            .await;
            side.stop().await?;
            rows?;
        }
        Target::Redis(mode) => {
            let bin = redis.ok_or(TargetError::NoRedisServer)?;
            let dir = out.join(format!("redis-{mode:?}-run{}", run + 1).to_lowercase());
            let side = RedisSide::start(bin, &dir, mode).await?;
            let rows = async {
                let plain = side.writers(args.connections, false).await?;
                prefill(plain, args.keys, value, args.stuck_after()).await?;
                side.settle(SETTLE_AFTER_PREFILL).await?;
                for &w in &writes {
                    side.settle(SETTLE_BEFORE_ROW).await?;
                    let wait = w == Write::RedisSetWait;
                    let writers = side.writers(args.connections, wait).await?;
                    let m = timed_row(writers, target, w, run, args, value).await;
                    results.push(RowRun::new(target, w, run, &m));
                }
                Ok::<(), TargetError>(())
            }
            .await;
            // Its files (AOF) are kept, with its logs, only when a run failed.
            side.stop(rows.is_err()).await?;
            rows?;
        }
    }
    Ok(results)
}

/// Runs one row's loops with a progress bar, and says on stderr what they measured.
async fn timed_row<W: crate::scenarios::durability::closed_loop::Writer>(
    writers: Vec<W>,
    target: Target,
    write: Write,
    run: u32,
    args: &DurabilityArgs,
    value: &Bytes,
) -> RowMeasure {
    let done = Arc::new(AtomicU64::new(0));
    let label = format!("{} {}", target.label(), write.label());
    let bar = Ticker::start(label.clone(), Length::Time(args.row_length()), done.clone());
    let start = Instant::now();
    let plan = LoopPlan {
        measure_from: start + args.warmup(),
        until: start + args.row_length(),
        max_writes: args.max_writes,
        stuck_after: args.stuck_after(),
        value: value.clone(),
        done,
    };
    let m = run_row(writers, args.keys, &plan).await;
    bar.finish();
    let s = m.latency.summary();
    eprintln!(
        "{label}, run {}: p50 {}, p99 {}, p99.9 {}, max {}, {:.0} writes/s, {} error(s){}",
        run + 1,
        crate::load::latency::format_us(s.p50_us),
        crate::load::latency::format_us(s.p99_us),
        crate::load::latency::format_us(s.p999_us),
        crate::load::latency::format_us(s.max_us),
        m.writes_per_s(),
        m.errors,
        m.first_error
            .as_deref()
            .map_or(String::new(), |e| format!(" (first: {e})")),
    );
    m
}
