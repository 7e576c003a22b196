//! [`run_replication`]: for each run, each target in turn (alternating order run by run):
//! start it fresh, prefill, wait until the replicas have caught up, then for each column
//! (Sluice; a peer has only replication) define the column's indexes (views), start its
//! XDCR target cluster and replication, its DCP clients and query loop, climb the rate
//! ladder until a rate is not held, stop the clients, drop the indexes, delete the
//! replication and stop its target, and let the cluster settle. Then medians, report.md,
//! results.json and the charts.

use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::harness::local_cluster::LocalCluster;
use crate::harness::redis_peer::{find_redis_server, RedisPair, RedisPersistence};
use crate::report::progress::{Length, Ticker};
use crate::scenarios::kv::args::BucketTypeArg;
use crate::scenarios::replication::args::{ReplArgs, ReplPeer};
use crate::scenarios::replication::background::Background;
use crate::scenarios::replication::column::Column;
use crate::scenarios::replication::error::{RunReplicationError, RunTargetError};
use crate::scenarios::replication::indexes::Indexes;
use crate::scenarios::replication::redis::RedisTarget;
use crate::scenarios::replication::report::{ColumnReaders, ReplReport};
use crate::scenarios::replication::sluice::SluiceTarget;
use crate::scenarios::replication::step::{run_step, StepConfig, StepResult};
use crate::scenarios::replication::target::Target;
use crate::scenarios::replication::values::Docs;
use crate::scenarios::replication::xdcr::XdcrColumn;

/// After the prefill, the replicas get this long to catch up.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(300);
/// Longest wait for quiet processes after the prefill (storage compaction, AOF rewrite) and
/// between steps.
const SETTLE_AFTER_PREFILL: Duration = Duration::from_secs(60);
const SETTLE_BETWEEN_STEPS: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sluice,
    Redis(RedisPersistence),
}

impl Kind {
    fn label(self) -> String {
        match self {
            Kind::Sluice => "sluice".to_string(),
            Kind::Redis(RedisPersistence::None) => "redis (no persistence)".to_string(),
            Kind::Redis(RedisPersistence::Aof) => "redis (AOF everysec)".to_string(),
        }
    }

    /// The columns this target runs: all of them on Sluice, replication only on a peer.
    fn columns(self, args: &ReplArgs) -> Vec<Column> {
        match self {
            Kind::Sluice => args.columns.clone(),
            Kind::Redis(_) => vec![Column::REPLICATION],
        }
    }
}

/// What one target's runs produced.
#[derive(Default)]
struct Outcome {
    steps: Vec<StepResult>,
    readers: Vec<ColumnReaders>,
}

