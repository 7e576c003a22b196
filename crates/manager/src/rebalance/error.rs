//! Why a rebalance did not start, or stopped where it stood.

use sluice_client::admin_http::AdminHttpError;
use sluice_cluster::metadata::Rejection;
use sluice_cluster::{Chain, NodeId, RebalanceError as PlanError};
use sluice_meta::MetaError;
use sluice_types::VbId;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum RebalanceError {
    #[error("a rebalance is running")]
    Running,
    #[error(
        "the cluster records a rebalance in progress (its orchestrator may have stopped): \
         POST /api/v1/cluster/rebalance/abort first"
    )]
    RecordedInProgress,
    #[error("no rebalance is recorded to resume")]
    NothingToResume,
    #[error(
        "this node does not lead the cluster metadata (any more): rebalances run on the \
         leader, which resumes a recorded one from where it stands"
    )]
    NotLeader,
    #[error("the cluster has no bucket yet")]
    NoBucket,
    #[error("the cluster has no map")]
    NoMap,
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("resizing a map to its bucket's replica count: {0}")]
    Resize(#[from] sluice_cluster::MapError),
    #[error("{0} is outside the map")]
    VbOutsideMap(VbId),
    #[error("{vb} changed under the rebalance (now {now:?}, planned from {planned:?})")]
    ChangedUnder {
        vb: VbId,
        now: Chain,
        planned: Chain,
    },
    #[error("node {0} is not in the map")]
    NodeNotInMap(NodeId),
    #[error("the cluster refused a rebalance step: {0}")]
    Refused(Rejection),
    #[error("the cluster metadata did not answer: {0}")]
    Meta(#[from] MetaError),
    #[error("map revision {rev} was not applied here in time")]
    MapNotApplied { rev: u64 },
    #[error("node {node}: {source}")]
    Http {
        node: NodeId,
        #[source]
        source: AdminHttpError,
    },
    #[error("node {node} answered {status} to {path}: {body}")]
    Answered {
        node: NodeId,
        status: u16,
        path: String,
        body: serde_json::Value,
    },
    #[error("node {node}: unexpected answer: {source}")]
    BadAnswer {
        node: NodeId,
        #[source]
        source: serde_json::Error,
    },
    #[error("{what}: not done within {after:?}")]
    Timeout { what: String, after: Duration },
}
