//! The data plane's admin HTTP routes (the control plane adds the cluster's, and serves them
//! all on the admin port):
//! - `GET /health` — 200 `{"status":"ok"}`, or 503 with the reason when the bucket refuses
//!   writes after a storage failure;
//! - `GET /metrics` — Prometheus text exposition;
//! - `GET /api/v1/buckets/{name}/stats` — the general stats as a JSON object of strings;
//! - `GET /pools/default/b/{name}` — the cluster map, as Couchbase serves it over HTTP;
//! - `GET /pools/default/bs/{name}` — the same, streamed: the current map, then each new
//!   revision as it is installed (and the current one again every
//!   [`MAP_STREAM_REPEAT`], so an idle stream is never cut as idle), each followed by four
//!   newlines, as Couchbase streams it to SDKs that fall back to HTTP;
//! - `GET /internal/vbuckets/positions` — how far each vbucket's copy here is (read-only; a
//!   failover asks the replicas and promotes the most advanced complete copy):
//!   `{"vbuckets": [{"vb", "state", "high_seqno", "high_prepared_seqno", "snap_start",
//!   "snap_end", "complete"}, ...]}`, every vbucket of the bucket;
//! - `POST /node/controller/reloadCertificate` — reads this node's TLS certificate and key
//!   again (Couchbase's route): 200 once the TLS ports hand out the new one to new
//!   connections; 400 if the node serves no TLS or the files do not make a configuration
//!   (the old one keeps serving).

use crate::bucket_handle::BucketHandle;
use crate::exec::stats;
use crate::metrics;
use crate::node::Node;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use prometheus_client::registry::Registry;
use sluice_types::{VbId, VbState};
use std::sync::Arc;

#[derive(Clone)]
struct AppState {
    node: Arc<Node>,
    registry: Arc<Registry>,
}

/// The data plane's routes, for the admin port's server.
pub fn router(node: Arc<Node>) -> Router {
    let state = AppState {
        registry: Arc::new(metrics::registry(node.clone())),
        node,
    };
    Router::new()
        .route("/health", get(health))
        .route("/metrics", get(metrics_text))
        .route("/api/v1/buckets/{name}/stats", get(bucket_stats))
        .route("/pools/default/b/{name}", get(bucket_map))
        .route("/pools/default/bs/{name}", get(bucket_map_stream))
        .route("/internal/vbuckets/positions", get(vb_positions))
        .route(
            "/node/controller/reloadCertificate",
            post(reload_certificate),
        )
        .with_state(state)
}