pub async fn run_replication(given: ReplArgs) -> Result<(), RunReplicationError> {
    let args = given.effective();
    args.validate()?;
    let out_dir = crate::report::scenario_out::out_dir(args.out.as_deref(), "replication")?;
    crate::report::scenario_out::save_config(&out_dir, "replication", &given)?;
    let redis = match args.vs {
        Some(ReplPeer::Redis) => Some(find_redis_server()?),
        None => None,
    };
    let mut kinds = vec![Kind::Sluice];
    if redis.is_some() {
        let mut modes = args.redis_persistence.clone();
        modes.dedup();
        kinds.extend(modes.into_iter().map(Kind::Redis));
    }
    let cfg = StepConfig {
        length: args.step(),
        warmup: args.warmup(),
        writers: args.writers,
        in_flight_max: args.in_flight_max,
        items: args.items,
        docs: Docs::new(args.value_bytes, 0),
        sample_hz: args.sample_hz,
        sample_key_prefix: sample_key_prefix(),
        breakdown: args.breakdown,
        durable_hz: args.durable_hz,
        persistent_bucket: args.bucket_type == BucketTypeArg::Couchbase,
    };
    eprintln!(
        "documents: JSON of {} B, {} number fields (f0, f1, …) and padding",
        args.value_bytes,
        cfg.docs.fields()
    );
    let mut all = Outcome::default();
    for run in 0..args.runs {
        let mut order = kinds.clone();
        if run % 2 == 1 {
            order.reverse();
        }
        for kind in order {
            let done = run_target(kind, run, &args, &cfg, &out_dir, redis.as_deref())
                .await
                .map_err(|source| RunReplicationError::Target {
                    target: kind.label(),
                    run: run + 1,
                    source,
                })?;
            all.steps.extend(done.steps);
            all.readers.extend(done.readers);
        }
    }
    let labels = kinds
        .iter()
        .flat_map(|k| k.columns(&args).into_iter().map(|c| c.label(&k.label())))
        .collect();
    let report = ReplReport::new(args.clone(), labels, all.steps, all.readers);
    report.write(&out_dir)?;
    println!("{}", report.summary_table().to_text());
    println!("replication latency p80 / p95 / p99:");
    println!("{}", report.latency_table().to_text());
    println!("items remaining avg / max:");
    println!("{}", report.items_table().to_text());
    if let Some(t) = report.durable_table() {
        println!("durable writes beside the load, p50 / p99:");
        println!("{}", t.to_text());
    }
    eprintln!("wrote {}/report.md and results.json", out_dir.display());
    Ok(())
}

async fn run_target(
    kind: Kind,
    run: u32,
    args: &ReplArgs,
    cfg: &StepConfig,
    out_dir: &Path,
    redis: Option<&Path>,
) -> Result<Outcome, RunTargetError> {
    let (target, cluster) = start(kind, run, args, out_dir, redis).await?;
    let target = Arc::new(target);
    let outcome = columns(&target, kind, run, args, cfg, out_dir).await;
    let target = Arc::into_inner(target).ok_or(RunTargetError::TargetHeld)?;
    if let Some(c) = cluster {
        c.stop().await?;
    }
    if let Target::Redis(r) = target {
        let dir = r.pair.dir.clone();
        r.pair.stop().await?;
        // Its AOF files are tens of MB per run; kept only when a run failed (with its logs).
        if outcome.is_ok() {
            std::fs::remove_dir_all(&dir).map_err(|source| RunTargetError::RemoveRedisDir {
                dir: dir.clone(),
                source,
            })?;
        }
    }
    outcome
}

/// The target, and the cluster the bench started for it (stopped after the ladder).
async fn start(
    kind: Kind,
    run: u32,
    args: &ReplArgs,
    out_dir: &Path,
    redis: Option<&Path>,
) -> Result<(Target, Option<LocalCluster>), RunTargetError> {
    match kind {
        Kind::Sluice => {
            let (cluster, seeds) = if args.connect.is_empty() {
                eprintln!("starting a {}-node cluster", args.nodes);
                let c = LocalCluster::start(args.cluster_spec(run), &out_dir.join("cluster.log"))
                    .await?;
                let seeds = c.seeds.clone();
                (Some(c), seeds)
            } else {
                (None, args.connect.clone())
            };
            let pids = cluster.as_ref().map_or(Vec::new(), |c| c.pids.clone());
            let t = SluiceTarget::connect(
                &seeds,
                &args.login.username,
                &args.login.password,
                &args.login.bucket,
                pids,
            )
            .await?;
            Ok((Target::Sluice(Box::new(t)), cluster))
        }
        Kind::Redis(mode) => {
            let bin = redis.ok_or(RunTargetError::NoRedisServer)?;
            let dir = out_dir.join(format!("redis-{mode:?}-run{}", run + 1).to_lowercase());
            let _ = std::fs::remove_dir_all(&dir);
            let pair = RedisPair::start(bin, &dir, mode).await?;
            Ok((
                Target::Redis(Box::new(RedisTarget::connect(pair).await?)),
                None,
            ))
        }
    }
}

