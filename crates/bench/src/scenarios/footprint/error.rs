//! What `sluice bench footprint` fails with: [`RunFootprintError`] at the top, [`RowError`]
//! for the step of one row.

use sluice_client::ClientError;

use crate::error::BenchError;
use crate::report::scenario_out::OutputError;
use crate::scenarios::footprint::args::FootprintArgsError;

#[derive(Debug, thiserror::Error)]
pub enum RunFootprintError {
    #[error(transparent)]
    Args(#[from] FootprintArgsError),
    /// The output directory, the saved options or the report.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// A Sluice row; `label` names its mode, bucket type and quota.
    #[error("{label}")]
    Row {
        label: String,
        #[source]
        source: RowError,
    },
    #[error("memcached -m {quota_mb}")]
    Memcached {
        quota_mb: u64,
        #[source]
        source: RowError,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum RowError {
    /// Opening the in-process bucket, connecting, reading STAT, or stopping a server.
    #[error(transparent)]
    Bench(#[from] BenchError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("reading the RSS of pid {pid}")]
    Rss {
        pid: u32,
        #[source]
        source: std::io::Error,
    },
    #[error("storing the items")]
    Store(#[source] BenchError),
    #[error("shutting the in-process bucket down")]
    Shutdown(#[source] sluice_engine::EngineError),
    #[error("in-process load thread")]
    InProcessThread(#[source] tokio::task::JoinError),
    #[error("starting sluice server")]
    StartSluice(#[source] BenchError),
    #[error("starting memcached")]
    StartMemcached(#[source] BenchError),
    #[error("the bench started this server, so it has a pid")]
    NoPid,
    /// A timed phase (`updates` or `GETs`) on `target`.
    #[error("{target} {phase}")]
    Phase {
        target: &'static str,
        phase: &'static str,
        #[source]
        source: BenchError,
    },
    #[error("STAT has no mem_used")]
    NoMemUsed,
    #[error("memcached's STAT has no bytes")]
    NoBytes,
}
