//! [`RunQueryError`]: what `sluice bench query` fails with, named by the step it was at; each
//! system's own error ([`SluiceSystemError`], [`PgSystemError`]) is kept as the source.

use std::path::PathBuf;

use crate::error::BenchError;
use crate::harness::pg_peer::PgError;
use crate::report::scenario_out::OutputError;
use crate::scenarios::query::args::QueryArgsError;
use crate::scenarios::query::pg_side::PgSystemError;
use crate::scenarios::query::sluice_side::SluiceSystemError;

#[derive(Debug, thiserror::Error)]
pub enum RunQueryError {
    #[error(transparent)]
    Args(#[from] QueryArgsError),
    /// The output directory, the saved options or the report.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// Starting Sluice, creating its indexes, or stopping it.
    #[error(transparent)]
    Sluice(#[from] SluiceSystemError),
    /// Starting or stopping the PostgreSQL server.
    #[error(transparent)]
    Pg(#[from] PgError),
    #[error("loading Sluice")]
    LoadSluice(#[source] SluiceSystemError),
    #[error("loading PostgreSQL (its log: {})", log.display())]
    LoadPg {
        log: PathBuf,
        #[source]
        source: PgSystemError,
    },
    /// Waiting for a quiet box before a system's phases.
    #[error(transparent)]
    Quiet(#[from] BenchError),
    /// Run `run`, counted from 1.
    #[error("Sluice, run {run}")]
    SluiceRun {
        run: u32,
        #[source]
        source: SluiceSystemError,
    },
    #[error("PostgreSQL, run {run}")]
    PgRun {
        run: u32,
        #[source]
        source: PgSystemError,
    },
}
