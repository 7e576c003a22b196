//! [`run_kv`]: the top level. Starts (or reaches) the targets, connects and prefills them,
//! runs the timed load (alternating targets run by run, as the baselines recommend), stops
//! what it started and reports. Its failures are [`RunKvError`]s, named by the step.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use crate::load::connect::connect_all;
use crate::load::in_process::{run_all, InProcessSpec};
use crate::load::measure::{self, RunResult, RunSpec};
use crate::load::prefill::prefill;
use crate::load::workload::Workload;
use crate::report::progress::{Length, Ticker};
use crate::scenarios::kv::args::{KvArgs, MixArg, Peer};
use crate::scenarios::kv::error::RunKvError;
use crate::scenarios::kv::report::{Ratios, Report, TargetReport};
use crate::scenarios::kv::targets;

/// Runs `sluice bench kv` and prints the table (and writes `--out`).
pub async fn run_kv(args: KvArgs) -> Result<(), RunKvError> {
    if let Some(dir) = &args.out {
        crate::report::scenario_out::save_config(dir, "kv", &args)?;
    }
    if args.mix == MixArg::Subdoc
        && (args.vs.is_some() || args.target_memcached.is_some() || args.in_process)
    {
        return Err(RunKvError::SubdocNeedsNetwork);
    }
    if args.collections > 0
        && (args.vs.is_some()
            || args.target_memcached.is_some()
            || args.in_process
            || args.connect.is_some())
    {
        return Err(RunKvError::CollectionsNeedOwnServer);
    }
    let work = Arc::new(Workload::with_mix(
        args.keys,
        args.get_ratio,
        args.value_bytes,
        args.mix.mix(),
    ));
    let report = if args.in_process {
        in_process(args, work).await?
    } else {
        over_network(args, work).await?
    };
    print!("{}", report.to_text());
    if let Some(dir) = &report.settings.out {
        report
            .write(dir)
            .map_err(|source| RunKvError::WriteResults {
                dir: dir.clone(),
                source,
            })?;
        eprintln!("wrote {0}/results.json and {0}/report.md", dir.display());
    }
    Ok(())
}

async fn over_network(args: KvArgs, mut work: Arc<Workload>) -> Result<Report, RunKvError> {
    let mut targets = Vec::new();
    if let Some(addr) = &args.target_memcached {
        targets.push(targets::existing_memcached(addr).map_err(RunKvError::TargetMemcached)?);
    } else {
        targets.push(
            targets::sluice(&args)
                .await
                .map_err(RunKvError::StartSluice)?,
        );
        if args.vs == Some(Peer::Memcached) {
            targets.push(
                targets::start_memcached(&args)
                    .await
                    .map_err(RunKvError::StartMemcached)?,
            );
        }
    }

    if args.collections > 0 {
        let sluice = &mut targets[0];
        let admin = sluice.admin.ok_or(RunKvError::NoAdmin)?;
        let who = sluice_client::Credentials::new(&args.login.username, &args.login.password);
        let ids = super::collections::make(admin, &who, &args.login.bucket, args.collections)
            .await
            .map_err(RunKvError::Collections)?;
        sluice
            .options
            .features
            .push(sluice_proto::Feature::Collections);
        work = Arc::new(Workload {
            collections: ids,
            ..(*work).clone()
        });
    }

    let mut pools = Vec::new();
    for t in &targets {
        let clients = connect_all(t.addr, &t.options, args.connections)
            .await
            .map_err(|source| RunKvError::Connect {
                name: t.name,
                addr: t.addr,
                source,
            })?;
        let completed = Arc::new(AtomicU64::new(0));
        let ticker = Ticker::start(
            format!("{} prefill", t.name),
            Length::Ops(args.keys),
            completed.clone(),
        );
        let filled = prefill(clients, work.clone(), completed).await;
        ticker.finish();
        pools.push(filled.map_err(|source| RunKvError::Prefill {
            name: t.name,
            source,
        })?);
    }

    let spec = RunSpec {
        pipeline: args.pipeline as usize,
        rate_ops_per_s: args.is_open_loop().then_some(args.rate_ops_per_s),
        warmup: Duration::from_secs(args.warmup_s),
        duration: Duration::from_secs(args.duration_s),
    };
    let mut results: Vec<Vec<RunResult>> = targets.iter().map(|_| Vec::new()).collect();
    for run in 0..args.runs {
        for (i, t) in targets.iter().enumerate() {
            let completed = Arc::new(AtomicU64::new(0));
            let ticker = Ticker::start(
                format!("{} run {}/{}", t.name, run + 1, args.runs),
                Length::Time(spec.warmup + spec.duration),
                completed.clone(),
            );
            let clients = std::mem::take(&mut pools[i]);
            let outcome =
                measure::run(clients, work.clone(), spec, u64::from(run), completed).await;
            ticker.finish();
            let (clients, result) = outcome.map_err(|source| RunKvError::Run {
                name: t.name,
                run: run + 1,
                source,
            })?;
            pools[i] = clients;
            results[i].push(result);
        }
    }
    drop(pools);

    let secs = args.duration_s as f64;
    let reports: Vec<TargetReport> = targets
        .iter()
        .zip(results)
        .map(|(t, runs)| TargetReport::new(t.name, t.addr.to_string(), runs, secs))
        .collect();
    let ratios = match reports.as_slice() {
        [sluice, peer] => Some(Ratios::of(&sluice.median, &peer.median, peer.name)),
        _ => None,
    };
    for t in targets {
        let name = t.name;
        t.stop()
            .await
            .map_err(|source| RunKvError::Stop { name, source })?;
    }
    Ok(Report {
        mode: if args.is_open_loop() {
            "open-loop"
        } else {
            "closed-loop"
        },
        settings: args,
        targets: reports,
        ratios,
        in_process: Vec::new(),
    })
}

async fn in_process(args: KvArgs, work: Arc<Workload>) -> Result<Report, RunKvError> {
    let threads = match args.threads {
        Some(t) => t as usize,
        None => std::thread::available_parallelism().map_or(2, |n| n.get()),
    };
    let completed = Arc::new(AtomicU64::new(0));
    let spec = InProcessSpec {
        completed: completed.clone(),
        threads,
        quota_bytes: args.memory_quota_mb * 1024 * 1024,
        num_vbuckets: args.vbuckets,
        warmup: Duration::from_secs(args.warmup_s),
        duration: Duration::from_secs(args.duration_s),
        runs: args.runs,
    };
    // Both bucket types, every run: the bar's length (prefill is not timed, so it may run over).
    let total = 2 * args.runs * (spec.warmup + spec.duration);
    let ticker = Ticker::start("in-process".to_string(), Length::Time(total), completed);
    let outcome = tokio::task::spawn_blocking(move || run_all(&spec, &work)).await;
    ticker.finish();
    let results = outcome
        .map_err(RunKvError::InProcessThread)?
        .map_err(RunKvError::InProcessLoad)?;
    Ok(Report {
        mode: "in-process",
        settings: args,
        targets: Vec::new(),
        ratios: None,
        in_process: results,
    })
}
