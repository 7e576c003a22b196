//! `POST /query/service` (and `GET` with the parameters in the URL's query, as Couchbase
//! takes read-only statements): the request in, the response envelope out.
//!
//! The envelope: `requestID`, `clientContextID`, `signature`, `results`, `errors` (each
//! `{code, msg}`), `status` (`success`, `errors` or `timeout`), and `metrics`
//! (`elapsedTime`, `executionTime`, `resultCount`, `resultSize`, `mutationCount`,
//! `errorCount`). Results stream (see `sink`): a statement whose results fill a chunk
//! before it ends is answered 200 as it goes, any error after its results.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use rand::RngCore;

use super::error::ServiceError;
use super::sink::{Sink, Written, CHUNKS_QUEUED};
use super::{Authenticated, QueryService};
use sluice_query::request::{self, QueryRequest};
use tokio::sync::mpsc;

/// The largest request body taken (a statement is at most 1 MiB; parameters ride along).
pub const REQUEST_BYTES_MAX: usize = 4 << 20;

/// The query service's routes, for the admin port's server. The admin port's middleware
/// authenticates the caller and adds [`Authenticated`] to the request.
pub fn router(service: Arc<QueryService>) -> Router {
    Router::new()
        .route("/query/service", post(query_post).get(query_get))
        .route("/internal/index/scan", post(super::remote::serve_scan))
        .route("/internal/index/copies", get(super::remote::serve_copies))
        .route("/indexStatus", get(super::index_status::serve))
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
    let services = service.node.config.services;
    let parsed = match services.has(sluice_cluster::Service::Query) {
        true => parsed.map_err(ServiceError::Request),
        false => Err(ServiceError::NotQueryNode(services)),
    };
    let req = match parsed {
        Ok(req) => req,
        Err(e) => {
            let head = head(&request_id, None);
            return whole(head, Err(e), Written::default(), started);
        }
    };
    let head = head(&request_id, req.client_context_id.as_deref());
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(CHUNKS_QUEUED);
    // The statement runs in the request's own task, never spawned: for a short query the
    // hand-off to another task and back cost more than its work. Until its first chunk it
    // is polled here; one with more to say is then polled by the response body, which
    // takes the chunks as they come. A client that goes away drops the body, and the
    // statement with it.
    let mut exec: Execution = Box::pin(async move {
        let mut sink = Sink::new(tx);
        let outcome = service.execute(&who, &req, &mut sink).await;
        if let Err(e) = &outcome {
            tracing::debug!(code = e.code(), error = %e, "query failed");
        }
        (outcome, sink.finish())
    });
    // A statement that ends before its first chunk is answered whole, with the HTTP status
    // its outcome calls for; a larger one streams, under 200, and an error met on the way
    // comes after its results, as Couchbase sends it.
    let (first, done) = tokio::select! {
        done = &mut exec => (rx.try_recv().ok(), Some(done)),
        chunk = rx.recv() => (chunk, None),
    };
    let Some(first) = first else {
        let (outcome, written) = match done {
            Some(done) => done,
            None => exec.await,
        };
        return whole(head, outcome, written, started);
    };
    let state = Streaming {
        pending: Some(concat([head.as_bytes(), &first])),
        rx,
        exec: if done.is_some() { None } else { Some(exec) },
        done,
        ended: false,
    };
    let body = futures_util::stream::unfold(state, move |mut st| async move {
        let chunk = st.next_chunk(started).await?;
        Some((Ok::<_, std::convert::Infallible>(chunk), st))
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, CONTENT_TYPE)],
        axum::body::Body::from_stream(body),
    )
        .into_response()
}

/// A statement being run, and what it gives back once done.
type Execution = std::pin::Pin<
    Box<dyn std::future::Future<Output = (Result<u64, ServiceError>, Written)> + Send>,
>;

/// A streamed response: the statement (until done), its chunks, then the tail.
struct Streaming {
    pending: Option<Vec<u8>>,
    rx: mpsc::Receiver<Vec<u8>>,
    exec: Option<Execution>,
    done: Option<(Result<u64, ServiceError>, Written)>,
    ended: bool,
}

impl Streaming {
    /// The next piece of the body, running the statement meanwhile; `None` after the tail.
    async fn next_chunk(&mut self, started: Instant) -> Option<Vec<u8>> {
        if let Some(chunk) = self.pending.take() {
            return Some(chunk);
        }
        if self.ended {
            return None;
        }
        while let Some(exec) = self.exec.as_mut() {
            // A closed channel (its sender gone with the statement's end) disables the
            // first branch, and the statement's own end is awaited.
            tokio::select! {
                Some(chunk) = self.rx.recv() => return Some(chunk),
                done = exec => {
                    self.exec = None;
                    self.done = Some(done);
                }
            }
        }
        // Done: the chunks it queued, then the tail.
        if let Ok(chunk) = self.rx.try_recv() {
            return Some(chunk);
        }
        self.ended = true;
        let (outcome, written) = self
            .done
            .take()
            .unwrap_or((Err(ServiceError::Cancelled), Written::default()));
        let tail = suffix(outcome, &written, started);
        Some(concat([&written.rest, tail.as_bytes()]))
    }
}

const CONTENT_TYPE: &str = "application/json; version=7.6.0";

