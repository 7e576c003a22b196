//! What `sluice bench parallel` fails with: [`RunParallelError`] at the top, [`CellsError`]
//! for the step on one cluster.

use sluice_client::ClusterError;

use crate::harness::local_cluster::ClusterUpError;
use crate::harness::node_probe::ProbeError;
use crate::report::scenario_out::OutputError;
use crate::scenarios::parallel::args::ParallelArgsError;

#[derive(Debug, thiserror::Error)]
pub enum RunParallelError {
    #[error(transparent)]
    Args(#[from] ParallelArgsError),
    /// The output directory, the saved options or the report.
    #[error(transparent)]
    Output(#[from] OutputError),
    #[error("{nodes} node(s)")]
    Nodes {
        nodes: u16,
        #[source]
        source: CellsError,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum CellsError {
    /// Starting or stopping the cluster.
    #[error(transparent)]
    Cluster(#[from] ClusterUpError),
    /// Reading the nodes' counters and CPU.
    #[error(transparent)]
    Probe(#[from] ProbeError),
    /// `first_error` is the first failed operation's error, as the client recorded it.
    #[error("the warm-up build failed: {first_error}")]
    Warmup { first_error: String },
    #[error("connecting client {client}")]
    Connect {
        client: u32,
        #[source]
        source: ClusterError,
    },
    #[error("a build client task failed")]
    ClientTask(#[source] tokio::task::JoinError),
}
