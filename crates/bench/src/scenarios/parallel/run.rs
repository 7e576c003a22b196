//! [`run_parallel`]: seed 004's matrix. For each node count: start a cluster (or use
//! `--connect`), warm it up with a small build, then per run and per client count: connect
//! every client, start all builds at the same instant, wait for the last to finish, and read
//! the nodes' CPU and op counters around it. Then medians, report.md and results.json.

use sluice_client::{ClusterClient, ClusterOptions};
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::harness::local_cluster::{seeds_from, LocalCluster};
use crate::harness::node_probe::NodeProbe;
use crate::report::progress::{Length, Ticker};
use crate::report::scenario_out::{out_dir, save_config};
use crate::scenarios::parallel::args::ParallelArgs;
use crate::scenarios::parallel::build::BuildPlan;
use crate::scenarios::parallel::client::{run_client, ClientOutcome};
use crate::scenarios::parallel::error::{CellsError, RunParallelError};
use crate::scenarios::parallel::report::{CellRun, ParallelReport};

/// The counters the nodes keep of what the clients asked, read around each cell.
pub const PROBED: [(&str, &str); 3] = [("", "cmd_get"), ("", "cmd_set"), ("", "cmd_delete")];
/// Lets every client reach the start line before the clock starts.
const START_DELAY: Duration = Duration::from_millis(50);

pub async fn run_parallel(args: ParallelArgs) -> Result<(), RunParallelError> {
    let given = args;
    let args = given.effective();
    args.validate()?;
    let out_dir = out_dir(args.out.as_deref(), "parallel")?;
    save_config(&out_dir, "parallel", &given)?;
    let mut cells = Vec::new();
    for &nodes in &args.nodes {
        let log = out_dir.join(format!("cluster-{nodes}-nodes.log"));
        let runs = on_cluster(&args, nodes, &log)
            .await
            .map_err(|source| RunParallelError::Nodes { nodes, source })?;
        cells.extend(runs);
    }
    let report = ParallelReport::new(args.clone(), cells);
    report.write(&out_dir)?;
    print!("{}", report.summary_table().to_text());
    eprintln!("wrote {}/report.md and results.json", out_dir.display());
    Ok(())
}

async fn on_cluster(
    args: &ParallelArgs,
    nodes: u16,
    log: &Path,
) -> Result<Vec<CellRun>, CellsError> {
    let (cluster, seeds) = if args.cluster.connect.is_empty() {
        eprintln!("starting a {nodes}-node cluster");
        let c = LocalCluster::start(args.cluster_spec(nodes), log).await?;
        let seeds = c.seeds.clone();
        (Some(c), seeds)
    } else {
        (None, args.cluster.connect.clone())
    };
    let pids = cluster.as_ref().map_or(Vec::new(), |c| c.pids.clone());
    let outcome = cells(args, seeds, pids).await;
    if let Some(c) = cluster {
        c.stop().await?;
    }
    outcome
}

async fn cells(
    args: &ParallelArgs,
    seeds: Vec<String>,
    pids: Vec<u32>,
) -> Result<Vec<CellRun>, CellsError> {
    let mut probe = NodeProbe::connect(&seeds, &args.login, pids).await?;
    let nodes = probe.nodes();
    let warm = build(args, &seeds, 1, (args.files / 10).max(16), "warmup/").await?;
    if !warm.iter().all(|c| c.errors == 0) {
        return Err(CellsError::Warmup {
            first_error: warm
                .iter()
                .find_map(|c| c.first_error.clone())
                .unwrap_or_default(),
        });
    }
    let mut out = Vec::new();
    for run in 0..args.runs {
        for &clients in &args.clients {
            let before = probe.read(&PROBED).await?;
            let started = std::time::Instant::now();
            let prefix = format!("r{}n{nodes}c{clients}/", run + 1);
            let outcomes = build(args, &seeds, clients, args.files, &prefix).await?;
            let wall = started.elapsed();
            let delta = probe.read(&PROBED).await?.since(&before);
            let cell = CellRun::new(nodes, clients, run, &outcomes, &delta, wall);
            eprintln!(
                "{nodes} node(s), {clients} clients, run {}: {:.2} s, average sum of latency {:.2} s, {} errors",
                run + 1,
                cell.time_s,
                cell.avg_latency_sum_s,
                cell.errors
            );
            out.push(cell);
        }
    }
    Ok(out)
}

/// `clients` builds of `files` files each, started together; the clients connect first.
async fn build(
    args: &ParallelArgs,
    seeds: &[String],
    clients: u32,
    files: u32,
    prefix: &str,
) -> Result<Vec<ClientOutcome>, CellsError> {
    let login = &args.login;
    let options = ClusterOptions::sluice(&login.username, &login.password, &login.bucket);
    let mut connected = Vec::new();
    for i in 0..clients {
        let c = ClusterClient::connect(&seeds_from(seeds, i as usize), options.clone())
            .await
            .map_err(|source| CellsError::Connect { client: i, source })?;
        connected.push(c);
    }
    let plans: Vec<BuildPlan> = (0..clients)
        .map(|i| BuildPlan {
            prefix: format!("{prefix}c{i}/"),
            files,
        })
        .collect();
    let total: u64 = plans.iter().map(BuildPlan::total_ops).sum();
    let done = Arc::new(AtomicU64::new(0));
    let bar = Ticker::start(
        format!("{prefix} {clients} clients"),
        Length::Ops(total),
        done.clone(),
    );
    let start = Instant::now() + START_DELAY;
    let mut running = JoinSet::new();
    for (client, plan) in connected.into_iter().zip(plans) {
        running.spawn(run_client(
            client,
            plan,
            args.doc_bytes as usize,
            start,
            done.clone(),
        ));
    }
    let mut outcomes = Vec::new();
    while let Some(joined) = running.join_next().await {
        outcomes.push(joined.map_err(CellsError::ClientTask)?);
    }
    bar.finish();
    Ok(outcomes)
}
