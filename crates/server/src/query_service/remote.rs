//! Scanning a copy of an index that another node holds.
//!
//! The catalog places each index on `num_replica` + 1 nodes; a query on a node without a
//! copy scans one of them, a page at a time, over the holder's admin port as the cluster
//! identity (`/internal/` routes are the cluster's own):
//!
//! - `POST /internal/index/scan`: one page of index `index` (its catalog name) of `bucket`,
//!   entries with `start <= entry < end`, at most `max`; with `targets`, after waiting up
//!   to `wait_ms` until the copy applied each vbucket up to its seqno (`request_plus` /
//!   `at_plus`). Answers the entries as stored (base64), their expiries and where the next
//!   page starts; 404 if the node holds no such copy (any more), 503 while its copy is not
//!   online, 504 if the wait ran out.
//! - `GET /internal/index/copies?bucket=B`: the copies this node holds of `B`'s indexes and
//!   their states, by catalog name (DDL waits on them; `system:indexes` shows them).
//!
//! Pages go on connections kept per holder (`sluice_client::admin_kept`, up to
//! [`KEPT_PER_HOLDER`] idle each): a fresh TLS connection per page cost most of a remote
//! point lookup. A page is asked of the holders in turn, starting from a different one for each scan so
//! that copies share the load; one that cannot answer (down, not built yet, dropped since
//! the catalog moved) passes the page to the next, with the same consistency targets, so
//! a page from any copy holds what the request's consistency asks.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sluice_cluster::catalog_name;
use sluice_index::{IndexDef, IndexState, ScanEntry, ScanPage};
use sluice_query::index_key::{decode_key, encode_key, IndexKeyError};
use sluice_types::{CollectionId, Seqno, VbId};

use super::error::ServiceError;
use super::QueryService;
use crate::index_service::listing::Holder;
use crate::index_service::WaitError;

/// Idle connections kept to each holder (as many scans as run at once reuse them).
pub(super) const KEPT_PER_HOLDER: usize = super::SERVICERS;

/// How long one page may take beyond its consistency wait.
const PAGE_TIMEOUT: Duration = Duration::from_secs(10);

/// A page asked of a holder.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct ScanRequest {
    pub bucket: String,
    /// The index's catalog name.
    pub index: String,
    /// The collection the asking node planned for: a copy of an index of an earlier
    /// collection of the same name is not this one.
    pub collection_id: u32,
    /// Base64.
    pub start: String,
    pub end: String,
    pub max: usize,
    /// `[vbucket, seqno]` the copy must have applied first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<Vec<(u16, u64)>>,
    #[serde(default)]
    pub wait_ms: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct ScanAnswer {
    /// The entries as the store holds them (base64): the index key and document key, or
    /// the document key alone for a primary index.
    entries: Vec<String>,
    expiries: Vec<u32>,
    resume: Option<String>,
}

/// Which holder a remote scan starts with, turned for each scan.
#[derive(Debug, Default)]
pub(super) struct Rotation(AtomicUsize);

impl QueryService {
    /// One page of `def`'s copy on one of `holders` (see the module comment).
    pub(super) async fn scan_remote(
        &self,
        holders: &[Holder],
        def: &IndexDef,
        span: (&[u8], &[u8]),
        max: usize,
        consistency: Option<(&BTreeMap<VbId, Seqno>, Duration)>,
    ) -> Result<ScanPage, ServiceError> {
        let req = ScanRequest {
            bucket: def.bucket.clone(),
            index: catalog_name(&def.scope, &def.collection, &def.name),
            collection_id: def.collection_id.0,
            start: B64.encode(span.0),
            end: B64.encode(span.1),
            max,
            targets: consistency.map(|(t, _)| t.iter().map(|(vb, s)| (vb.0, s.0)).collect()),
            wait_ms: consistency.map_or(0, |(_, w)| w.as_millis() as u64),
        };
        let wait = consistency.map_or(Duration::ZERO, |(_, w)| w);
        let body = serde_json::to_value(&req).expect("a scan request is plain JSON");
        let dial = self.node.member_dial();
        let who = self.node.peer_credentials();
        let first = self.rotation.0.fetch_add(1, Ordering::Relaxed);
        let mut why = String::from("the catalog lists no other holder");
        for i in 0..holders.len() {
            let holder = &holders[(first + i) % holders.len()];
            // A scan page is a read: it may go on a kept connection.
            let answer = self
                .kept
                .post(
                    &dial,
                    &holder.admin,
                    &who,
                    "/internal/index/scan",
                    &body,
                    wait + PAGE_TIMEOUT,
                )
                .await;
            match answer {
                Ok(a) if a.ok() => return decode(def, &a.body),
                Ok(a) if a.status == 504 => return Err(ServiceError::ScanWait(def.name.clone())),
                Ok(a) => why = format!("node {} answered {}: {}", holder.admin, a.status, a.body),
                Err(e) => why = format!("node {}: {e}", holder.admin),
            }
            tracing::debug!(index = %def.name, %why, "a copy of the index did not answer");
        }
        Err(ServiceError::NoCopy {
            index: def.name.clone(),
            why,
        })
    }
}

