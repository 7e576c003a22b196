//! [`run_query`]: start and load both systems once (Sluice: KV sets, then its two indexes;
//! PostgreSQL: COPY, its two indexes, VACUUM ANALYZE), then for each run each system's
//! phases in turn, the order reversed on odd runs: point lookups, range pages, point lookups
//! under a write load, and (Sluice) index freshness at each rate. Then medians, report.md and
//! results.json. Both systems are stopped whatever happened.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::harness::pg_peer::PgServer;
use crate::harness::settle::wait_quiet;
use crate::load::latency::format_us;
use crate::load::workload::Rng;
use crate::report::progress::{Length, Ticker};
use crate::report::scenario_out::{out_dir, save_config};
use crate::report::table::thousands;
use crate::scenarios::query::args::QueryArgs;
use crate::scenarios::query::closed_loop::{run_clients, LoopPlan, Measured, QueryClient, Shape};
use crate::scenarios::query::docs::{DocSet, Revision};
use crate::scenarios::query::error::RunQueryError;
use crate::scenarios::query::freshness::{probe, ProbePlan, VISIBLE_TIMEOUT};
use crate::scenarios::query::pg_side::{self, PgSystemError};
use crate::scenarios::query::report::{FreshRun, Phase, PhaseRun, QueryReport, Setup, System};
use crate::scenarios::query::sluice_side::{KvWriter, SluiceSide, SluiceSystemError};
use crate::scenarios::query::writer::{BatchWriter, ItemOf, WriteOutcome, WritePlan, Writers};

/// Before each system's phases, wait this long at most for the box to quiet down.
const QUIET_MAX: Duration = Duration::from_secs(15);
/// The phases without writes, in order.
const READ_PHASES: [(Phase, Shape); 3] = [
    (Phase::Point, Shape::Point),
    (Phase::Range, Shape::Range),
    (Phase::Bounded, Shape::Bounded),
];
/// The freshness phase runs at most this long past its length to collect its samples.
const FRESHNESS_OVERRUN: Duration = Duration::from_secs(60);

pub async fn run_query(given: QueryArgs) -> Result<(), RunQueryError> {
    let args = given.effective();
    args.validate()?;
    let out = out_dir(args.out.as_deref(), "query")?;
    save_config(&out, "query", &given)?;
    let set = DocSet::new(args.seed, args.docs);
    let mut report = QueryReport {
        scenario: "query",
        args: args.clone(),
        setup: Vec::new(),
        phases: Vec::new(),
        freshness: Vec::new(),
    };

    eprintln!(
        "starting sluice server and loading {} documents",
        thousands(args.docs as f64)
    );
    let sluice = SluiceSide::start(&args).await?;
    let mut pg = None;
    let outcome = async {
        report.setup.push(setup_sluice(&sluice, &set).await?);
        if !args.no_pg {
            eprintln!("starting PostgreSQL and loading the same documents");
            let server = PgServer::start(&args.pg_bin, args.pg_shared_buffers_mb).await?;
            let server = pg.insert(server);
            report.setup.push(setup_pg(server, &set).await?);
        }
        let mut systems = vec![System::Sluice];
        if pg.is_some() {
            systems.push(System::Postgres);
        }
        for run in 0..args.runs {
            let mut order = systems.clone();
            if run % 2 == 1 {
                order.reverse();
            }
            for system in order {
                quiet(&sluice).await?;
                match (system, pg.as_ref()) {
                    (System::Sluice, _) => {
                        sluice_run(&sluice, &set, &args, run, &mut report)
                            .await
                            .map_err(|source| RunQueryError::SluiceRun {
                                run: run + 1,
                                source,
                            })?;
                    }
                    (System::Postgres, Some(server)) => {
                        pg_run(server, &set, &args, run, &mut report)
                            .await
                            .map_err(|source| RunQueryError::PgRun {
                                run: run + 1,
                                source,
                            })?;
                    }
                    (System::Postgres, None) => {}
                }
            }
        }
        Ok::<(), RunQueryError>(())
    }
    .await;
    let failed = outcome.is_err();
    let keep = |name: &str| failed.then(|| out.join(name));
    sluice.stop(&out.join("sluice-server.log")).await?;
    if let Some(server) = pg {
        server.stop(keep("postgres.log").as_deref()).await?;
    }
    // What was measured before a failure is still written.
    report.write(&out)?;
    outcome?;
    print!("{}", report.query_table().to_text());
    if let Some(t) = report.ratio_table() {
        println!("Sluice ÷ PostgreSQL (medians):");
        print!("{}", t.to_text());
    }
    if !report.freshness.is_empty() {
        println!("index freshness (Sluice, ack → visible):");
        print!("{}", report.freshness_table().to_text());
    }
    print!("{}", report.setup_table().to_text());
    eprintln!("wrote {}/report.md and results.json", out.display());
    Ok(())
}