/// The fields before the results, up to the results' opening bracket.
fn head(request_id: &str, client_context: Option<&str>) -> String {
    let mut text = String::with_capacity(128);
    text.push_str("{\"requestID\":");
    push_json_str(&mut text, request_id);
    if let Some(ctx) = client_context {
        text.push_str(",\"clientContextID\":");
        push_json_str(&mut text, ctx);
    }
    text.push_str(",\"signature\":{\"*\":\"*\"},\"results\":[");
    text
}

/// The whole response of a statement that ended before streaming began.
fn whole(
    head: String,
    outcome: Result<u64, ServiceError>,
    written: Written,
    started: Instant,
) -> Response {
    let http = match &outcome {
        Ok(_) => StatusCode::OK,
        Err(e) => {
            StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
        }
    };
    let tail = suffix(outcome, &written, started);
    let body = concat([head.as_bytes(), &written.rest, tail.as_bytes()]);
    (http, [(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response()
}

/// `]`, then `errors`, `status` and `metrics` (the sizes of every result, streamed or not),
/// written straight into the text: this runs for every request, and building it as a
/// `serde_json::Value` first cost 3% of the server's time on point lookups.
fn suffix(outcome: Result<u64, ServiceError>, written: &Written, started: Instant) -> String {
    use std::fmt::Write as _;
    let (status, mutations, error) = match outcome {
        Ok(m) => ("success", m, None),
        Err(e) => {
            let status = if e.code() == 1080 {
                "timeout"
            } else {
                "errors"
            };
            (status, 0, Some(e))
        }
    };
    let mut out = String::with_capacity(256);
    out.push(']');
    if let Some(name) = &written.prepared {
        out.push_str(",\"prepared\":");
        push_json_str(&mut out, name);
    }
    if let Some(e) = &error {
        let _ = write!(out, ",\"errors\":[{{\"code\":{},\"msg\":", e.code());
        push_json_str(&mut out, &e.to_string());
        out.push_str("}]");
    }
    let _ = write!(out, ",\"status\":\"{status}\"");
    // The duration is formatted once (a float's formatting) and written twice. Writing to
    // a String cannot fail.
    let mut elapsed = String::with_capacity(24);
    let _ = write!(elapsed, "{:?}", started.elapsed());
    out.push_str(",\"metrics\":{\"elapsedTime\":\"");
    out.push_str(&elapsed);
    out.push_str("\",\"executionTime\":\"");
    out.push_str(&elapsed);
    let _ = write!(
        out,
        "\",\"resultCount\":{},\"resultSize\":{},\"serviceLoad\":1",
        written.count, written.bytes
    );
    if mutations > 0 {
        let _ = write!(out, ",\"mutationCount\":{mutations}");
    }
    if error.is_some() {
        out.push_str(",\"errorCount\":1");
    }
    out.push_str("}}");
    out
}

/// The pieces of a response body, as one.
fn concat<const N: usize>(parts: [&[u8]; N]) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len()).sum());
    for p in parts {
        out.extend_from_slice(p);
    }
    out
}

/// `text` as a JSON string.
fn push_json_str(out: &mut String, text: &str) {
    // Escaped in place, no string of its own; writing to a String cannot fail.
    let _ = sluice_query::write_json_string(out, text);
}

/// A random version-4 UUID. From the thread's generator (seeded from the OS once), not
/// the OS per request: a request ID needs to be unique, not secret.
fn request_id() -> String {
    let mut b = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    sluice_query::prepared::uuid_text(&b)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a test's panic is its failure

    use super::*;

    fn envelope(outcome: Result<u64, ServiceError>, written: Written) -> serde_json::Value {
        let (head, tail) = (
            head("id-1", Some("ctx \"q\"")),
            suffix(outcome, &written, Instant::now()),
        );
        serde_json::from_slice(&concat([head.as_bytes(), &written.rest, tail.as_bytes()])).unwrap()
    }

    #[test]
    fn the_envelope_is_json_with_its_fields_and_metrics() {
        let ok = envelope(
            Ok(3),
            Written {
                rest: b"{\"a\":1},2".to_vec(),
                count: 2,
                bytes: 9,
                prepared: Some("p\"1".into()),
            },
        );
        assert_eq!(ok["requestID"], "id-1");
        assert_eq!(ok["clientContextID"], "ctx \"q\"");
        assert_eq!(ok["results"], serde_json::json!([{"a": 1}, 2]));
        assert_eq!(ok["prepared"], "p\"1");
        assert_eq!(ok["status"], "success");
        assert!(ok.get("errors").is_none());
        let m = &ok["metrics"];
        assert_eq!(
            (m["resultCount"].as_u64(), m["resultSize"].as_u64()),
            (Some(2), Some(9))
        );
        assert_eq!(m["mutationCount"], 3);
        assert!(m.get("errorCount").is_none());
        assert!(m["elapsedTime"].as_str().unwrap().ends_with('s'));

        let failed = envelope(
            Err(ServiceError::KeyspaceNotFound("default:nope".into())),
            Written::default(),
        );
        assert_eq!(failed["status"], "errors");
        assert_eq!(failed["errors"][0]["code"], 12003);
        assert!(failed["errors"][0]["msg"]
            .as_str()
            .unwrap()
            .contains("default:nope"));
        assert_eq!(failed["metrics"]["errorCount"], 1);
        assert_eq!(failed["results"], serde_json::json!([]));
        assert!(failed["metrics"].get("mutationCount").is_none());

        let late = envelope(Err(ServiceError::Timeout("1s".into())), Written::default());
        assert_eq!(late["status"], "timeout");
    }
}
