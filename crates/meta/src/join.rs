//! Joining a cluster from outside it: a node with no Raft state asks any member for a node
//! id and the cluster secret, starts its own meta node with them, then asks the member to
//! admit it.
//!
//! Both calls are made as an administrator of the cluster (HTTP Basic, checked by the
//! server in front of these routes): the secret, which lets a node drive Raft and take
//! vbuckets over, goes only to a node someone with the administrator's password started.
//!
//! ```text
//!  joiner                                   any member (forwards to the leader)
//!    │ POST /internal/meta/join/allocate ───►  propose AllocateNodeId      → id, secret
//!    │ MetaNode::start(id, secret)  (its Raft routes are now served)
//!    │ POST /internal/meta/join/admit {info} ► add_node(id, admin addr)     (learner, then
//!    │                                          voters per desired_voters), propose AddNode
//!    ▼ follows the replicated state like every member
//! ```
//!
//! A member runs both steps through its own `propose` / `add_node`, which find the leader;
//! the joiner needs to know one member only. Both steps may be repeated: an allocated id
//! that never joins is simply never used, and admitting a node already admitted (with the
//! same address) changes nothing.

use crate::error::MetaError;
use crate::network::client::{HttpClient, HttpError};
use crate::node::MetaNode;
use crate::secret::ClusterSecret;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use sluice_client::net::Dial;
use sluice_client::Credentials;
use sluice_cluster::metadata::{Applied, MetaCommand, Rejection};
use sluice_cluster::{NodeId, NodeInfo};
use std::time::Duration;

pub(crate) const PATH_ALLOCATE: &str = "/internal/meta/join/allocate";
pub(crate) const PATH_ADMIT: &str = "/internal/meta/join/admit";

/// Why a join step failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum JoinError {
    #[error("the member at {member} could not be reached or answered badly: {reason}")]
    Member { member: String, reason: String },
    #[error("the cluster refused: {0}")]
    Refused(Rejection),
    #[error("the cluster's metadata failed: {0}")]
    Meta(String),
}

/// What a member answers a joiner's first call with.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Allocated {
    /// The joiner's node id.
    pub id: NodeId,
    /// The cluster's secret, for the joiner's meta node and its calls to its peers.
    pub secret: ClusterSecret,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Admit {
    info: NodeInfo,
}

/// Asks the member at `member` (an admin `host:port`; its TLS admin port when `dial` has
/// TLS), as the administrator `admin`, for a fresh node id and the cluster secret.
pub async fn allocate_node_id(
    member: &str,
    dial: &Dial,
    admin: &Credentials,
    timeout: Duration,
) -> Result<Allocated, JoinError> {
    post(member, dial, admin, PATH_ALLOCATE, &(), timeout).await
}

/// Asks the member at `member` to admit node `info` (its meta node must be running): it
/// becomes a Raft member and a `Joining` node of the cluster state.
pub async fn admit(
    member: &str,
    dial: &Dial,
    admin: &Credentials,
    info: NodeInfo,
    timeout: Duration,
) -> Result<(), JoinError> {
    post(member, dial, admin, PATH_ADMIT, &Admit { info }, timeout).await
}

async fn post<B: Serialize, T: serde::de::DeserializeOwned>(
    member: &str,
    dial: &Dial,
    admin: &Credentials,
    path: &str,
    body: &B,
    timeout: Duration,
) -> Result<T, JoinError> {
    let mut client = HttpClient::new(member.to_string(), dial.clone(), admin);
    let answer: Result<Result<T, JoinError>, HttpError> = client.post(path, body, timeout).await;
    answer.map_err(|e| JoinError::Member {
        member: member.to_string(),
        reason: e.to_string(),
    })?
}

fn meta_failed(e: MetaError) -> JoinError {
    JoinError::Meta(e.to_string())
}

pub(crate) async fn allocate_route(State(node): State<MetaNode>) -> Response {
    let Some(_permit) = node.admit_forward() else {
        return axum::http::StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    let answer: Result<Allocated, JoinError> = match node.propose(MetaCommand::AllocateNodeId).await
    {
        Ok(Ok(Applied::NodeIdAllocated { id })) => Ok(Allocated {
            id,
            secret: node.config().secret.clone(),
        }),
        Ok(Ok(other)) => Err(JoinError::Meta(format!("unexpected answer {other:?}"))),
        Ok(Err(rejection)) => Err(JoinError::Refused(rejection)),
        Err(e) => Err(meta_failed(e)),
    };
    Json(answer).into_response()
}

pub(crate) async fn admit_route(State(node): State<MetaNode>, Json(req): Json<Admit>) -> Response {
    let Some(_permit) = node.admit_forward() else {
        return axum::http::StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    let info = req.info;
    let dial = &node.config().dial;
    if dial.tls.is_some() && info.tls.is_none() {
        let why = format!(
            "this cluster encrypts its control traffic, and node {} serves no TLS: start it \
             with --cluster-encryption control, --tls-cert, --tls-key and --tls-ca",
            info.id
        );
        return Json(Err::<(), _>(JoinError::Meta(why))).into_response();
    }
    // Where the members call the joiner until the node table lists it: as they dial (a
    // node that serves no TLS was refused above, so over TLS this is its TLS port).
    let admin_addr = info.admin_addr(dial.tls.is_some());
    let answer: Result<(), JoinError> = async {
        node.add_node(info.id, &admin_addr)
            .await
            .map_err(meta_failed)?;
        let already = node
            .state()
            .borrow()
            .node(info.id)
            .is_some_and(|entry| entry.info == info);
        if already {
            return Ok(());
        }
        match node.propose(MetaCommand::AddNode { info }).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(rejection)) => Err(JoinError::Refused(rejection)),
            Err(e) => Err(meta_failed(e)),
        }
    }
    .await;
    Json(answer).into_response()
}
