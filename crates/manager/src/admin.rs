//! Admin HTTP on the admin port: the data plane's routes (`sluice_server::admin_router`:
//! `/health`, `/metrics`, bucket stats, the cluster map over HTTP) and the cluster's:
//! - `GET /api/v1/cluster` — this node's view of the cluster: its id, the leader, the nodes
//!   with their status, the bucket, the map revision and which nodes it lists;
//! - `POST /api/v1/cluster/place` — places the bucket on every active or joining node, for a
//!   cluster being formed: only while the map lists one node, this one, and its bucket holds
//!   no item (so no data has to move). Anything else is 409: moving vbuckets that hold data
//!   is a rebalance (`POST /api/v1/cluster/rebalance`). Body `{"nodes": N}` (optional): refuse (409)
//!   unless this node's state knows exactly N nodes, since a joiner admitted through the
//!   leader may not be applied here yet. Call it before any client writes: a write landing
//!   between the emptiness check and the new map would be dropped with its vbucket.
//!
//! - `POST /api/v1/cluster/failover` — body `{"node": ID, "allow_data_loss": false}`: fails
//!   node ID over (its most advanced replicas elsewhere become active, it leaves the map).
//!   200 with what was promoted (`promoted_out_of_order`: promotions that passed over a
//!   lagging first replica); 404 for an unknown node; 409 if it is failed over already or,
//!   unless `allow_data_loss`, if some vbucket has no copy elsewhere or no replica known to
//!   be complete (its node did not answer, or it is inside a disk snapshot); 503 without a quorum.
//!
//! Plus the rebalance's routes (`rebalance::routes`: `/api/v1/cluster/rebalance...`,
//! answered by the leader, and `/internal/rebalance/...`), the janitor's
//! (`janitor::routes`), and `/internal/...`: the meta node's Raft and join routes
//! (`sluice_meta::http`).
//!
//! Plus the users' routes (`users_api`: `/settings/rbac/users...`), the buckets'
//! (`buckets_api`: `/pools/default/buckets...`) and their collections' (`collections_api`:
//! `/pools/default/buckets/B/scopes...`).
//!
//! Every route but `/health` needs HTTP Basic credentials and a role that allows it, checked
//! before anything else (`admin_auth`); the rest of `/internal/` is for the cluster identity
//! only.

use crate::control::Control;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use sluice_cluster::metadata::{MetaCommand, NodeStatus};
use sluice_meta::MetaNode;
use sluice_server::admin_limits::{AdminConn, LimitedListener};
use sluice_server::tls::TlsAdminListener;
use std::sync::Arc;
use tokio::net::TcpListener;

#[derive(Clone)]
struct AppState {
    control: Arc<Control>,
    meta: MetaNode,
}