async fn setup_sluice(sluice: &SluiceSide, set: &DocSet) -> Result<Setup, RunQueryError> {
    let done = Arc::new(AtomicU64::new(0));
    let bar = Ticker::start("sluice load".into(), Length::Ops(set.len()), done.clone());
    let start = Instant::now();
    let loaded = sluice.load(set, &done).await;
    bar.finish();
    loaded.map_err(RunQueryError::LoadSluice)?;
    let load = start.elapsed();
    eprintln!("sluice: loaded in {load:.1?}; creating the indexes");
    let indexes = sluice.create_indexes().await?;
    for (name, took) in &indexes {
        eprintln!("sluice: {name} online after {took:.1?}");
    }
    Ok(Setup {
        system: System::Sluice,
        load_s: load.as_secs_f64(),
        docs_per_s: set.len() as f64 / load.as_secs_f64().max(1e-9),
        indexes: indexes
            .into_iter()
            .map(|(n, d)| (n, d.as_secs_f64()))
            .collect(),
        analyze_s: None,
    })
}

async fn setup_pg(pg: &PgServer, set: &DocSet) -> Result<Setup, RunQueryError> {
    let done = Arc::new(AtomicU64::new(0));
    let bar = Ticker::start("postgres COPY".into(), Length::Ops(set.len()), done.clone());
    let loaded = pg_side::load(pg, set, &done).await;
    bar.finish();
    let s = loaded.map_err(|source| RunQueryError::LoadPg {
        log: pg.log(),
        source,
    })?;
    eprintln!(
        "postgres: COPY in {:.1?}, indexes {:?}, VACUUM ANALYZE {:.1?}",
        s.load, s.indexes, s.analyze
    );
    Ok(Setup {
        system: System::Postgres,
        load_s: s.load.as_secs_f64(),
        docs_per_s: set.len() as f64 / s.load.as_secs_f64().max(1e-9),
        indexes: s
            .indexes
            .into_iter()
            .map(|(n, d)| (n, d.as_secs_f64()))
            .collect(),
        analyze_s: Some(s.analyze.as_secs_f64()),
    })
}

/// Waits (bounded) until Sluice is idle and the rest of the box (PostgreSQL among it) is
/// quiet, so one system's leftovers (flushing, compaction, autovacuum) do not land in the
/// other's phase.
async fn quiet(sluice: &SluiceSide) -> Result<(), RunQueryError> {
    if let Some(pid) = sluice.pid() {
        wait_quiet(pid, QUIET_MAX).await?;
    }
    Ok(())
}