/// Prefills the target, then climbs the ladder once per column with the column's readers
/// running.
async fn columns(
    target: &Arc<Target>,
    kind: Kind,
    run: u32,
    args: &ReplArgs,
    cfg: &StepConfig,
    out_dir: &Path,
) -> Result<Outcome, RunTargetError> {
    let done = Arc::new(AtomicU64::new(0));
    let bar = Ticker::start(
        format!("{} prefill", kind.label()),
        Length::Ops(args.items),
        done.clone(),
    );
    let filled = target.prefill(args.items, &cfg.docs, &done).await;
    bar.finish();
    filled?;
    caught_up(target).await?;
    target.settle(SETTLE_AFTER_PREFILL).await?;
    let mut out = Outcome::default();
    for column in kind.columns(args) {
        let label = column.label(&kind.label());
        let sluice = match &**target {
            Target::Sluice(t) => Some(t),
            Target::Redis(_) => None,
        };
        let mut indexes = match sluice {
            Some(t) if column.views > 0 => {
                let node = t.index_node(&args.login.username, &args.login.password)?;
                eprintln!(
                    "{label}: defining {} index(es) on {} (each answers once built over the \
                     documents)",
                    column.views, node.admin
                );
                let ix = Indexes::create(node, column.views)
                    .await
                    .map_err(|source| RunTargetError::DefineIndexes {
                        label: label.clone(),
                        source,
                    })?;
                caught_up(target).await?;
                target.settle(SETTLE_BETWEEN_STEPS).await?;
                Some(ix)
            }
            _ => None,
        };
        let xdcr = match sluice {
            Some(t) if column.xdcr => {
                let (_, admin) = t.first_node()?;
                let x = XdcrColumn::start(args, run, out_dir, t, admin)
                    .await
                    .map_err(|source| RunTargetError::SetUpXdcr {
                        label: label.clone(),
                        source,
                    })?;
                caught_up(target).await?;
                // The target has just taken every prefilled document: its flusher and
                // compaction run on the same cores (the quiet wait counts every process).
                target.settle(SETTLE_AFTER_PREFILL).await?;
                Some(x)
            }
            _ => None,
        };
        let readers = match sluice {
            Some(t) if column.clients > 0 => {
                eprintln!("{label}: starting the column's DCP clients");
                Some(Background::start(column, &t.shares()?, t.login()))
            }
            _ => None,
        };
        let queries = indexes
            .as_ref()
            .map(|ix| ix.query_loop(args.views_query_every()));
        let beside = Beside {
            indexes: indexes.as_mut(),
            xdcr: xdcr.as_ref(),
        };
        let climbed = ladder(target, beside, &label, run, args, cfg).await;
        let readers = match readers {
            Some(r) => r.stop().await,
            None => Vec::new(),
        };
        let indexes = match (indexes, queries) {
            (Some(ix), Some(q)) => {
                let q = q.stop().await;
                Some(
                    ix.finish(q)
                        .await
                        .map_err(|source| RunTargetError::DropIndexes {
                            label: label.clone(),
                            source,
                        })?,
                )
            }
            _ => None,
        };
        let xdcr = match xdcr {
            Some(x) => {
                let setup = x.setup.clone();
                x.stop().await.map_err(|source| RunTargetError::StopXdcr {
                    label: label.clone(),
                    source,
                })?;
                Some(setup)
            }
            None => None,
        };
        if !readers.is_empty() || indexes.is_some() || xdcr.is_some() {
            out.readers.push(ColumnReaders {
                target: label.clone(),
                run,
                readers,
                indexes,
                xdcr,
            });
        }
        out.steps.extend(climbed?);
        caught_up(target).await?;
        target.settle(SETTLE_BETWEEN_STEPS).await?;
    }
    Ok(out)
}

/// What a column runs beside the load that reports per step.
struct Beside<'a> {
    indexes: Option<&'a mut Indexes>,
    xdcr: Option<&'a XdcrColumn>,
}

