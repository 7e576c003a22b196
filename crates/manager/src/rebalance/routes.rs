//! The rebalance's routes on the admin port.
//!
//! Public (`cluster_admin`), answered by the metadata leader, where the orchestrator runs; a
//! node that is not the leader forwards the request to it and relays its answer:
//! - `POST /api/v1/cluster/rebalance` — body `{"eject": [ID, ...]}` (optional): rebalances
//!   the bucket onto every active or joining node but the ejected ones. 202 once started;
//!   409 if one runs or is recorded; 503 with no leader;
//! - `GET /api/v1/cluster/rebalance` — its progress (`RebalanceStatus`), `running` also
//!   while the metadata records a rebalance the leader has not resumed yet;
//! - `POST /api/v1/cluster/rebalance/abort` — forgets a recorded rebalance no orchestrator
//!   runs (409 while one runs: it aborts itself on error).
//!
//! Internal (the cluster identity): `/internal/rebalance/{start,status,abort}` (the leader's
//! side of the three above), and what the orchestrator asks of each node: `build`,
//! `takeover`, `drop`, `vb/N` (a copy's state and high seqno) and `map_rev`, each of the
//! bucket `?bucket=NAME` names (the node's own without it; 404 for one it does not serve).

use super::{RebalanceStatus, DROP_PATH};
use crate::admin::{conflict, propose_answer};
use crate::control::{Control, Named};
use crate::peer;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use sluice_cluster::metadata::MetaCommand;
use sluice_meta::MetaNode;
use sluice_server::BucketParam;
use std::sync::Arc;
use std::time::Duration;

/// How long a forwarded request may take on the leader.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone)]
struct RouteState {
    control: Arc<Control>,
    meta: MetaNode,
}

impl axum::extract::FromRef<RouteState> for Arc<Control> {
    fn from_ref(s: &RouteState) -> Arc<Control> {
        s.control.clone()
    }
}

pub(crate) fn router(control: Arc<Control>, meta: MetaNode) -> Router {
    Router::new()
        .route(
            "/api/v1/cluster/rebalance",
            post(public_start).get(public_status),
        )
        .route("/api/v1/cluster/rebalance/abort", post(public_abort))
        .route("/internal/rebalance/start", post(leader_start))
        .route("/internal/rebalance/status", get(leader_status))
        .route("/internal/rebalance/abort", post(leader_abort))
        .route("/internal/rebalance/build", post(build_start))
        .route("/internal/rebalance/takeover", post(takeover))
        .route(DROP_PATH, post(drop_copy))
        .route("/internal/rebalance/vb/{vb}", get(vb_status))
        .route("/internal/rebalance/map_rev", get(map_rev))
        .with_state(RouteState { control, meta })
}

/// Answers on the leader (`here`), or relays the leader's answer to the same request on its
/// internal route `leader_path`.
async fn on_leader(
    s: &RouteState,
    leader_path: &str,
    body: Option<serde_json::Value>,
    here: impl std::future::Future<Output = Response>,
) -> Response {
    if peer::leading(&s.meta) {
        return here.await;
    }
    match peer::call_leader(&s.meta, leader_path, body.as_ref(), FORWARD_TIMEOUT).await {
        Ok(a) => {
            let status = StatusCode::from_u16(a.status).unwrap_or(StatusCode::BAD_GATEWAY);
            (status, Json(a.body)).into_response()
        }
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "error": format!("the leader could not be asked: {e}") })),
        )
            .into_response(),
    }
}

#[derive(Debug, Default, serde::Deserialize, serde::Serialize)]
struct RebalanceRequest {
    #[serde(default)]
    eject: Vec<u32>,
}

async fn public_start(
    State(s): State<RouteState>,
    body: Option<Json<RebalanceRequest>>,
) -> Response {
    let req = body.map(|Json(b)| b).unwrap_or_default();
    let forwarded = json!(req);
    on_leader(
        &s,
        "/internal/rebalance/start",
        Some(forwarded),
        start_here(&s, req),
    )
    .await
}

async fn leader_start(
    State(s): State<RouteState>,
    body: Option<Json<RebalanceRequest>>,
) -> Response {
    start_here(&s, body.map(|Json(b)| b).unwrap_or_default()).await
}

async fn start_here(s: &RouteState, req: RebalanceRequest) -> Response {
    let eject = req.eject.into_iter().map(sluice_cluster::NodeId).collect();
    match super::start(s.meta.clone(), s.control.rebalance.clone(), eject) {
        Ok(()) => (StatusCode::ACCEPTED, Json(json!({ "started": true }))).into_response(),
        Err(super::RebalanceError::NotLeader) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "error": super::RebalanceError::NotLeader.to_string() })),
        )
            .into_response(),
        Err(why) => conflict(why.to_string()),
    }
}

