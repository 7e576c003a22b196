//! A bucket's scopes and collections through REST, on Couchbase's paths and with its answers,
//! so the SDKs' collection managers and `sluice collection` work against it:
//!
//! - `GET /pools/default/buckets/B/scopes` — the manifest (`Manifest::to_json`; any role on
//!   B);
//! - `POST /pools/default/buckets/B/scopes`, form `name=S` — creates scope S;
//! - `DELETE /pools/default/buckets/B/scopes/S` — drops it with its collections;
//! - `POST /pools/default/buckets/B/scopes/S/collections`, form `name=C`, optionally
//!   `maxTTL=N` (seconds, 0 to [`MAX_TTL_S_MAX`]; 0: none) and `history=false` — creates
//!   collection C. Couchbase's `maxTTL=-1` (never expire, whatever the bucket says) and
//!   `history=true` (change history retention) are refused: Sluice has neither;
//! - `PATCH /pools/default/buckets/B/scopes/S/collections/C`, form `maxTTL=N` (as above;
//!   `history=false` accepted) — sets its maxTTL: writes from then on are capped by it;
//! - `DELETE /pools/default/buckets/B/scopes/S/collections/C` — drops it.
//!
//! Changes need `bucket_admin[B]` (or `cluster_admin`, `admin`; see `admin_auth`). A change
//! answers 200 `{"uid": "<hex>"}`, the manifest's new uid, once this node serves that
//! manifest (or after [`MANIFEST_SERVED_WAIT`]): a client that asks this node's KV port next
//! finds the collection. Refusals: an unknown bucket 404 as in `buckets_api`; a scope or
//! collection that is not there 404, anything else 400, with Couchbase's body
//! `{"errors": {field: why}}` (`name` for a bad name, `maxTTL`, `history`, else `_`), whose
//! words the SDKs match (see `sluice_cluster::collections::ManifestError`).