async fn sluice_run(
    sluice: &SluiceSide,
    set: &DocSet,
    args: &QueryArgs,
    run: u32,
    report: &mut QueryReport,
) -> Result<(), SluiceSystemError> {
    for (phase, shape) in READ_PHASES {
        let clients = sluice.clients(args.clients, false, args.adhoc).await?;
        let m = timed(clients, System::Sluice, phase, shape, set, args, run).await;
        report
            .phases
            .push(phase_run(System::Sluice, phase, run, &m, None));
    }
    let writers = sluice
        .kv(args.writer_connections)
        .await?
        .into_iter()
        .map(KvWriter)
        .collect();
    let clients = sluice.clients(args.clients, true, args.adhoc).await?;
    let (m, w) = under_writes(clients, writers, System::Sluice, set, args, run).await;
    report.phases.push(phase_run(
        System::Sluice,
        Phase::PointUnderWrites,
        run,
        &m,
        Some(&w),
    ));
    for (r, &rate) in (0u64..).zip(&args.freshness_rates) {
        let f = freshness(sluice, set, args, run, r, rate).await?;
        report.freshness.push(f);
    }
    Ok(())
}

async fn pg_run(
    pg: &PgServer,
    set: &DocSet,
    args: &QueryArgs,
    run: u32,
    report: &mut QueryReport,
) -> Result<(), PgSystemError> {
    for (phase, shape) in READ_PHASES {
        let clients = pg_side::clients(pg, args.clients).await?;
        let m = timed(clients, System::Postgres, phase, shape, set, args, run).await;
        report
            .phases
            .push(phase_run(System::Postgres, phase, run, &m, None));
    }
    let writers = pg_side::writers(pg, args.writer_connections).await?;
    let clients = pg_side::clients(pg, args.clients).await?;
    let (m, w) = under_writes(clients, writers, System::Postgres, set, args, run).await;
    report.phases.push(phase_run(
        System::Postgres,
        Phase::PointUnderWrites,
        run,
        &m,
        Some(&w),
    ));
    pg_side::vacuum(pg).await?;
    Ok(())
}

/// One closed-loop phase with a progress bar; says on stderr what it measured.
async fn timed<C: QueryClient>(
    clients: Vec<C>,
    system: System,
    phase: Phase,
    shape: Shape,
    set: &DocSet,
    args: &QueryArgs,
    run: u32,
) -> Measured {
    let done = Arc::new(AtomicU64::new(0));
    let label = format!("{} {:?}", system.label(), phase);
    let length = args.warmup() + args.duration();
    let bar = Ticker::start(label.clone(), Length::Time(length), done.clone());
    let start = Instant::now();
    let plan = LoopPlan {
        shape,
        set: *set,
        seed: args.seed ^ u64::from(run).wrapping_mul(0x1000_0001) ^ phase as u64,
        measure_from: start + args.warmup(),
        until: start + length,
        done,
    };
    let m = run_clients(clients, &plan).await;
    bar.finish();
    let s = m.latency.summary();
    eprintln!(
        "{label}, run {}: {:.0} queries/s, p50 {}, p99 {}, {} error(s){}",
        run + 1,
        m.qps(),
        format_us(s.p50_us),
        format_us(s.p99_us),
        m.errors,
        m.first_error
            .as_deref()
            .map_or(String::new(), |e| format!(" (first: {e})")),
    );
    m
}

/// The point phase while a writer updates random base documents at `--write-rate`.
async fn under_writes<C: QueryClient, W: BatchWriter>(
    clients: Vec<C>,
    writers: Vec<W>,
    system: System,
    set: &DocSet,
    args: &QueryArgs,
    run: u32,
) -> (Measured, WriteOutcome) {
    let start = Instant::now();
    let salt = args.seed ^ 0x5eed ^ u64::from(run);
    let rev_base = (u64::from(run) + 1) * 1_000_000_000;
    let items = *set;
    let item: ItemOf = Arc::new(move |slot| {
        let i = items.pick(Rng::new(slot ^ salt).next_u64());
        (items.key(i), items.doc(i, Revision(rev_base + slot)))
    });
    let plan = WritePlan {
        rate_per_s: args.write_rate as f64,
        start,
        measure_from: start + args.warmup(),
        until: start + args.warmup() + args.duration(),
        stop: Arc::new(AtomicBool::new(false)),
        item,
    };
    let running = Writers::start(writers, &plan);
    let m = timed(
        clients,
        system,
        Phase::PointUnderWrites,
        Shape::Point,
        set,
        args,
        run,
    )
    .await;
    let w = running.finish().await;
    eprintln!(
        "  writer: {:.0} writes/s (target {}), {} error(s){}",
        w.rate(),
        args.write_rate,
        w.errors,
        w.first_error
            .as_deref()
            .map_or(String::new(), |e| format!(" (first: {e})")),
    );
    (m, w)
}