/// A holder's answer as the page the local store would have given.
fn decode(def: &IndexDef, body: &serde_json::Value) -> Result<ScanPage, ServiceError> {
    let bad = |e: String| ServiceError::NoCopy {
        index: def.name.clone(),
        why: format!("a malformed page: {e}"),
    };
    let answer: ScanAnswer =
        serde_json::from_value(body.clone()).map_err(|e| bad(e.to_string()))?;
    if answer.expiries.len() != answer.entries.len() {
        return Err(bad("entries and expiries differ in number".into()));
    }
    let mut entries = Vec::with_capacity(answer.entries.len());
    for (raw, expiry) in answer.entries.iter().zip(answer.expiries) {
        let raw = B64.decode(raw).map_err(|e| bad(e.to_string()))?;
        let (values, doc_key) = if def.primary {
            (Vec::new(), raw)
        } else {
            decode_key(&raw).map_err(|e| bad(e.to_string()))?
        };
        entries.push(ScanEntry {
            values,
            doc_key,
            expiry,
        });
    }
    let resume = match answer.resume {
        Some(r) => Some(B64.decode(r).map_err(|e| bad(e.to_string()))?),
        None => None,
    };
    Ok(ScanPage { entries, resume })
}

/// `POST /internal/index/scan`.
pub(super) async fn serve_scan(
    State(service): State<Arc<QueryService>>,
    Json(req): Json<ScanRequest>,
) -> Response {
    let refuse =
        |status: StatusCode, why: String| (status, Json(json!({ "error": why }))).into_response();
    let index = &service.node.index;
    let def = index.definitions_of(&req.bucket).into_iter().find(|d| {
        catalog_name(&d.scope, &d.collection, &d.name) == req.index
            && d.collection_id == CollectionId(req.collection_id)
    });
    let Some(def) = def else {
        return refuse(
            StatusCode::NOT_FOUND,
            format!("no copy of {} here", req.index),
        );
    };
    if def.state != IndexState::Online {
        let state = def.state.as_str();
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the copy here is {state}"),
        );
    }
    let (Ok(start), Ok(end)) = (B64.decode(&req.start), B64.decode(&req.end)) else {
        return refuse(StatusCode::BAD_REQUEST, "start and end are base64".into());
    };
    if let Some(targets) = &req.targets {
        let targets: BTreeMap<VbId, Seqno> = targets
            .iter()
            .map(|(vb, s)| (VbId(*vb), Seqno(*s)))
            .collect();
        // The asking query's own wait, which its timeout bounds.
        let wait = Duration::from_millis(req.wait_ms).min(super::TIMEOUT_MAX);
        match index.wait_for(def.id, &targets, wait).await {
            Ok(()) => {}
            Err(WaitError::Timeout) => {
                return refuse(
                    StatusCode::GATEWAY_TIMEOUT,
                    "the consistency wait ran out".into(),
                )
            }
            Err(WaitError::Index(e)) => return refuse(StatusCode::NOT_FOUND, e.to_string()),
        }
    }
    let (store, id, primary) = (index.store.clone(), def.id, def.primary);
    let max = req.max.clamp(1, super::rows::PAGE_ENTRIES);
    let page = tokio::task::spawn_blocking(move || store.scan(id, &start, &end, max)).await;
    let page = match page {
        Ok(Ok(page)) => page,
        Ok(Err(e)) => return refuse(StatusCode::NOT_FOUND, e.to_string()),
        Err(e) => return refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    match encode(page, primary) {
        Ok(answer) => Json(answer).into_response(),
        Err(e) => refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// A page of this node's copy as the wire carries it (what [`decode`] reads back).
fn encode(page: ScanPage, primary: bool) -> Result<ScanAnswer, IndexKeyError> {
    let mut entries = Vec::with_capacity(page.entries.len());
    let mut expiries = Vec::with_capacity(page.entries.len());
    for e in page.entries {
        let raw = if primary {
            e.doc_key
        } else {
            encode_key(&e.values, &e.doc_key)?
        };
        entries.push(B64.encode(raw));
        expiries.push(e.expiry);
    }
    Ok(ScanAnswer {
        entries,
        expiries,
        resume: page.resume.map(|r| B64.encode(r)),
    })
}

#[derive(Deserialize)]
pub(super) struct BucketParam {
    bucket: String,
}

/// `GET /internal/index/copies?bucket=B`.
pub(super) async fn serve_copies(
    State(service): State<Arc<QueryService>>,
    Query(q): Query<BucketParam>,
) -> Response {
    let copies: BTreeMap<String, &str> = service
        .node
        .index
        .definitions_of(&q.bucket)
        .iter()
        .map(|d| {
            let key = catalog_name(&d.scope, &d.collection, &d.name);
            (key, d.state.as_str())
        })
        .collect();
    Json(json!({ "copies": copies })).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_query::Value;

    fn def(primary: bool) -> IndexDef {
        let mut d = IndexDef::from_json(
            br#"{"id":1,"name":"ix","bucket":"b","scope":"_default","collection":"_default",
                "collection_id":0,"primary":false,"keys":[{"expr":"a","descending":false,
                "include_missing":false},{"expr":"b","descending":false,
                "include_missing":true}],"condition":null,"state":"online"}"#,
        )
        .unwrap();
        if primary {
            d.keys.clear();
            d.primary = true;
        }
        d
    }

    #[test]
    fn a_page_reads_back_as_it_was_scanned() {
        let secondary = ScanPage {
            entries: vec![
                ScanEntry {
                    values: vec![Value::Json(json!("x")), Value::Missing],
                    doc_key: b"k1".to_vec(),
                    expiry: 0,
                },
                ScanEntry {
                    values: vec![
                        Value::Json(json!(2.5)),
                        Value::Json(json!({"n": [1.5, null]})),
                    ],
                    doc_key: b"k\x002".to_vec(),
                    expiry: 1_900_000_000,
                },
            ],
            resume: Some(b"\x00\xffnext".to_vec()),
        };
        let answer = encode(secondary.clone(), false).unwrap();
        let wire = serde_json::to_value(&answer).unwrap();
        assert_eq!(decode(&def(false), &wire).unwrap(), secondary);

        let primary = ScanPage {
            entries: vec![ScanEntry {
                values: vec![],
                doc_key: b"only".to_vec(),
                expiry: 7,
            }],
            resume: None,
        };
        let wire = serde_json::to_value(encode(primary.clone(), true).unwrap()).unwrap();
        assert_eq!(decode(&def(true), &wire).unwrap(), primary);
    }

    #[test]
    fn a_malformed_page_is_an_error_not_a_panic() {
        for body in [
            json!({}),
            json!({"entries": ["!!"], "expiries": [0], "resume": null}),
            json!({"entries": ["AA=="], "expiries": [], "resume": null}),
            json!({"entries": ["/w=="], "expiries": [0], "resume": null}),
        ] {
            assert!(
                matches!(decode(&def(false), &body), Err(ServiceError::NoCopy { .. })),
                "{body}"
            );
        }
    }
}
