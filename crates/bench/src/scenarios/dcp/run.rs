//! [`run_dcp`]: `sluice bench dcp` from the top. For each bucket setup: a fresh server,
//! loaded and settled; then the drain runs, the catch-up runs (on the chosen setup), and
//! last the write-throughput runs (they rewrite the documents, so they come after every
//! stream has seen the data as loaded). Its failures are [`RunDcpError`]s, named by the step.

use crate::scenarios::dcp::args::{DcpArgs, Setup};
use crate::scenarios::dcp::bucket_setup::LoadedBucket;
use crate::scenarios::dcp::catch_up::catch_up_once;
use crate::scenarios::dcp::drain::drain_once;
use crate::scenarios::dcp::error::{RunDcpError, SetupError};
use crate::scenarios::dcp::report::{DcpReport, SetupReport};
use crate::scenarios::dcp::write_rate::write_once;

/// Runs `sluice bench dcp` and prints the tables (and writes `--out`).
pub async fn run_dcp(args: DcpArgs) -> Result<(), RunDcpError> {
    if let Some(dir) = &args.out {
        crate::report::scenario_out::save_config(dir, "dcp", &args)?;
    }
    let mut setups = Vec::new();
    for setup in args.setups() {
        setups.push(
            run_setup(setup, &args)
                .await
                .map_err(|source| RunDcpError::Setup {
                    setup: setup.as_str(),
                    source,
                })?,
        );
    }
    let report = DcpReport {
        settings: args,
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        setups,
    };
    print!("{}", report.to_text());
    if let Some(dir) = &report.settings.out {
        report
            .write(dir)
            .map_err(|source| RunDcpError::WriteResults {
                dir: dir.clone(),
                source,
            })?;
        eprintln!("wrote {0}/results.json and {0}/report.md", dir.display());
    }
    Ok(())
}

async fn run_setup(setup: Setup, args: &DcpArgs) -> Result<SetupReport, SetupError> {
    let mut bucket = LoadedBucket::load(setup, args)
        .await
        .map_err(SetupError::Load)?;
    let (mut drains, mut writes, mut catch_ups) = (Vec::new(), Vec::new(), Vec::new());
    if args.drains() {
        for run in 0..args.runs {
            let d =
                drain_once(&mut bucket, args, run)
                    .await
                    .map_err(|source| SetupError::Drain {
                        run: run + 1,
                        source,
                    })?;
            drains.push(d);
        }
    }
    if args.catches_up() && setup == args.catch_up_setup {
        for run in 0..args.runs {
            let c = catch_up_once(&mut bucket, args, run)
                .await
                .map_err(|source| SetupError::CatchUp {
                    run: run + 1,
                    source,
                })?;
            catch_ups.push(c);
        }
    }
    if args.drains() {
        for run in 0..args.runs {
            let w =
                write_once(&mut bucket, args, run)
                    .await
                    .map_err(|source| SetupError::Write {
                        run: run + 1,
                        source,
                    })?;
            writes.push(w);
        }
    }
    let (shape, load) = (bucket.shape.clone(), bucket.load.clone());
    let log = args
        .out
        .as_ref()
        .map(|d| d.join(format!("server-{}.log", setup.as_str())));
    bucket
        .stop(log.as_deref())
        .await
        .map_err(SetupError::Stop)?;
    Ok(SetupReport::new(shape, load, drains, writes, catch_ups))
}