/// Serves the data plane's admin routes, the cluster's, and the meta node's Raft and join
/// routes on `listener`.
pub async fn serve(
    control: Arc<Control>,
    listener: TcpListener,
    tls: Option<TcpListener>,
    meta: MetaNode,
) {
    let internal = sluice_meta::http::router(&meta);
    let data = sluice_server::admin_router(control.node.clone());
    let node = control.node.clone();
    let (identity, handshake_timeout) = (node.tls.clone(), node.config.auth_timeout);
    let limits = node.config.admin_limits;
    let users = crate::users_api::router(node.clone(), meta.clone());
    let rebalance = crate::rebalance::routes::router(control.clone(), meta.clone());
    let janitor = crate::janitor::routes::router(control.clone());
    let buckets = crate::buckets_api::router(control.clone(), meta.clone());
    let collections = crate::collections_api::router(control.clone(), meta.clone());
    let xdcr = crate::xdcr::routes::router(control.clone(), meta.clone());
    let query = sluice_server::query_service::http::router(Arc::new(
        sluice_server::query_service::QueryService::new(node.clone()),
    ));
    let state = AppState { control, meta };
    let app = Router::new()
        .route("/api/v1/cluster", get(cluster_view))
        .route("/api/v1/cluster/place", post(place_fresh))
        .route("/api/v1/cluster/failover", post(failover))
        .with_state(state)
        .merge(rebalance)
        .merge(janitor)
        .merge(buckets)
        .merge(collections)
        .merge(data)
        .merge(query)
        .merge(users)
        .merge(xdcr)
        .merge(internal)
        // Last, so it wraps every route above, and the fallback too.
        .layer(axum::middleware::from_fn_with_state(
            node,
            crate::admin_auth::check,
        ))
        // Outermost: the time limit bounds authentication as well.
        .layer(axum::middleware::from_fn_with_state(
            limits.request,
            sluice_server::admin_limits::time_limit,
        ));
    let secure = match (tls, identity) {
        (Some(l), Some(identity)) => match TlsAdminListener::new(l, identity, handshake_timeout) {
            Ok(l) => Some(LimitedListener::new(l, limits)),
            Err(e) => {
                tracing::error!(error = %e, "TLS admin port not served");
                None
            }
        },
        _ => None,
    };
    // Each request learns whether its connection sits in the members' reserve.
    // No Nagle: an answer written in parts must not wait for the client's delayed ACK.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let cleartext = axum::serve(
        LimitedListener::new(listener, limits),
        app.clone()
            .into_make_service_with_connect_info::<AdminConn>(),
    );
    let served = match secure {
        Some(l) => {
            let app = app.layer(axum::Extension(crate::admin_auth::OverTls));
            let tls = axum::serve(l, app.into_make_service_with_connect_info::<AdminConn>());
            let (a, b) = tokio::join!(cleartext, tls);
            a.and(b)
        }
        None => cleartext.await,
    };
    if let Err(e) = served {
        tracing::error!(error = %e, "admin HTTP server stopped");
    }
}

async fn cluster_view(State(s): State<AppState>) -> Response {
    let state = s.meta.state().borrow().clone();
    let bucket = s.control.node.config.bucket.as_str();
    let nodes: Vec<_> = state
        .nodes()
        .values()
        .map(|e| {
            json!({
                "id": e.info.id.0,
                "host": e.info.host,
                "kv_port": e.info.kv_port,
                "admin_port": e.info.admin_port,
                "services": e.info.services,
                "status": e.status,
            })
        })
        .collect();
    let membership = s.meta.membership();
    Json(json!({
        "this_node": s.meta.id().0,
        "leader": s.meta.leader().map(|l| l.0),
        "voters": membership.voters.iter().map(|v| v.0).collect::<Vec<_>>(),
        "nodes": nodes,
        // The bucket this node was started with, as before there were many.
        "bucket": state.bucket(bucket).map(|b| json!({
            "name": b.name, "replicas": b.replicas, "vbuckets": b.vbuckets,
        })),
        "map_rev": state.map(bucket).map(|m| m.rev().0),
        "map_nodes": state.map(bucket).map(map_nodes),
        "buckets": state.buckets().values().map(|b| json!({
            "name": b.def.name, "replicas": b.def.replicas, "vbuckets": b.def.vbuckets,
            "map_rev": b.map.as_ref().map(|m| m.rev().0),
            "map_nodes": b.map.as_ref().map(map_nodes),
        })).collect::<Vec<_>>(),
    }))
    .into_response()
}

/// The ids of the nodes a map lists, in its order.
fn map_nodes(map: &sluice_cluster::ClusterMap) -> Vec<u32> {
    map.nodes().iter().map(|n| n.id.0).collect()
}

pub(crate) fn conflict(reason: String) -> Response {
    (StatusCode::CONFLICT, Json(json!({ "error": reason }))).into_response()
}

/// The body of `POST /api/v1/cluster/place`.
#[derive(Debug, Default, serde::Deserialize)]
struct PlaceRequest {
    /// How many nodes the caller expects the bucket to be placed on.
    nodes: Option<usize>,
}

