//! `POST /query/service` (and `GET` with the parameters in the URL's query, as Couchbase
//! takes read-only statements): the request in, the response envelope out.
//!
//! The envelope: `requestID`, `clientContextID`, `signature`, `results`, `errors` (each
//! `{code, msg}`), `status` (`success`, `errors` or `timeout`), and `metrics`
//! (`elapsedTime`, `executionTime`, `resultCount`, `resultSize`, `mutationCount`,
//! `errorCount`). The results are written into the body as they are serialized, not as one
//! document tree.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router};
use rand::RngCore;

use super::error::ServiceError;
use super::request::{self, QueryRequest};
use super::select::Outcome;
use super::{Authenticated, QueryService};

/// The largest request body taken (a statement is at most 1 MiB; parameters ride along).
pub const REQUEST_BYTES_MAX: usize = 4 << 20;

/// The query service's routes, for the admin port's server. The admin port's middleware
/// authenticates the caller and adds [`Authenticated`] to the request.
pub fn router(service: Arc<QueryService>) -> Router {
    Router::new()
        .route("/query/service", post(query_post).get(query_get))
        .layer(axum::extract::DefaultBodyLimit::max(REQUEST_BYTES_MAX))
        .with_state(service)
}

async fn query_post(
    State(service): State<Arc<QueryService>>,
    who: Option<Extension<Authenticated>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    run(service, who, request::parse(&body, form)).await
}

async fn query_get(
    State(service): State<Arc<QueryService>>,
    who: Option<Extension<Authenticated>>,
    RawQuery(query): RawQuery,
) -> Response {
    // GET is for statements that change nothing, as in Couchbase.
    let parsed = request::parse(query.unwrap_or_default().as_bytes(), true).map(|r| QueryRequest {
        readonly: true,
        ..r
    });
    run(service, who, parsed).await
}

async fn run(
    service: Arc<QueryService>,
    who: Option<Extension<Authenticated>>,
    parsed: Result<QueryRequest, request::RequestError>,
) -> Response {
    let started = Instant::now();
    let request_id = request_id();
    let Some(Extension(who)) = who else {
        // The admin port's middleware always adds it; without it nobody is known.
        return (StatusCode::UNAUTHORIZED, "no authenticated caller").into_response();
    };
    let (client_context, outcome) = match parsed {
        Ok(req) => {
            let outcome = service.execute(&who, &req).await;
            (req.client_context_id.clone(), outcome)
        }
        Err(e) => (None, Err(ServiceError::Request(e))),
    };
    if let Err(e) = &outcome {
        tracing::debug!(code = e.code(), error = %e, "query failed");
    }
    envelope(&request_id, client_context.as_deref(), outcome, started)
}

fn request_id() -> String {
    let mut b = [0u8; 16];
    rand::rngs::OsRng.fill_bytes(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Writes the response body field by field (results are serialized one at a time).
fn envelope(
    request_id: &str,
    client_context: Option<&str>,
    outcome: Result<Outcome, ServiceError>,
    started: Instant,
) -> Response {
    let json = |v: &serde_json::Value| serde_json::to_string(v).unwrap_or_else(|_| "null".into());
    let mut body = String::with_capacity(256);
    body.push_str("{\"requestID\":");
    body.push_str(&json(&request_id.into()));
    if let Some(ctx) = client_context {
        body.push_str(",\"clientContextID\":");
        body.push_str(&json(&ctx.into()));
    }
    let (status, http, results, mutations, errors) = match outcome {
        Ok(o) => (
            "success",
            StatusCode::OK,
            o.results,
            o.mutations,
            Vec::new(),
        ),
        Err(e) => {
            let status = if e.code() == 1080 {
                "timeout"
            } else {
                "errors"
            };
            let http =
                StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let err = serde_json::json!({"code": e.code(), "msg": e.to_string()});
            (status, http, Vec::new(), 0, vec![err])
        }
    };
    body.push_str(",\"signature\":{\"*\":\"*\"},\"results\":[");
    let results_start = body.len();
    for (i, r) in results.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        body.push_str(&json(r));
    }
    let result_size = body.len() - results_start;
    body.push(']');
    if !errors.is_empty() {
        body.push_str(",\"errors\":");
        body.push_str(&json(&serde_json::Value::Array(errors.clone())));
    }
    body.push_str(",\"status\":");
    body.push_str(&json(&status.into()));
    let elapsed = format!("{:?}", started.elapsed());
    let mut metrics = serde_json::json!({
        "elapsedTime": elapsed,
        "executionTime": elapsed,
        "resultCount": results.len(),
        "resultSize": result_size,
        "serviceLoad": 1,
    });
    if mutations > 0 {
        metrics["mutationCount"] = mutations.into();
    }
    if !errors.is_empty() {
        metrics["errorCount"] = errors.len().into();
    }
    body.push_str(",\"metrics\":");
    body.push_str(&json(&metrics));
    body.push('}');
    (
        http,
        [(header::CONTENT_TYPE, "application/json; version=7.6.0")],
        body,
    )
        .into_response()
}
