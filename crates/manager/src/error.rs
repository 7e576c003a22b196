//! Why a node did not start, or did not stop cleanly.

use crate::membership_error::MembershipError;
use sluice_server::OpenError;

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error("binding the node's ports: {0}")]
    Bind(#[source] std::io::Error),
    #[error("starting the connection threads: {0}")]
    Serve(#[source] std::io::Error),
    #[error(transparent)]
    Membership(#[from] MembershipError),
    #[error("flushing the bucket on the way out: {0}")]
    Flush(#[source] sluice_engine::EngineError),
    #[error("a blocking task of the node panicked: {0}")]
    Task(#[from] tokio::task::JoinError),
}
