//! What `sluice bench clients` fails with: [`RunClientsError`] at the top, [`CaseError`] for
//! the step of one case.

use crate::harness::local_cluster::ClusterUpError;
use crate::harness::node_probe::ProbeError;
use crate::report::scenario_out::OutputError;
use crate::scenarios::clients::args::ClientsArgsError;

#[derive(Debug, thiserror::Error)]
pub enum RunClientsError {
    #[error(transparent)]
    Args(#[from] ClientsArgsError),
    /// The output directory, the saved options or the report.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// Case number `number` (counted from 1), `label` as the report names it.
    #[error("case {number}: {label}")]
    Case {
        number: usize,
        label: String,
        #[source]
        source: CaseError,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    /// Starting or stopping the case's cluster.
    #[error(transparent)]
    Cluster(#[from] ClusterUpError),
    /// Reading the nodes' counters and CPU.
    #[error(transparent)]
    Probe(#[from] ProbeError),
    /// `first_error` is the first failed request's error, as the phase recorded it.
    #[error("the warm-up failed: {first_error}")]
    Warmup { first_error: String },
    #[error("reading the bench's own CPU time")]
    BenchCpu(#[source] std::io::Error),
}
