//! The data plane's admin HTTP routes (the control plane adds the cluster's, and serves them
//! all on the admin port):
//! - `GET /health` — 200 `{"status":"ok"}`, or 503 with the reason when the bucket refuses
//!   writes after a storage failure;
//! - `GET /metrics` — Prometheus text exposition;
//! - `GET /api/v1/buckets/{name}/stats` — the general stats as a JSON object of strings;
//! - `GET /pools/default/b/{name}` — the cluster map, as Couchbase serves it over HTTP.

use crate::exec::stats;
use crate::metrics;
use crate::node::Node;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use prometheus_client::registry::Registry;
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
        .with_state(state)
}

async fn health(State(s): State<AppState>) -> Response {
    match s.node.bucket.write_failure() {
        None => Json(serde_json::json!({"status": "ok"})).into_response(),
        Some(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(serde_json::json!({"status": "writes refused", "reason": reason})),
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
    if name != s.node.config.bucket {
        return (StatusCode::NOT_FOUND, "no such bucket").into_response();
    }
    let node = s.node.clone();
    let pairs = tokio::task::spawn_blocking(move || stats::collect(&node, "", None))
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
    if name != s.node.config.bucket {
        return (StatusCode::NOT_FOUND, "no such bucket").into_response();
    }
    (
        [(header::CONTENT_TYPE, "application/json")],
        s.node.bucket_config_json(),
    )
        .into_response()
}