async fn ladder(
    target: &Arc<Target>,
    mut beside: Beside<'_>,
    label: &str,
    run: u32,
    args: &ReplArgs,
    cfg: &StepConfig,
) -> Result<Vec<StepResult>, RunTargetError> {
    let mut out = Vec::new();
    for &rate in &args.rates {
        let done = Arc::new(AtomicU64::new(0));
        let bar = Ticker::start(
            format!("{label} {}/s", crate::report::table::thousands(rate)),
            Length::Time(cfg.length),
            done.clone(),
        );
        // The step's measured part, as run_step places it (it starts 20 ms on).
        let start = Instant::now() + Duration::from_millis(20);
        let (from, until) = (start + cfg.warmup, start + cfg.length);
        let step = run_step(target.clone(), label, run, rate, cfg, done);
        let backlog = async {
            match beside.indexes.as_deref_mut() {
                Some(ix) => Some(ix.backlog(from, until).await),
                None => None,
            }
        };
        let xdcr = async {
            match (beside.xdcr, &**target) {
                (Some(x), Target::Sluice(t)) => Some(x.window(t, from, until).await),
                _ => None,
            }
        };
        let (step, backlog, xdcr) = tokio::join!(step, backlog, xdcr);
        bar.finish();
        let mut step = step?;
        match backlog {
            Some(Ok(b)) => step.index_backlog = Some(b),
            Some(Err(e)) => eprintln!(
                "{label}: reading the indexes' items remaining: {}",
                crate::error::Chain(&e)
            ),
            None => {}
        }
        if let Some(w) = xdcr {
            let w = w.map_err(|source| RunTargetError::XdcrFigures {
                label: label.to_string(),
                source,
            })?;
            eprintln!(
                "{label}, run {}, {rate}/s: XDCR {:.0} docs/s, {:.1} MB/s, lag p50 {} p99 {}, \
                 drained {:.1} s after the step",
                run + 1,
                w.docs_per_s,
                w.mb_per_s,
                crate::load::latency::format_us(w.lag_p50_us),
                crate::load::latency::format_us(w.lag_p99_us),
                w.drain_s,
            );
            step.xdcr = Some(w);
        }
        let index = step.index_backlog.map_or(String::new(), |b| {
            format!(
                ", index items remaining avg {:.0} / max {} / end {}",
                b.avg, b.max, b.end
            )
        });
        eprintln!(
            "{label}, run {}, {rate}/s: held {:.0}/s, replication p99 {}, items remaining avg {:.1}{index}",
            run + 1,
            step.achieved_per_s,
            crate::load::latency::format_us(step.repl_latency.p99_us),
            step.lag.items_remaining_avg,
        );
        let held = step.sustained;
        out.push(step);
        if !held {
            break;
        }
        caught_up(target).await?;
        target.settle(SETTLE_BETWEEN_STEPS).await?;
    }
    Ok(out)
}

/// Waits until the replicas have applied everything written so far.
async fn caught_up(target: &Target) -> Result<(), RunTargetError> {
    let deadline = Instant::now() + CATCH_UP_TIMEOUT;
    loop {
        let lag = target.probe().await?;
        if lag.behind <= 0.0 {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(RunTargetError::NotCaughtUp {
                behind: lag.behind,
                waited: CATCH_UP_TIMEOUT,
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `lat:` and this invocation's start time and process id, so that no two invocations share
/// a sample key (see [`StepConfig::sample_key_prefix`]).
fn sample_key_prefix() -> String {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("lat:{:x}:{}", since_epoch.as_nanos(), std::process::id())
}

#[cfg(test)]
mod tests {
    use super::sample_key_prefix;

    #[test]
    fn every_invocation_gets_its_own_sample_keys() {
        let first = sample_key_prefix();
        let second = sample_key_prefix();
        assert!(first.starts_with("lat:"), "{first}");
        assert_ne!(first, second);
    }
}
