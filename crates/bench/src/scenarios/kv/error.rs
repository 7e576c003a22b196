//! [`RunKvError`]: what `sluice bench kv` fails with, named by the step it was at; the load's
//! own [`BenchError`] is kept as the source.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::error::BenchError;
use crate::report::scenario_out::OutputError;

#[derive(Debug, thiserror::Error)]
pub enum RunKvError {
    /// Saving the options to `--out`.
    #[error(transparent)]
    Config(#[from] OutputError),
    #[error(
        "--mix subdoc needs Sluice over the network: memcached and --in-process have no \
         sub-document commands (compare with --mix json instead)"
    )]
    SubdocNeedsNetwork,
    #[error(
        "--collections needs a Sluice the bench starts: it makes the collections over the \
         server's admin port, and memcached has none"
    )]
    CollectionsNeedOwnServer,
    /// `--target-memcached` names no usable address.
    #[error(transparent)]
    TargetMemcached(BenchError),
    #[error("starting or reaching the Sluice server")]
    StartSluice(#[source] BenchError),
    #[error("starting memcached for --vs memcached")]
    StartMemcached(#[source] BenchError),
    #[error("the started Sluice has an admin address")]
    NoAdmin,
    #[error("making the collections")]
    Collections(#[source] BenchError),
    #[error("connecting to {name} at {addr}")]
    Connect {
        name: &'static str,
        addr: SocketAddr,
        #[source]
        source: BenchError,
    },
    #[error("prefilling {name}")]
    Prefill {
        name: &'static str,
        #[source]
        source: BenchError,
    },
    /// Run `run` (counted from 1) on target `name`.
    #[error("{name} run {run}")]
    Run {
        name: &'static str,
        run: u32,
        #[source]
        source: BenchError,
    },
    #[error("stopping {name}")]
    Stop {
        name: &'static str,
        #[source]
        source: BenchError,
    },
    #[error("in-process load thread")]
    InProcessThread(#[source] tokio::task::JoinError),
    #[error("in-process engine load")]
    InProcessLoad(#[source] BenchError),
    #[error("writing results to {}", dir.display())]
    WriteResults {
        dir: PathBuf,
        #[source]
        source: OutputError,
    },
}