async fn place_fresh(State(s): State<AppState>, body: Option<Json<PlaceRequest>>) -> Response {
    let want = body.and_then(|Json(b)| b.nodes);
    let state = s.meta.state().borrow().clone();
    let name = &s.control.node.config.bucket;
    let (Some(map), Some(bucket)) = (state.map(name), state.bucket(name)) else {
        return conflict("the cluster has no bucket yet".into());
    };
    let me = s.meta.id();
    let listed: Vec<_> = map.nodes().iter().map(|n| n.id).collect();
    if listed != [me] {
        return conflict(format!(
            "the map lists nodes {listed:?}; only a map of this node alone is placed without \
             moving data (use POST /api/v1/cluster/rebalance)"
        ));
    }
    if s.control.node.holds_data() {
        return conflict(
            "the bucket already holds data; moving it is a rebalance (POST /api/v1/cluster/rebalance)"
                .into(),
        );
    }
    let mut targets = state.nodes_with(NodeStatus::Active);
    targets.extend(state.nodes_with(NodeStatus::Joining));
    targets.sort();
    if want.is_some_and(|n| n != targets.len()) {
        let reason = format!(
            "{} nodes are known here, not {}: try again once every node is admitted",
            targets.len(),
            want.unwrap_or_default()
        );
        return (
            StatusCode::CONFLICT,
            Json(json!({ "error": reason, "retry": true })),
        )
            .into_response();
    }
    // Every node is listed (`nodesExt`); the data nodes get the vbuckets.
    let data = state.running(&targets, sluice_cluster::Service::Kv);
    let vbmap = match sluice_cluster::place(&data, bucket.vbuckets, bucket.replicas) {
        Ok(m) => m,
        Err(e) => return conflict(e.to_string()),
    };
    let cmd = MetaCommand::SetMap {
        bucket: name.clone(),
        expected_rev: Some(map.rev()),
        nodes: targets.clone(),
        vbmap,
    };
    let nodes: Vec<u32> = targets.iter().map(|n| n.0).collect();
    propose_answer(
        &s.meta,
        cmd,
        |applied| json!({ "applied": format!("{applied:?}"), "nodes": nodes }),
    )
    .await
}

/// Proposes `cmd`: 200 with `ok(applied)`, 409 with the rejection, or 503 without a quorum.
pub(crate) async fn propose_answer(
    meta: &MetaNode,
    cmd: MetaCommand,
    ok: impl FnOnce(sluice_cluster::Applied) -> serde_json::Value,
) -> Response {
    match meta.propose(cmd).await {
        Ok(Ok(applied)) => Json(ok(applied)).into_response(),
        Ok(Err(rejection)) => conflict(rejection.to_string()),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "error": e.to_string() })),
        )
            .into_response(),
    }
}

/// The body of `POST /api/v1/cluster/failover`.
#[derive(Debug, serde::Deserialize)]
struct FailoverRequest {
    node: u32,
    #[serde(default)]
    allow_data_loss: bool,
}

async fn failover(State(s): State<AppState>, Json(req): Json<FailoverRequest>) -> Response {
    use crate::failover::{fail_over_node, FailoverError};
    let node = sluice_cluster::NodeId(req.node);
    match fail_over_node(&s.meta, node, req.allow_data_loss).await {
        Ok(report) => {
            let vbs = |v: &[sluice_types::VbId]| v.iter().map(|vb| vb.0).collect::<Vec<_>>();
            let buckets: Vec<_> = report
                .buckets
                .iter()
                .map(|b| {
                    json!({
                        "bucket": b.bucket,
                        "rev": b.rev.0,
                        "promoted": b.promoted,
                        "promoted_out_of_order": b.promoted_out_of_order,
                        "lost": vbs(&b.lost),
                        "no_safe_copy": vbs(&b.no_safe_copy),
                    })
                })
                .collect();
            Json(json!({ "node": report.node.0, "buckets": buckets })).into_response()
        }
        Err(e) => {
            let status = match &e {
                FailoverError::UnknownNode(_) => StatusCode::NOT_FOUND,
                e if e.retryable() => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::CONFLICT,
            };
            (
                status,
                Json(json!({ "error": e.to_string(), "retry": e.retryable() })),
            )
                .into_response()
        }
    }
}
