//! [`run_clients`]: seed 002's plan, case by case. For each case: start an M-node cluster (or
//! use `--connect`), warm it up, then per run a write phase and a read phase over the same
//! keys, each read around with the nodes' own counters; stop the cluster. Then medians,
//! report.md and results.json.

use bytes::Bytes;
use sluice_client::ClusterOptions;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::harness::local_cluster::LocalCluster;
use crate::harness::node_probe::NodeProbe;
use crate::harness::proc_stats::cpu_time;
use crate::report::progress::{Length, Ticker};
use crate::report::scenario_out::{out_dir, save_config};
use crate::scenarios::clients::args::{ClientCase, ClientsArgs};
use crate::scenarios::clients::error::{CaseError, RunClientsError};
use crate::scenarios::clients::phase::{run_phase, PhaseKind, PhasePlan};
use crate::scenarios::clients::report::{CaseResult, ClientsReport, PhaseSummary};

/// Users of the warm-up (a write and a read phase over 1 s each, not measured).
const WARMUP_USERS: u32 = 50;
const WARMUP_RAMP: Duration = Duration::from_secs(1);
/// STAT figures read around each phase, summed over the nodes.
const PROBED: [(&str, &str); 1] = [("", "total_connections")];

pub async fn run_clients(args: ClientsArgs) -> Result<(), RunClientsError> {
    let given = args;
    let args = given.effective();
    args.validate()?;
    let out_dir = out_dir(args.out.as_deref(), "clients")?;
    save_config(&out_dir, "clients", &given)?;
    let mut cases = Vec::new();
    for (i, case) in args.cases.iter().enumerate() {
        let log = out_dir.join(format!("cluster-case{}.log", i + 1));
        let result =
            run_case(&args, i, case, &log)
                .await
                .map_err(|source| RunClientsError::Case {
                    number: i + 1,
                    label: case.label(),
                    source,
                })?;
        cases.push(result);
    }
    let report = ClientsReport::new(args.clone(), cases);
    report.write(&out_dir)?;
    print!("{}", report.to_text());
    eprintln!("wrote {}/report.md and results.json", out_dir.display());
    Ok(())
}

async fn run_case(
    args: &ClientsArgs,
    index: usize,
    case: &ClientCase,
    log: &std::path::Path,
) -> Result<CaseResult, CaseError> {
    let (cluster, seeds) = if args.cluster.connect.is_empty() {
        eprintln!("starting a {}-node cluster", case.servers);
        let c = LocalCluster::start(args.cluster_spec(index, case), log).await?;
        let seeds = c.seeds.clone();
        (Some(c), seeds)
    } else {
        (None, args.cluster.connect.clone())
    };
    let pids = cluster.as_ref().map_or(Vec::new(), |c| c.pids.clone());
    let outcome = phases(args, case, seeds, pids).await;
    if let Some(c) = cluster {
        c.stop().await?;
    }
    outcome
}

async fn phases(
    args: &ClientsArgs,
    case: &ClientCase,
    seeds: Vec<String>,
    pids: Vec<u32>,
) -> Result<CaseResult, CaseError> {
    let mut probe = NodeProbe::connect(&seeds, &args.login, pids).await?;
    let login = &args.login;
    let base = PhasePlan {
        kind: PhaseKind::Write,
        users: WARMUP_USERS.min(case.users),
        ramp: WARMUP_RAMP,
        key_prefix: "warmup:".into(),
        value: Bytes::from(vec![b'v'; args.value_bytes]),
        seeds: Arc::new(seeds),
        options: ClusterOptions::sluice(&login.username, &login.password, &login.bucket),
    };
    for kind in [PhaseKind::Write, PhaseKind::Read] {
        let warm = PhasePlan {
            kind,
            ..base.clone()
        };
        let r = run_phase(&warm, Arc::new(AtomicU64::new(0))).await;
        if r.errors != 0 {
            return Err(CaseError::Warmup {
                first_error: r.first_error.unwrap_or_default(),
            });
        }
    }
    let mut runs = Vec::new();
    for run in 0..args.runs {
        let mut pair = Vec::new();
        for kind in [PhaseKind::Write, PhaseKind::Read] {
            let plan = PhasePlan {
                kind,
                users: case.users,
                ramp: Duration::from_secs_f64(case.ramp_s),
                key_prefix: format!("run{}:", run + 1),
                ..base.clone()
            };
            let s = measured_phase(&plan, &mut probe, run, args.runs).await?;
            eprintln!(
                "{}, run {}, {kind:?}: {} users, avg {:.2} ms, max {:.2} ms, {:.1} % errors, {:.1}/s",
                case.label(),
                run + 1,
                s.count,
                s.avg_ms,
                s.max_ms,
                s.error_pct,
                s.throughput_per_s
            );
            pair.push(s);
        }
        runs.push(pair);
    }
    Ok(CaseResult::new(*case, probe.nodes(), runs))
}

/// One measured phase with the nodes' counters and CPU read around it.
async fn measured_phase(
    plan: &PhasePlan,
    probe: &mut NodeProbe,
    run: u32,
    runs: u32,
) -> Result<PhaseSummary, CaseError> {
    let before = probe.read(&PROBED).await?;
    let bench_before = cpu_time(std::process::id()).map_err(CaseError::BenchCpu)?;
    let done = Arc::new(AtomicU64::new(0));
    let bar = Ticker::start(
        format!("{:?} run {}/{runs}", plan.kind, run + 1),
        Length::Ops(u64::from(plan.users)),
        done.clone(),
    );
    let started = Instant::now();
    let result = run_phase(plan, done).await;
    let wall = started.elapsed();
    bar.finish();
    let bench_cpu = cpu_time(std::process::id())
        .map_err(CaseError::BenchCpu)?
        .saturating_sub(bench_before);
    let nodes = probe.read(&PROBED).await?.since(&before);
    Ok(PhaseSummary::new(&result, wall, &nodes, bench_cpu))
}
