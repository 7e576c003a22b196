//! The receiving side: an axum `Router` the server mounts on its admin listener.
//!
//! | route | body | answer |
//! |---|---|---|
//! | `POST /internal/raft/append` | `AppendEntriesRequest` | `Result<AppendEntriesResponse, RaftError>` |
//! | `POST /internal/raft/vote` | `VoteRequest` | `Result<VoteResponse, RaftError>` |
//! | `POST /internal/raft/snapshot` | `InstallSnapshotRequest` (one chunk) | `Result<InstallSnapshotResponse, RaftError>` |
//! | `POST /internal/meta/propose` | `{op: MetaCommand, timeout_ms}` | `ForwardReply<MetaResponse>` |
//! | `POST /internal/meta/add-node` | `{op: {id, admin_addr}, timeout_ms}` | `ForwardReply<()>` |
//! | `POST /internal/meta/remove-node` | `{op: {id}, timeout_ms}` | `ForwardReply<()>` |
//! | `POST /internal/meta/join/allocate` | `null` | `Result<Allocated, JoinError>` (any member) |
//! | `POST /internal/meta/join/admit` | `{info: NodeInfo}` | `Result<(), JoinError>` (any member) |
//!
//! All JSON. Bodies are limited to `RPC_BODY_BYTES_MAX`; requests over the concurrency limits,
//! and every request once the node is shut down (or its Raft has stopped), get 503 with no
//! body: the sender treats the node as unreachable and backs off. The forwarding routes only
//! act if this node is the leader; they never forward again. The join routes run on any
//! member, which forwards them itself (see `join`).
//!
//! These routes let whoever calls them drive this node's Raft, so the server serves them
//! only behind its authentication: the Raft and forwarding routes to the cluster identity
//! (the `ClusterSecret`), the join routes to an administrator. This router checks nothing
//! itself.

use crate::config::RPC_BODY_BYTES_MAX;
use crate::forward::{
    AddNode, Forward, ForwardReply, RemoveNode, PATH_ADD_NODE, PATH_PROPOSE, PATH_REMOVE_NODE,
};
use crate::network::{PATH_APPEND, PATH_SNAPSHOT, PATH_VOTE};
use crate::node::MetaNode;
use crate::types::TypeConfig;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use openraft::error::RaftError;
use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest, VoteRequest};
use serde::Serialize;
use sluice_cluster::metadata::MetaCommand;
use std::time::Duration;

/// The meta node's routes, ready to be merged into the admin router.
pub fn router(node: &MetaNode) -> Router {
    Router::new()
        .route(PATH_APPEND, post(append))
        .route(PATH_VOTE, post(vote))
        .route(PATH_SNAPSHOT, post(snapshot))
        .route(PATH_PROPOSE, post(propose))
        .route(PATH_ADD_NODE, post(add_node))
        .route(PATH_REMOVE_NODE, post(remove_node))
        .route(
            crate::join::PATH_ALLOCATE,
            post(crate::join::allocate_route),
        )
        .route(crate::join::PATH_ADMIT, post(crate::join::admit_route))
        .layer(DefaultBodyLimit::max(RPC_BODY_BYTES_MAX))
        .with_state(node.clone())
}

fn unavailable() -> Response {
    StatusCode::SERVICE_UNAVAILABLE.into_response()
}

/// Sends what `Raft` answered; a stopped Raft looks like a node that is down.
fn raft_answer<T: Serialize, E: Serialize>(answer: Result<T, RaftError<u64, E>>) -> Response {
    match answer {
        Err(RaftError::Fatal(_)) => unavailable(),
        answer => Json(answer).into_response(),
    }
}

async fn append(
    State(node): State<MetaNode>,
    Json(rpc): Json<AppendEntriesRequest<TypeConfig>>,
) -> Response {
    let Some(_permit) = node.admit_rpc() else {
        return unavailable();
    };
    raft_answer(node.raft().append_entries(rpc).await)
}

async fn vote(State(node): State<MetaNode>, Json(rpc): Json<VoteRequest<u64>>) -> Response {
    let Some(_permit) = node.admit_rpc() else {
        return unavailable();
    };
    raft_answer(node.raft().vote(rpc).await)
}

async fn snapshot(
    State(node): State<MetaNode>,
    Json(rpc): Json<InstallSnapshotRequest<TypeConfig>>,
) -> Response {
    let Some(_permit) = node.admit_rpc() else {
        return unavailable();
    };
    raft_answer(node.raft().install_snapshot(rpc).await)
}

/// The time a forwarded request may take here: what the sender has left, and never more
/// than this node's own limit.
fn budget(node: &MetaNode, timeout_ms: u64) -> Duration {
    Duration::from_millis(timeout_ms).min(node.config().request_timeout)
}

async fn propose(State(node): State<MetaNode>, Json(req): Json<Forward<MetaCommand>>) -> Response {
    let Some(_permit) = node.admit_forward() else {
        return unavailable();
    };
    let wait = budget(&node, req.timeout_ms);
    let reply: ForwardReply<_> = node.propose_local(req.op, wait).await.into();
    Json(reply).into_response()
}

async fn add_node(State(node): State<MetaNode>, Json(req): Json<Forward<AddNode>>) -> Response {
    let Some(_permit) = node.admit_forward() else {
        return unavailable();
    };
    let wait = budget(&node, req.timeout_ms);
    let AddNode { id, admin_addr } = req.op;
    let reply: ForwardReply<()> = node.add_node_local(id, admin_addr, wait).await.into();
    Json(reply).into_response()
}

async fn remove_node(
    State(node): State<MetaNode>,
    Json(req): Json<Forward<RemoveNode>>,
) -> Response {
    let Some(_permit) = node.admit_forward() else {
        return unavailable();
    };
    let wait = budget(&node, req.timeout_ms);
    let reply: ForwardReply<()> = node.remove_node_local(req.op.id, wait).await.into();
    Json(reply).into_response()
}
