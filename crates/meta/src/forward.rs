//! Running an operation on the leader: locally when this node leads, otherwise forwarded over
//! HTTP to the leader's `/internal/meta/...` route, until it is done or the request's time
//! (`MetaConfig::request_timeout`) runs out.
//!
//! A forwarded request is retried only when it cannot have been acted on: the leader could
//! not be dialled, answered 503 before doing anything, or said it is not the leader any more.
//! Any other failure after the request was sent leaves its outcome unknown and is returned.

use crate::config::LEADER_POLL_INTERVAL;
use crate::error::MetaError;
use crate::network::client::{HttpClient, HttpError};
use crate::network::member_addr;
use crate::node::{millis, MetaNode};
use crate::types::{raft_id, Peer};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sluice_cluster::NodeId;
use std::future::Future;
use std::time::{Duration, Instant};

pub(crate) const PATH_PROPOSE: &str = "/internal/meta/propose";
pub(crate) const PATH_ADD_NODE: &str = "/internal/meta/add-node";
pub(crate) const PATH_REMOVE_NODE: &str = "/internal/meta/remove-node";

/// A forwarded operation and how long the leader may work on it.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Forward<T> {
    pub(crate) op: T,
    pub(crate) timeout_ms: u64,
}

/// The body of `/internal/meta/add-node`.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct AddNode {
    pub(crate) id: NodeId,
    pub(crate) admin_addr: String,
}

/// The body of `/internal/meta/remove-node`.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct RemoveNode {
    pub(crate) id: NodeId,
}

/// The leader's answer to a forwarded operation.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum ForwardReply<T> {
    Done(T),
    /// The node asked is not (or no longer) the leader; nothing was done.
    NotLeader,
    Failed(MetaError),
}

/// How a local attempt on the (presumed) leader ended, when it did not succeed.
#[derive(Debug)]
pub(crate) enum LocalError {
    /// This node is not the leader; nothing was done.
    NotLeader,
    Failed(MetaError),
}

impl<T> From<Result<T, LocalError>> for ForwardReply<T> {
    fn from(result: Result<T, LocalError>) -> Self {
        match result {
            Ok(t) => ForwardReply::Done(t),
            Err(LocalError::NotLeader) => ForwardReply::NotLeader,
            Err(LocalError::Failed(e)) => ForwardReply::Failed(e),
        }
    }
}

enum Leader {
    Me,
    /// Its Raft id and membership entry.
    Other(u64, Peer),
    Unknown,
}

impl MetaNode {
    fn current_leader(&self) -> Leader {
        let metrics = self.raft().metrics();
        let m = metrics.borrow();
        match m.current_leader {
            None => Leader::Unknown,
            Some(id) if id == raft_id(self.id()) => Leader::Me,
            Some(id) => match m.membership_config.membership().get_node(&id) {
                Some(peer) => Leader::Other(id, peer.clone()),
                None => Leader::Unknown,
            },
        }
    }

    /// Runs `local` here if this node leads, or forwards `op` to `path` on the leader; retries
    /// as the module comment says until `request_timeout` has passed.
    pub(crate) async fn on_leader<Op, T, F, Fut>(
        &self,
        path: &'static str,
        op: Op,
        local: F,
    ) -> Result<T, MetaError>
    where
        Op: Serialize,
        T: DeserializeOwned,
        F: Fn(Duration) -> Fut,
        Fut: Future<Output = Result<T, LocalError>>,
    {
        let started = Instant::now();
        let deadline = started + self.config().request_timeout;
        let timed_out = || MetaError::Timeout {
            waited_ms: millis(started.elapsed()),
        };
        loop {
            self.check_open()?;
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(timed_out());
            }
            match self.current_leader() {
                Leader::Me => match local(remaining).await {
                    Ok(t) => return Ok(t),
                    Err(LocalError::NotLeader) => {}
                    Err(LocalError::Failed(e)) => return Err(e),
                },
                Leader::Other(id, peer) => {
                    let dial = &self.config().dial;
                    let addr = member_addr(dial, &self.state().borrow(), id, &peer.admin_addr);
                    let mut client =
                        HttpClient::new(addr, dial.clone(), &self.config().secret.credentials());
                    let request = Forward {
                        op: &op,
                        timeout_ms: millis(remaining),
                    };
                    let answer = client.post::<_, ForwardReply<T>>(path, &request, remaining);
                    match answer.await {
                        Ok(ForwardReply::Done(t)) => return Ok(t),
                        Ok(ForwardReply::NotLeader) => {}
                        Ok(ForwardReply::Failed(e)) => return Err(e),
                        Err(HttpError::Connect { .. } | HttpError::Unavailable) => {}
                        Err(HttpError::Timeout(_)) => return Err(timed_out()),
                        Err(e) => {
                            return Err(MetaError::BadReply {
                                peer: peer.admin_addr,
                                reason: e.to_string(),
                            })
                        }
                    }
                }
                Leader::Unknown => {}
            }
            // An election is running, or the leader just changed: ask again shortly.
            let remaining = deadline.saturating_duration_since(Instant::now());
            tokio::time::sleep(remaining.min(LEADER_POLL_INTERVAL)).await;
        }
    }
}