async fn reload_certificate(State(s): State<AppState>) -> Response {
    let bad = |reason: String| {
        (
            StatusCode::BAD_REQUEST,
            Json(serde_json::json!({ "error": reason })),
        )
            .into_response()
    };
    let Some(tls) = s.node.tls.clone() else {
        return bad("this node serves no TLS (start it with --tls-cert and --tls-key)".into());
    };
    match tokio::task::spawn_blocking(move || tls.reload().map(|()| tls)).await {
        Ok(Ok(tls)) => {
            let cert = tls.files().cert.display().to_string();
            tracing::info!(%cert, "TLS certificate reloaded");
            Json(serde_json::json!({ "reloaded": true, "certificate": cert })).into_response()
        }
        Ok(Err(e)) => bad(format!(
            "the certificate was not reloaded (the old one still serves): {e}"
        )),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

async fn health(State(s): State<AppState>) -> Response {
    let failed = s.node.buckets.all().into_iter().find_map(|b| {
        b.engine
            .write_failure()
            .map(|reason| (b.name.clone(), reason))
    });
    match failed {
        None => Json(serde_json::json!({"status": "ok"})).into_response(),
        Some((bucket, reason)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(
                serde_json::json!({"status": "writes refused", "bucket": bucket, "reason": reason}),
            ),
        )
            .into_response(),
    }
}

async fn metrics_text(State(s): State<AppState>) -> Response {
    let mut body = String::new();
    if prometheus_client::encoding::text::encode(&mut body, &s.registry).is_err() {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

async fn bucket_stats(State(s): State<AppState>, Path(name): Path<String>) -> Response {
    let Some(bucket) = s.node.buckets.get(&name) else {
        return (StatusCode::NOT_FOUND, "no such bucket").into_response();
    };
    let node = s.node.clone();
    let pairs = tokio::task::spawn_blocking(move || stats::collect(&node, &bucket, "", None))
        .await
        .ok()
        .flatten()
        .unwrap_or_default();
    let map: serde_json::Map<String, serde_json::Value> = pairs
        .into_iter()
        .map(|(k, v)| (k, serde_json::Value::String(v)))
        .collect();
    Json(serde_json::Value::Object(map)).into_response()
}

async fn bucket_map(State(s): State<AppState>, Path(name): Path<String>) -> Response {
    let Some(bucket) = s.node.buckets.get(&name) else {
        return (StatusCode::NOT_FOUND, "no such bucket").into_response();
    };
    (
        [(header::CONTENT_TYPE, "application/json")],
        bucket.bucket_config_json(),
    )
        .into_response()
}

/// How often a map stream repeats the current map when nothing changed: well inside the
/// admin port's idle limit.
pub const MAP_STREAM_REPEAT: std::time::Duration = std::time::Duration::from_secs(30);

/// What separates maps in a stream.
const MAP_STREAM_SEPARATOR: &[u8] = b"\n\n\n\n";

async fn bucket_map_stream(State(s): State<AppState>, Path(name): Path<String>) -> Response {
    let Some(bucket) = s.node.buckets.get(&name) else {
        return (StatusCode::NOT_FOUND, "no such bucket").into_response();
    };
    let rx = bucket.watch_cluster_map();
    let frames = futures_util::stream::unfold((rx, true), |(mut rx, first)| async move {
        if !first {
            tokio::select! {
                changed = rx.changed() => changed.ok()?,
                () = tokio::time::sleep(MAP_STREAM_REPEAT) => {}
            }
        }
        let mut frame = rx.borrow_and_update().bucket_json.to_vec();
        frame.extend_from_slice(MAP_STREAM_SEPARATOR);
        Some((
            Ok::<_, std::convert::Infallible>(bytes::Bytes::from(frame)),
            (rx, false),
        ))
    });
    (
        [(header::CONTENT_TYPE, "application/json")],
        axum::body::Body::from_stream(frames),
    )
        .into_response()
}

/// One vbucket's copy here, as `GET /internal/vbuckets/positions` reports it.
#[derive(Debug, serde::Serialize)]
struct VbPosition {
    vb: u16,
    state: &'static str,
    high_seqno: u64,
    high_prepared_seqno: u64,
    snap_start: u64,
    snap_end: u64,
    complete: bool,
}

/// The internal routes' `?bucket=NAME` (without it: the node's own bucket).
#[derive(Debug, Default, serde::Deserialize)]
pub struct BucketParam {
    pub bucket: Option<String>,
}

async fn vb_positions(State(s): State<AppState>, Query(q): Query<BucketParam>) -> Response {
    let name = q.bucket.as_deref().unwrap_or(&s.node.config.bucket);
    let Some(bucket) = s.node.buckets.get(name) else {
        return (StatusCode::NOT_FOUND, "no such bucket").into_response();
    };
    // Every vbucket's lock in turn: off the async workers, as the stats are.
    let read = tokio::task::spawn_blocking(move || {
        (0..bucket.engine.num_vbuckets())
            .filter_map(|vb| vb_position(&bucket, VbId(vb)))
            .collect::<Vec<_>>()
    });
    match read.await {
        Ok(vbuckets) => Json(serde_json::json!({ "vbuckets": vbuckets })).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// The three reads take the vbucket's lock one after the other, so they may straddle a
/// change; a failover asks once the active is gone, when a replica no longer changes.
fn vb_position(bucket: &BucketHandle, vb: VbId) -> Option<VbPosition> {
    let state = bucket.engine.vb_state(vb).ok()?;
    let at = bucket.engine.replica_position(vb).ok()?;
    let (high_prepared, _) = bucket.engine.sync_write_seqnos(vb).ok()?;
    // Complete means "not inside a disk snapshot": a disk snapshot is deduplicated, so a copy
    // part-way through one is no prefix of the active's history. A memory snapshot never
    // deduplicates prepares, so a copy inside one holds every prepare up to its high seqno.
    // An active copy is its own history.
    let complete = state == VbState::Active || !at.in_disk_snapshot;
    Some(VbPosition {
        vb: vb.0,
        state: state.as_str(),
        high_seqno: at.high_seqno.0,
        high_prepared_seqno: high_prepared.0,
        snap_start: at.snap_start.0,
        snap_end: at.snap_end.0,
        complete,
    })
}
