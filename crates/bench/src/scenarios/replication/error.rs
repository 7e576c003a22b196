//! What `sluice bench replication` fails with: [`RunReplicationError`] at the top,
//! [`RunTargetError`] for the step of one target's run. The pieces' own errors (the
//! target's, a step's, a column's indexes or XDCR) are kept as the source.

use std::path::PathBuf;
use std::time::Duration;

use crate::harness::local_cluster::ClusterUpError;
use crate::harness::redis_peer::RedisError;
use crate::report::scenario_out::OutputError;
use crate::scenarios::replication::args::ReplArgsError;
use crate::scenarios::replication::indexes::IndexError;
use crate::scenarios::replication::step::StepError;
use crate::scenarios::replication::target::TargetError;
use crate::scenarios::replication::xdcr::XdcrError;

#[derive(Debug, thiserror::Error)]
pub enum RunReplicationError {
    #[error(transparent)]
    Args(#[from] ReplArgsError),
    /// The output directory, the saved options or the report.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// `--vs redis` without a redis-server.
    #[error(transparent)]
    Redis(#[from] RedisError),
    /// Run `run` (counted from 1) of the target labelled `target`.
    #[error("{target} (run {run})")]
    Target {
        target: String,
        run: u32,
        #[source]
        source: RunTargetError,
    },
}

/// One target's run; `label` names the target and column, as the report does.
#[derive(Debug, thiserror::Error)]
pub enum RunTargetError {
    /// Starting or stopping the cluster the bench started.
    #[error(transparent)]
    Cluster(#[from] ClusterUpError),
    /// Starting or stopping the Redis pair.
    #[error(transparent)]
    Redis(#[from] RedisError),
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error(transparent)]
    Step(#[from] StepError),
    #[error("no redis-server")]
    NoRedisServer,
    #[error("a step left a task holding the target")]
    TargetHeld,
    #[error("removing {}", dir.display())]
    RemoveRedisDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the replicas are still {behind} behind after {waited:?}")]
    NotCaughtUp { behind: f64, waited: Duration },
    #[error("{label}: defining the indexes")]
    DefineIndexes {
        label: String,
        #[source]
        source: IndexError,
    },
    #[error("{label}: dropping the indexes")]
    DropIndexes {
        label: String,
        #[source]
        source: IndexError,
    },
    #[error("{label}: setting up XDCR")]
    SetUpXdcr {
        label: String,
        #[source]
        source: XdcrError,
    },
    #[error("{label}: reading the XDCR figures")]
    XdcrFigures {
        label: String,
        #[source]
        source: XdcrError,
    },
    #[error("{label}: stopping XDCR")]
    StopXdcr {
        label: String,
        #[source]
        source: XdcrError,
    },
}