use crate::buckets_api::{error, not_found, unavailable};
use crate::control::Control;
use axum::extract::{Form, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde_json::json;
use sluice_cluster::collections::{check_name, MAX_TTL_S_MAX};
use sluice_cluster::metadata::{Applied, MetaCommand, Rejection};
use sluice_cluster::ManifestError;
use sluice_meta::MetaNode;
use std::sync::Arc;
use std::time::Duration;

/// How long a change waits for this node to serve the new manifest before answering anyway.
pub const MANIFEST_SERVED_WAIT: Duration = Duration::from_secs(5);
/// How often that wait looks.
const MANIFEST_POLL: Duration = Duration::from_millis(10);

#[derive(Clone)]
struct ApiState {
    control: Arc<Control>,
    meta: MetaNode,
}

pub fn router(control: Arc<Control>, meta: MetaNode) -> Router {
    // `{name}` is the bucket, as in `buckets_api`'s routes (one name per path segment).
    Router::new()
        .route(
            "/pools/default/buckets/{name}/scopes",
            get(manifest).post(create_scope),
        )
        .route(
            "/pools/default/buckets/{name}/scopes/{scope}",
            delete(drop_scope),
        )
        .route(
            "/pools/default/buckets/{name}/scopes/{scope}/collections",
            post(create_collection),
        )
        .route(
            "/pools/default/buckets/{name}/scopes/{scope}/collections/{collection}",
            delete(drop_collection).patch(edit_collection),
        )
        .with_state(ApiState { control, meta })
}

async fn manifest(State(s): State<ApiState>, Path(bucket): Path<String>) -> Response {
    let state = s.meta.state().borrow().clone();
    match state.buckets().get(&bucket) {
        Some(b) => Json(b.manifest.to_json()).into_response(),
        None => not_found(&bucket),
    }
}

/// The form of a scope's creation.
#[derive(Debug, Default, serde::Deserialize)]
struct ScopeForm {
    name: Option<String>,
}

/// The form of a collection's creation.
#[derive(Debug, Default, serde::Deserialize)]
struct CollectionForm {
    name: Option<String>,
    #[serde(rename = "maxTTL")]
    max_ttl: Option<String>,
    history: Option<String>,
}

async fn create_scope(
    State(s): State<ApiState>,
    Path(bucket): Path<String>,
    Form(form): Form<ScopeForm>,
) -> Response {
    let name = match new_name(form.name) {
        Ok(name) => name,
        Err(refusal) => return refusal.into_response(),
    };
    let cmd = MetaCommand::CreateScope {
        bucket: bucket.clone(),
        name,
    };
    change(&s, &bucket, cmd).await
}

async fn drop_scope(
    State(s): State<ApiState>,
    Path((bucket, scope)): Path<(String, String)>,
) -> Response {
    let cmd = MetaCommand::DropScope {
        bucket: bucket.clone(),
        name: scope,
    };
    change(&s, &bucket, cmd).await
}

async fn create_collection(
    State(s): State<ApiState>,
    Path((bucket, scope)): Path<(String, String)>,
    Form(form): Form<CollectionForm>,
) -> Response {
    let (name, max_ttl_s) = match read_collection(form) {
        Ok(read) => read,
        Err(refusal) => return refusal.into_response(),
    };
    let cmd = MetaCommand::CreateCollection {
        bucket: bucket.clone(),
        scope,
        name,
        max_ttl_s,
    };
    change(&s, &bucket, cmd).await
}

async fn drop_collection(
    State(s): State<ApiState>,
    Path((bucket, scope, collection)): Path<(String, String, String)>,
) -> Response {
    let cmd = MetaCommand::DropCollection {
        bucket: bucket.clone(),
        scope,
        name: collection,
    };
    change(&s, &bucket, cmd).await
}

/// The form of a collection's edit.
#[derive(Debug, Default, serde::Deserialize)]
struct EditForm {
    #[serde(rename = "maxTTL")]
    max_ttl: Option<String>,
    history: Option<String>,
}

async fn edit_collection(
    State(s): State<ApiState>,
    Path((bucket, scope, collection)): Path<(String, String, String)>,
    Form(form): Form<EditForm>,
) -> Response {
    let max_ttl_s = match read_edit(form) {
        Ok(max_ttl_s) => max_ttl_s,
        Err(refusal) => return refusal.into_response(),
    };
    let cmd = MetaCommand::SetCollectionMaxTtl {
        bucket: bucket.clone(),
        scope,
        name: collection,
        max_ttl_s,
    };
    change(&s, &bucket, cmd).await
}

/// An edit's new maxTTL, or the refusal: only maxTTL can change (history is refused as at
/// creation).
fn read_edit(form: EditForm) -> Result<u32, Refusal> {
    check_history(form.history.as_deref())?;
    let Some(text) = form.max_ttl else {
        return Err(Refusal::bad("maxTTL", "maxTTL must be given"));
    };
    parse_max_ttl_s(&text).map_err(|why| Refusal::bad("maxTTL", why))
}

/// A refused request: its status, and why, under the form field it concerns (`_` for
/// none), as Couchbase answers: `{"errors": {field: why}}`.
#[derive(Debug)]
struct Refusal {
    status: StatusCode,
    field: &'static str,
    why: String,
}

impl Refusal {
    /// 400: `field` cannot be what was given.
    fn bad(field: &'static str, why: impl Into<String>) -> Refusal {
        Refusal {
            status: StatusCode::BAD_REQUEST,
            field,
            why: why.into(),
        }
    }

    /// The manifest's refusal: 404 for a scope or collection that is not there, else 400,
    /// the message under the field it concerns.
    fn of(e: ManifestError) -> Refusal {
        let field = match &e {
            e if e.is_bad_name() => "name",
            ManifestError::MaxTtl { .. } => "maxTTL",
            _ => "_",
        };
        let status = match e.is_not_found() {
            true => StatusCode::NOT_FOUND,
            false => StatusCode::BAD_REQUEST,
        };
        Refusal {
            status,
            field,
            why: e.to_string(),
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let body = json!({ "errors": { self.field: self.why } });
        (self.status, Json(body)).into_response()
    }
}

/// A new scope or collection's name, checked here so a bad one never reaches the log.
fn new_name(name: Option<String>) -> Result<String, Refusal> {
    let Some(name) = name else {
        return Err(Refusal::bad("name", "name must be given"));
    };
    check_name(&name).map_err(Refusal::of)?;
    Ok(name)
}

/// A collection's form: its name and `maxTTL` in seconds, or the refusal.
fn read_collection(form: CollectionForm) -> Result<(String, u32), Refusal> {
    let name = new_name(form.name)?;
    let max_ttl_s = match form.max_ttl.as_deref() {
        None => 0,
        Some(text) => parse_max_ttl_s(text).map_err(|why| Refusal::bad("maxTTL", why))?,
    };
    check_history(form.history.as_deref())?;
    Ok((name, max_ttl_s))
}

/// `history`: only `false` (Sluice keeps no change history).
fn check_history(history: Option<&str>) -> Result<(), Refusal> {
    match history {
        None | Some("false") => Ok(()),
        Some("true") => Err(Refusal::bad("history", "history is not supported")),
        Some(_) => Err(Refusal::bad("history", "history must be true or false")),
    }
}

/// `maxTTL` as a number of seconds Sluice keeps: 0 (none) to [`MAX_TTL_S_MAX`].
fn parse_max_ttl_s(text: &str) -> Result<u32, String> {
    match text.trim().parse::<i64>() {
        Ok(-1) => Err(
            "maxTTL -1 (never expire) is not supported: give 0 (no limit) to \
             2147483647 seconds"
                .into(),
        ),
        Ok(n) => u32::try_from(n)
            .ok()
            .filter(|&s| s <= MAX_TTL_S_MAX)
            .ok_or_else(|| format!("maxTTL must be from 0 to {MAX_TTL_S_MAX} seconds")),
        Err(_) => Err(format!(
            "maxTTL must be a number of seconds from 0 to {MAX_TTL_S_MAX}"
        )),
    }
}

/// Proposes a manifest change of bucket `bucket` and answers it (see the module comment).
async fn change(s: &ApiState, bucket: &str, cmd: MetaCommand) -> Response {
    let uid = match s.meta.propose(cmd).await {
        Ok(Ok(Applied::ManifestChanged { uid })) => uid,
        Ok(Ok(other)) => {
            tracing::error!(
                ?other,
                "a collections change was answered with another change"
            );
            let error = format!("unexpected answer {other:?}");
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(json!({ "error": error })),
            )
                .into_response();
        }
        Ok(Err(Rejection::NoSuchBucket { .. })) => return not_found(bucket),
        Ok(Err(Rejection::Collections(e))) => return Refusal::of(e).into_response(),
        Ok(Err(rejection)) => return error("_", rejection.to_string()),
        Err(e) => return unavailable(e),
    };
    let served = served_here(&s.control, bucket, uid).await;
    tracing::info!(bucket, uid, served, "collections manifest changed");
    Json(json!({ "uid": format!("{uid:x}") })).into_response()
}

/// Waits until this node serves bucket `bucket`'s manifest `uid` or a newer one, in its
/// manifest and in the map it renders, for at most [`MANIFEST_SERVED_WAIT`]; whether it
/// does. A node that does not serve the bucket has nothing to wait for.
async fn served_here(control: &Control, bucket: &str, uid: u64) -> bool {
    let Some(bc) = control.bucket(bucket) else {
        return false;
    };
    let handle = &bc.bucket;
    let deadline = tokio::time::Instant::now() + MANIFEST_SERVED_WAIT;
    loop {
        if handle.manifest().uid() >= uid && handle.cluster_map().manifest_uid >= uid {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(
                bucket,
                uid,
                "answered before this node served the new manifest"
            );
            return false;
        }
        tokio::time::sleep(MANIFEST_POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The form as the extractor reads it: every field a string, by its wire name.
    fn form(pairs: &[(&str, &str)]) -> CollectionForm {
        let fields: serde_json::Map<String, serde_json::Value> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.to_string())))
            .collect();
        serde_json::from_value(serde_json::Value::Object(fields)).unwrap()
    }

    #[test]
    fn max_ttl_is_0_to_i32_max_seconds() {
        let table = [
            ("0", Ok(0)),
            ("3600", Ok(3600)),
            ("2147483647", Ok(MAX_TTL_S_MAX)),
            ("-1", Err("-1 (never expire) is not supported")),
            ("-2", Err("from 0 to 2147483647")),
            ("2147483648", Err("from 0 to 2147483647")),
            ("1h", Err("a number of seconds")),
        ];
        for (text, want) in table {
            match (parse_max_ttl_s(text), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{text}"),
                (Err(got), Err(want)) => assert!(got.contains(want), "{text}: {got}"),
                (got, want) => panic!("{text}: {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn a_collection_form_is_read_or_refused_by_field() {
        let read = read_collection(form(&[("name", "c1"), ("maxTTL", "60")]));
        assert_eq!(read.ok(), Some(("c1".to_string(), 60)));
        let plain = read_collection(form(&[("name", "c1"), ("history", "false")]));
        assert_eq!(plain.ok(), Some(("c1".to_string(), 0)));
        let refused = |pairs: &[(&str, &str)]| {
            read_collection(form(pairs))
                .err()
                .map(|r| r.status)
                .unwrap()
        };
        assert_eq!(refused(&[("name", "c1"), ("history", "true")]), 400);
        assert_eq!(refused(&[("name", "c1"), ("maxTTL", "-1")]), 400);
        assert_eq!(refused(&[("maxTTL", "5")]), 400);
        assert_eq!(refused(&[("name", "_c")]), 400);
    }

    #[test]
    fn an_edit_sets_max_ttl_only() {
        let edit = |pairs: &[(&str, &str)]| {
            let fields: serde_json::Map<String, serde_json::Value> = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.to_string())))
                .collect();
            read_edit(serde_json::from_value(serde_json::Value::Object(fields)).unwrap())
        };
        assert_eq!(edit(&[("maxTTL", "90")]).ok(), Some(90));
        assert_eq!(edit(&[("maxTTL", "0"), ("history", "false")]).ok(), Some(0));
        for refused in [
            &[][..],
            &[("history", "false")],
            &[("maxTTL", "-1")],
            &[("maxTTL", "9"), ("history", "true")],
        ] {
            assert_eq!(
                edit(refused).err().map(|r| r.status),
                Some(StatusCode::BAD_REQUEST)
            );
        }
    }

    #[test]
    fn refusals_are_404_when_something_is_missing_and_400_otherwise() {
        let missing = ManifestError::ScopeNotFound { scope: "s".into() };
        assert_eq!(Refusal::of(missing).status, StatusCode::NOT_FOUND);
        let exists = ManifestError::ScopeExists { scope: "s".into() };
        assert_eq!(Refusal::of(exists).status, StatusCode::BAD_REQUEST);
        let bad_name = Refusal::of(ManifestError::NameStart { name: "_x".into() });
        assert_eq!(
            (bad_name.status, bad_name.field),
            (StatusCode::BAD_REQUEST, "name")
        );
    }
}