async fn public_status(State(s): State<RouteState>) -> Response {
    on_leader(&s, "/internal/rebalance/status", None, status_here(&s)).await
}

async fn leader_status(State(s): State<RouteState>) -> Response {
    status_here(&s).await
}

async fn status_here(s: &RouteState) -> Response {
    let mut status: RebalanceStatus = s.control.rebalance.lock().clone();
    // Recorded but not (yet) resumed here: still running as far as a caller is concerned.
    status.running |= s.meta.state().borrow().rebalance().is_some();
    Json(status).into_response()
}

async fn public_abort(State(s): State<RouteState>) -> Response {
    on_leader(
        &s,
        "/internal/rebalance/abort",
        Some(json!({})),
        abort_here(&s),
    )
    .await
}

async fn leader_abort(State(s): State<RouteState>) -> Response {
    abort_here(&s).await
}

async fn abort_here(s: &RouteState) -> Response {
    if s.control.rebalance.lock().running {
        return conflict("the rebalance runs on the leader; it aborts itself on error".into());
    }
    propose_answer(
        &s.meta,
        MetaCommand::AbortRebalance,
        |_| json!({ "aborted": true }),
    )
    .await
}

#[derive(Debug, serde::Deserialize)]
struct BuildRequest {
    vb: u16,
    /// The active's KV address (host:port).
    source: String,
}

async fn build_start(
    State(s): State<RouteState>,
    Named(bc): Named,
    Json(req): Json<BuildRequest>,
) -> Response {
    let vb = sluice_types::VbId(req.vb);
    if req.vb >= bc.bucket.engine.num_vbuckets() {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({ "error": "no such vbucket" })),
        )
            .into_response();
    }
    match bc
        .builds
        .start(&s.control.node, &bc.bucket, vb, &req.source)
    {
        Ok(()) => Json(json!({ "building": req.vb })).into_response(),
        Err(e) => conflict(e.to_string()),
    }
}

#[derive(Debug, serde::Deserialize)]
struct TakeoverRequest {
    vb: u16,
}

async fn takeover(Named(bc): Named, Json(req): Json<TakeoverRequest>) -> Response {
    if bc.request_takeover(sluice_types::VbId(req.vb)) {
        Json(json!({ "takeover": req.vb })).into_response()
    } else {
        conflict(format!("vb:{} is followed by no replication here", req.vb))
    }
}

/// A rebalance's drop: the vbucket moved away, delete this node's copy. Only a dead copy
/// that the map this node serves leaves out of the vbucket's chain (409 otherwise: the map
/// is not applied here yet, or the copy is in use).
async fn drop_copy(Named(bc): Named, Json(req): Json<TakeoverRequest>) -> Response {
    let vb = sluice_types::VbId(req.vb);
    let view = bc.bucket.cluster_map();
    let chained = view
        .map
        .vbmap()
        .chain(vb)
        .is_some_and(|c| c.nodes().any(|n| n == view.this));
    if chained || bc.builds.contains(vb) {
        return conflict(format!("vb:{} is still in use here", req.vb));
    }
    let engine = bc.bucket.engine.clone();
    match tokio::task::spawn_blocking(move || engine.drop_vbucket(vb)).await {
        Ok(Ok(dropped)) => Json(json!({ "vb": req.vb, "dropped": dropped })).into_response(),
        Ok(Err(e)) => conflict(format!("vb:{} cannot be dropped: {e}", req.vb)),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({ "error": e.to_string() })),
        )
            .into_response(),
    }
}

async fn vb_status(Path(vb): Path<u16>, Named(bc): Named) -> Response {
    let vb = sluice_types::VbId(vb);
    match bc.bucket.engine.vb_state_and_high(vb) {
        Ok((state, high)) => Json(json!({
            "state": state.as_str(),
            "high_seqno": high.0,
            "building": bc.builds.contains(vb),
        }))
        .into_response(),
        Err(_) => (
            StatusCode::NOT_FOUND,
            Json(json!({ "error": "no such vbucket" })),
        )
            .into_response(),
    }
}

/// The map revision this node serves of bucket `?bucket=` (a rebalance waits for every
/// node to apply a step); without it, every bucket's, as `map_revs`.
async fn map_rev(State(s): State<RouteState>, Query(q): Query<BucketParam>) -> Response {
    if q.bucket.is_none() {
        // Every bucket's (fencing's probe).
        let revs: serde_json::Map<String, serde_json::Value> = s
            .control
            .buckets()
            .iter()
            .map(|bc| {
                (
                    bc.bucket.name.clone(),
                    bc.bucket.cluster_map().rev().0.into(),
                )
            })
            .collect();
        return Json(json!({ "map_revs": revs })).into_response();
    }
    match s.control.named(&q) {
        Ok(bc) => Json(json!({ "map_rev": bc.bucket.cluster_map().rev().0 })).into_response(),
        Err(e) => e.into_response(),
    }
}
