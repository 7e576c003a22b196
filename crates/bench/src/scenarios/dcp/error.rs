//! What `sluice bench dcp` fails with: [`RunDcpError`] at the top, [`SetupError`] for the
//! step of one bucket setup; the measurements' own [`BenchError`] is kept as the source.

use std::path::PathBuf;

use crate::error::BenchError;
use crate::report::scenario_out::OutputError;

#[derive(Debug, thiserror::Error)]
pub enum RunDcpError {
    /// Saving the options to `--out`.
    #[error(transparent)]
    Config(#[from] OutputError),
    #[error("the {setup} setup")]
    Setup {
        setup: &'static str,
        #[source]
        source: SetupError,
    },
    #[error("writing results to {}", dir.display())]
    WriteResults {
        dir: PathBuf,
        #[source]
        source: OutputError,
    },
}

/// One setup's step that failed; runs are counted from 1.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("starting and loading the server")]
    Load(#[source] BenchError),
    #[error("drain run {run}")]
    Drain {
        run: u32,
        #[source]
        source: BenchError,
    },
    #[error("catch-up run {run}")]
    CatchUp {
        run: u32,
        #[source]
        source: BenchError,
    },
    #[error("write run {run}")]
    Write {
        run: u32,
        #[source]
        source: BenchError,
    },
    #[error("stopping the server")]
    Stop(#[source] BenchError),
}