/// One freshness rate: the churn writer at `rate` and the prober, until the prober has its
/// samples (or its overrun ends).
async fn freshness(
    sluice: &SluiceSide,
    set: &DocSet,
    args: &QueryArgs,
    run: u32,
    r: u64,
    rate: u64,
) -> Result<FreshRun, SluiceSystemError> {
    let writers: Vec<KvWriter> = sluice
        .kv(args.writer_connections)
        .await?
        .into_iter()
        .map(KvWriter)
        .collect();
    let mut kv = sluice
        .kv(1)
        .await?
        .pop()
        .ok_or(SluiceSystemError::NoProber)?;
    let mut n1ql = sluice.n1ql(VISIBLE_TIMEOUT).await?;
    let start = Instant::now();
    let measure_from = start + args.warmup();
    let until = measure_from + args.duration();
    let hard_until = until + FRESHNESS_OVERRUN;
    let seq_base = (u64::from(run) * 16 + r + 1) * 10_000_000_000;
    let (items, churn) = (*set, args.churn_docs);
    let item: ItemOf = Arc::new(move |slot| items.churn(slot % churn, seq_base + slot));
    let plan = WritePlan {
        rate_per_s: rate as f64,
        start,
        measure_from,
        until: hard_until,
        stop: Arc::new(AtomicBool::new(false)),
        item,
    };
    let done = Arc::new(AtomicU64::new(0));
    let label = format!("Sluice freshness {rate}/s");
    let bar = Ticker::start(label.clone(), Length::Time(until - start), done);
    let running = Writers::start(writers, &plan);
    let probe_plan = ProbePlan {
        tag: format!("r{run}x{r}"),
        measure_from,
        until,
        min_samples: args.freshness_samples,
        hard_until,
    };
    let p = probe(&mut kv, &mut n1ql, &probe_plan).await;
    let w = running.finish().await;
    bar.finish();
    let s = p.lag.summary();
    eprintln!(
        "{label}, run {}: achieved {:.0} writes/s, {} samples, lag p50 {}, p99 {}, {} timeout(s), \
         {} error(s){}",
        run + 1,
        w.rate(),
        p.samples,
        format_us(s.p50_us),
        format_us(s.p99_us),
        p.timeouts,
        p.errors + w.errors,
        p.first_error
            .as_deref()
            .or(w.first_error.as_deref())
            .map_or(String::new(), |e| format!(" (first: {e})")),
    );
    Ok(FreshRun {
        run,
        target_writes_per_s: rate,
        achieved_writes_per_s: w.rate(),
        samples: p.samples,
        lag: s,
        timeouts: p.timeouts,
        errors: p.errors + w.errors,
        first_error: p.first_error.or(w.first_error),
    })
}

fn phase_run(
    system: System,
    phase: Phase,
    run: u32,
    m: &Measured,
    w: Option<&WriteOutcome>,
) -> PhaseRun {
    PhaseRun {
        system,
        phase,
        run,
        qps: m.qps(),
        latency: m.latency.summary(),
        errors: m.errors,
        first_error: m.first_error.clone(),
        writes_per_s: w.map(WriteOutcome::rate),
        write_errors: w.map_or(0, |w| w.errors),
    }
}
