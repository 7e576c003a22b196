//! XDCR's REST, shaped like Couchbase's:
//!
//! - `GET /pools` — the cluster's uuid (`{"uuid", "isAdminCreds", "pools": [...]}`): how
//!   another cluster checks a reference's credentials and learns who it points at.
//! - `GET /pools/default/remoteClusters` — the references (never their passwords);
//!   `POST` (form `name`, `hostname`, `username`, `password`) creates one once the remote
//!   answered `GET /pools` with those credentials; `POST .../remoteClusters/NAME` edits it
//!   the same way; `DELETE .../remoteClusters/NAME` removes one no replication uses.
//! - `POST /controller/createReplication` — form `fromBucket`, `toCluster`, `toBucket`,
//!   `replicationType=continuous`, optional `filterExpression` (an XDCR filtering expression,
//!   or a regular expression on the key: `sluice_query::xdcr_filter`), `pauseRequested`, and
//!   the settings below; the target bucket must exist and resolve conflicts as the source
//!   does. Answers `{"id": "REMOTE_UUID/FROM/TO"}`.
//! - `GET /settings/replications/ID` — its settings; `POST` with `pauseRequested=true|false`
//!   pauses or resumes it, and with `filterDeletion`, `filterExpiration`,
//!   `filterBypassExpiry` (true|false) or `optimisticReplicationThreshold` (bytes) changes
//!   those (the pipelines restart from their checkpoints). A different `filterExpression`
//!   (empty: none) replaces the filter and re-streams: the checkpoints are void and every
//!   vbucket streams again from zero, so what the new filter lets through reaches the
//!   target; with `filterSkipRestream=true` the pipelines go on from their checkpoints and
//!   the new filter meets later changes only (as in Couchbase). `DELETE
//!   /controller/cancelXDCR/ID` deletes it. (IDs may be sent
//!   with their '/' escaped as `%2F`, as the SDKs and Couchbase's UI do.)
//! - `GET /pools/default/tasks` — each replication as an `xdcr` task with its figures summed
//!   over the nodes (`changesLeft`, `docsWritten`, `docsFailedCrTarget`, ...).
//! - `GET /internal/xdcr/stats` — this node's figures, for the sums above.
//!
//! Errors are 400 with `{"errors": {FIELD: why}}` (`_` for the remote's answer), 404 for an
//! unknown reference or replication, 503 without a metadata quorum.

use crate::buckets_api::{error, unavailable};
use crate::control::Control;
use crate::peer;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use serde_json::{json, Value};
use sluice_client::Credentials;
use sluice_cluster::metadata::{
    replication_id, ClusterState, MetaCommand, Rejection, RemoteCluster, ReplicationDef,
    ReplicationSettings, OPTIMISTIC_THRESHOLD_MAX,
};
use sluice_meta::MetaNode;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::remote::{self, RemoteAccess, RemoteError};
use sluice_query::xdcr_filter::Filter;

/// How long the tasks list waits for each other node's figures.
const PEER_STATS_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Clone)]
struct Api {
    control: Arc<Control>,
    meta: MetaNode,
}

pub(crate) fn router(control: Arc<Control>, meta: MetaNode) -> Router {
    Router::new()
        .route("/pools", get(pools))
        .route(
            "/pools/default/remoteClusters",
            get(list_remotes).post(create_remote),
        )
        .route(
            "/pools/default/remoteClusters/{name}",
            post(edit_remote).delete(delete_remote),
        )
        .route("/controller/createReplication", post(create_replication))
        .route(
            "/controller/cancelXDCR/{*id}",
            axum::routing::delete(cancel_replication),
        )
        .route(
            "/settings/replications/{*id}",
            get(replication_settings).post(change_replication),
        )
        .route("/pools/default/tasks", get(tasks))
        .route("/internal/xdcr/stats", get(local_stats))
        .with_state(Api { control, meta })
}

fn state(api: &Api) -> Arc<ClusterState> {
    api.meta.state().borrow().clone()
}

fn not_found(what: String) -> Response {
    (StatusCode::NOT_FOUND, Json(json!({ "error": what }))).into_response()
}

/// A refusal of the metadata, as REST answers it.
fn refused(rejection: Rejection) -> Response {
    match rejection {
        Rejection::NoSuchRemote { name } => not_found(format!("unknown remote cluster {name:?}")),
        Rejection::NoSuchReplication { id } => not_found(format!("unknown replication {id}")),
        Rejection::RemoteExists { .. } => {
            error("name", "Duplicate cluster names are not allowed".into())
        }
        Rejection::ReplicationExists { .. } => error(
            "_",
            "Replication to the same remote cluster and bucket already exists".into(),
        ),
        other => error("_", other.to_string()),
    }
}

async fn propose(api: &Api, cmd: MetaCommand) -> Result<(), Response> {
    match api.meta.propose(cmd).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(rejection)) => Err(refused(rejection)),
        Err(e) => Err(unavailable(e)),
    }
}

async fn pools(State(api): State<Api>) -> Response {
    let uuid = state(&api).uuid().to_string();
    if uuid.is_empty() {
        // A node still taking its place in the cluster: no uuid to give yet.
        let error = "the cluster has no uuid yet: the node is starting";
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "error": error })),
        )
            .into_response();
    }
    Json(json!({
        "uuid": uuid,
        "isAdminCreds": true,
        "isEnterprise": false,
        "implementationVersion": concat!("sluice-", env!("CARGO_PKG_VERSION")),
        "pools": [{
            "name": "default",
            "uri": format!("/pools/default?uuid={uuid}"),
            "streamingUri": format!("/poolsStreaming/default?uuid={uuid}"),
        }],
    }))
    .into_response()
}

fn remote_json(r: &RemoteCluster) -> Value {
    let path = format!(
        "/pools/default/remoteClusters/{}",
        sluice_client::admin_http::percent_encode(&r.name)
    );
    json!({
        "name": r.name,
        "uri": path,
        "validateURI": format!("{path}?just_validate=1"),
        "hostname": r.hostname,
        "username": r.username,
        "uuid": r.uuid,
        "deleted": false,
        "demandEncryption": r.ca_pem.is_some(),
        "secureType": if r.ca_pem.is_some() { "full" } else { "none" },
    })
}

async fn list_remotes(State(api): State<Api>) -> Response {
    let list: Vec<Value> = state(&api).remotes().values().map(remote_json).collect();
    Json(list).into_response()
}

/// The form of a remote cluster reference.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct RemoteForm {
    name: Option<String>,
    hostname: Option<String>,
    username: Option<String>,
    password: Option<String>,
    demand_encryption: Option<String>,
    certificate: Option<String>,
    secure_type: Option<String>,
}

fn remote_error(e: RemoteError) -> Response {
    error("_", e.to_string())
}

/// The form checked, and the remote asked who it is with its credentials.
async fn read_remote(form: RemoteForm, name: Option<String>) -> Result<RemoteCluster, Response> {
    let mut errors = BTreeMap::new();
    let field = |v: Option<String>, key: &str, errors: &mut BTreeMap<String, String>| {
        let v = v.map(|s| s.trim().to_string()).unwrap_or_default();
        if v.is_empty() {
            errors.insert(key.to_string(), format!("{key} cannot be empty"));
        }
        v
    };
    let name = field(name.or(form.name), "name", &mut errors);
    let hostname = field(form.hostname, "hostname", &mut errors);
    let username = field(form.username, "username", &mut errors);
    let password = form.password.unwrap_or_default();
    let demanded = form
        .demand_encryption
        .as_deref()
        .is_some_and(|d| d == "1" || d == "true");
    let encrypted = match form.secure_type.as_deref() {
        None | Some("") => demanded,
        Some("none") => false,
        Some("full") => true,
        Some("half") => {
            errors.insert(
                "secureType".into(),
                "half-secure replication (only the password encrypted) is not supported: \
                 use full"
                    .into(),
            );
            false
        }
        Some(other) => {
            errors.insert(
                "secureType".into(),
                format!("secureType {other:?}: none, half or full"),
            );
            false
        }
    };
    let certificate = form.certificate.filter(|c| !c.trim().is_empty());
    match (encrypted, &certificate) {
        (true, None) => {
            errors.insert(
                "certificate".into(),
                "encryption needs the remote cluster's CA certificate (PEM)".into(),
            );
        }
        (false, Some(_)) => {
            errors.insert(
                "demandEncryption".into(),
                "a certificate is given, but not demandEncryption=1 (or secureType=full)".into(),
            );
        }
        _ => {}
    }
    if !errors.is_empty() {
        return Err((StatusCode::BAD_REQUEST, Json(json!({ "errors": errors }))).into_response());
    }
    let who = Credentials::new(&username, &password);
    let access = RemoteAccess::new(&hostname, who, certificate.as_deref())
        .map_err(|e| error("certificate", e.to_string()))?;
    let uuid = remote::cluster_uuid(&access).await.map_err(remote_error)?;
    let remote = RemoteCluster {
        name,
        uuid,
        hostname: access.addr,
        username,
        password,
        ca_pem: certificate,
    };
    remote.validate().map_err(refused)?;
    Ok(remote)
}

async fn create_remote(State(api): State<Api>, Form(form): Form<RemoteForm>) -> Response {
    put_remote(api, form, None).await
}

async fn edit_remote(
    State(api): State<Api>,
    Path(name): Path<String>,
    Form(form): Form<RemoteForm>,
) -> Response {
    if !state(&api).remotes().contains_key(&name) {
        return not_found(format!("unknown remote cluster {name:?}"));
    }
    put_remote(api, form, Some(name)).await
}

async fn put_remote(api: Api, form: RemoteForm, editing: Option<String>) -> Response {
    let create = editing.is_none();
    let remote = match read_remote(form, editing).await {
        Ok(r) => r,
        Err(response) => return response,
    };
    if remote.uuid == state(&api).uuid() {
        return error("hostname", "that is this cluster".into());
    }
    let answer = remote_json(&remote);
    match propose(&api, MetaCommand::PutRemoteCluster { remote, create }).await {
        Ok(()) => Json(answer).into_response(),
        Err(response) => response,
    }
}

async fn delete_remote(State(api): State<Api>, Path(name): Path<String>) -> Response {
    match propose(&api, MetaCommand::DeleteRemoteCluster { name }).await {
        Ok(()) => Json(json!("ok")).into_response(),
        Err(response) => response,
    }
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReplicationForm {
    from_bucket: Option<String>,
    to_cluster: Option<String>,
    to_bucket: Option<String>,
    replication_type: Option<String>,
    filter_expression: Option<String>,
    pause_requested: Option<String>,
    #[serde(flatten)]
    settings: SettingsFields,
}

/// The settings' form fields, as Couchbase names them; absent ones keep their value.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct SettingsFields {
    filter_deletion: Option<String>,
    filter_expiration: Option<String>,
    filter_bypass_expiry: Option<String>,
    optimistic_replication_threshold: Option<String>,
}

impl SettingsFields {
    /// `base` with the fields given applied; a malformed one is an error named by its field.
    fn apply(
        &self,
        mut base: ReplicationSettings,
        errors: &mut BTreeMap<String, String>,
    ) -> ReplicationSettings {
        let fields = [
            (
                &self.filter_deletion,
                "filterDeletion",
                &mut base.filter_deletion,
            ),
            (
                &self.filter_expiration,
                "filterExpiration",
                &mut base.filter_expiration,
            ),
            (
                &self.filter_bypass_expiry,
                "filterBypassExpiry",
                &mut base.bypass_expiry,
            ),
        ];
        for (value, field, slot) in fields {
            if let Some(v) = flag(value.as_deref(), field, errors) {
                *slot = v;
            }
        }
        if let Some(v) = &self.optimistic_replication_threshold {
            match v.parse::<u32>() {
                Ok(n) if n <= OPTIMISTIC_THRESHOLD_MAX => base.optimistic_threshold = n,
                _ => {
                    errors.insert(
                        "optimisticReplicationThreshold".into(),
                        format!("must be an integer from 0 to {OPTIMISTIC_THRESHOLD_MAX}"),
                    );
                }
            }
        }
        base
    }
}

fn truthy(v: &str) -> Option<bool> {
    match v {
        "true" | "1" => Some(true),
        "false" | "0" => Some(false),
        _ => None,
    }
}

/// A boolean form field, if given; a malformed one is an error named `field` (and `None`).
fn flag(value: Option<&str>, field: &str, errors: &mut BTreeMap<String, String>) -> Option<bool> {
    let v = value?;
    let parsed = truthy(v);
    if parsed.is_none() {
        errors.insert(field.into(), "must be true or false".into());
    }
    parsed
}

async fn create_replication(State(api): State<Api>, Form(form): Form<ReplicationForm>) -> Response {
    let st = state(&api);
    let mut errors = BTreeMap::new();
    let mut need = |v: Option<String>, key: &str| {
        let v = v.unwrap_or_default();
        if v.is_empty() {
            errors.insert(key.to_string(), format!("{key} cannot be empty"));
        }
        v
    };
    let from = need(form.from_bucket, "fromBucket");
    let to_cluster = need(form.to_cluster, "toCluster");
    let to_bucket = need(form.to_bucket, "toBucket");
    if let Some(t) = form
        .replication_type
        .as_deref()
        .filter(|t| *t != "continuous")
    {
        errors.insert(
            "replicationType".into(),
            format!("replication type {t:?} is not supported: only continuous"),
        );
    }
    let paused = flag(
        form.pause_requested.as_deref(),
        "pauseRequested",
        &mut errors,
    )
    .unwrap_or(false);
    let filter = form.filter_expression.filter(|f| !f.is_empty());
    if let Some(Err(e)) = filter.as_deref().map(Filter::compile) {
        errors.insert("filterExpression".into(), e.to_string());
    }
    let settings = form
        .settings
        .apply(ReplicationSettings::default(), &mut errors);
    if !from.is_empty() && st.bucket(&from).is_none() {
        errors.insert("fromBucket".into(), format!("unknown bucket {from:?}"));
    }
    let remote = st.remotes().get(&to_cluster).cloned();
    if remote.is_none() && !to_cluster.is_empty() {
        errors.insert(
            "toCluster".into(),
            format!("unknown remote cluster {to_cluster:?}"),
        );
    }
    if !errors.is_empty() {
        return (StatusCode::BAD_REQUEST, Json(json!({ "errors": errors }))).into_response();
    }
    let (Some(remote), Some(source)) = (remote, st.bucket(&from)) else {
        unreachable!("checked above");
    };
    // The target bucket must exist and judge conflicts as the source does, or the two
    // clusters would not converge.
    let target = match RemoteAccess::of(&remote) {
        Ok(access) => remote::target_bucket(&access, &to_bucket).await,
        Err(e) => Err(e),
    };
    let target = match target {
        Ok(t) => t,
        Err(RemoteError::NoBucket { bucket }) => {
            return error(
                "toBucket",
                format!("the remote cluster has no bucket {bucket:?}"),
            )
        }
        Err(e) => return remote_error(e),
    };
    if target.conflict != source.conflict_resolution {
        return error(
            "toBucket",
            format!(
                "the target bucket's conflict resolution type ({}) differs from the source bucket's ({})",
                target.conflict.as_str(),
                source.conflict_resolution.as_str()
            ),
        );
    }
    let id = replication_id(&remote.uuid, &from, &to_bucket);
    let def = ReplicationDef {
        id: id.clone(),
        from_bucket: from,
        to_cluster,
        to_bucket,
        filter_expression: filter,
        paused,
        restreams: 0,
        settings,
    };
    match propose(&api, MetaCommand::CreateReplication { replication: def }).await {
        Ok(()) => Json(json!({ "id": id })).into_response(),
        Err(response) => response,
    }
}

fn settings_json(def: &ReplicationDef) -> Value {
    json!({
        "id": def.id,
        "pauseRequested": def.paused,
        "filterExpression": def.filter_expression.clone().unwrap_or_default(),
        "filterDeletion": def.settings.filter_deletion,
        "filterExpiration": def.settings.filter_expiration,
        "filterBypassExpiry": def.settings.bypass_expiry,
        "optimisticReplicationThreshold": def.settings.optimistic_threshold,
        "replicationType": "continuous",
        "type": "xmem",
        "source": def.from_bucket,
        "toCluster": def.to_cluster,
        "toBucket": def.to_bucket,
    })
}

async fn replication_settings(State(api): State<Api>, Path(id): Path<String>) -> Response {
    match state(&api).replications().get(&id) {
        Some(def) => Json(settings_json(def)).into_response(),
        None => not_found(format!("unknown replication {id}")),
    }
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct SettingsForm {
    pause_requested: Option<String>,
    filter_expression: Option<String>,
    filter_skip_restream: Option<String>,
    #[serde(flatten)]
    settings: SettingsFields,
}

async fn change_replication(
    State(api): State<Api>,
    Path(id): Path<String>,
    Form(form): Form<SettingsForm>,
) -> Response {
    let Some(def) = state(&api).replications().get(&id).cloned() else {
        return not_found(format!("unknown replication {id}"));
    };
    let mut errors = BTreeMap::new();
    let paused = flag(
        form.pause_requested.as_deref(),
        "pauseRequested",
        &mut errors,
    );
    // A new filter (empty: none), and whether it re-streams.
    let new_filter = form
        .filter_expression
        .map(|f| Some(f).filter(|f| !f.is_empty()))
        .filter(|f| *f != def.filter_expression);
    if let Some(Some(Err(e))) = new_filter
        .as_ref()
        .map(|f| f.as_deref().map(Filter::compile))
    {
        errors.insert("filterExpression".into(), e.to_string());
    }
    let skip_restream = flag(
        form.filter_skip_restream.as_deref(),
        "filterSkipRestream",
        &mut errors,
    )
    .unwrap_or(false);
    let settings = form.settings.apply(def.settings, &mut errors);
    if !errors.is_empty() {
        return (StatusCode::BAD_REQUEST, Json(json!({ "errors": errors }))).into_response();
    }
    if settings != def.settings {
        let set = MetaCommand::SetReplicationSettings {
            id: id.clone(),
            settings,
        };
        if let Err(response) = propose(&api, set).await {
            return response;
        }
    }
    if let Some(filter) = new_filter {
        let set = MetaCommand::SetReplicationFilter {
            id: id.clone(),
            filter,
            restream: !skip_restream,
        };
        if let Err(response) = propose(&api, set).await {
            return response;
        }
    }
    if let Some(paused) = paused {
        if let Err(response) = propose(
            &api,
            MetaCommand::SetReplicationPaused {
                id: id.clone(),
                paused,
            },
        )
        .await
        {
            return response;
        }
    }
    match state(&api).replications().get(&id) {
        Some(def) => Json(settings_json(def)).into_response(),
        None => not_found(format!("unknown replication {id}")),
    }
}

async fn cancel_replication(State(api): State<Api>, Path(id): Path<String>) -> Response {
    match propose(&api, MetaCommand::DeleteReplication { id }).await {
        Ok(()) => Json(json!("ok")).into_response(),
        Err(response) => response,
    }
}

async fn local_stats(State(api): State<Api>) -> Response {
    let st = state(&api);
    let stats = api
        .control
        .xdcr
        .local_stats(&api.control.node, &st, api.meta.id());
    Json(stats).into_response()
}

/// Every node's figures, by replication id: this node's at once, the others' asked for.
/// A node that does not answer in time is left out (and counted in `nodesMissing`).
async fn cluster_stats(api: &Api, st: &ClusterState) -> (Vec<BTreeMap<String, Value>>, usize) {
    let me = api.meta.id();
    let mut all = vec![api.control.xdcr.local_stats(&api.control.node, st, me)];
    let mut missing = 0;
    let calls = st.nodes().values().filter(|n| n.info.id != me).map(|n| {
        let (meta, info) = (api.meta.clone(), n.info.clone());
        async move {
            peer::call(
                &meta,
                &info,
                "/internal/xdcr/stats",
                None,
                PEER_STATS_TIMEOUT,
            )
            .await
        }
    });
    for answer in futures_join(calls).await {
        match answer {
            Ok(a) if a.ok() => match serde_json::from_value(a.body) {
                Ok(stats) => all.push(stats),
                Err(_) => missing += 1,
            },
            _ => missing += 1,
        }
    }
    (all, missing)
}

/// Runs the futures side by side.
async fn futures_join<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        if let Ok(v) = h.await {
            out.push(v);
        }
    }
    out
}

/// The per-node figures of one replication, summed (maxima for the latencies and the
/// newest checkpoint time).
fn summed(nodes: &[BTreeMap<String, Value>], id: &str) -> BTreeMap<String, u64> {
    let mut sum: BTreeMap<String, u64> = BTreeMap::new();
    for node in nodes {
        let Some(Value::Object(fields)) = node.get(id) else {
            continue;
        };
        for (k, v) in fields {
            let Some(n) = v.as_u64() else { continue };
            let slot = sum.entry(k.clone()).or_default();
            let take_max = k.starts_with("latency_p") || k == "checkpoint_unix_ms";
            *slot = if take_max { (*slot).max(n) } else { *slot + n };
        }
    }
    sum
}

async fn tasks(State(api): State<Api>) -> Response {
    let st = state(&api);
    let (nodes, missing) = cluster_stats(&api, &st).await;
    let mut list = Vec::new();
    for (id, def) in st.replications() {
        let s = summed(&nodes, id);
        let get = |k: &str| s.get(k).copied().unwrap_or(0);
        let uuid = st.remotes().get(&def.to_cluster).map(|r| r.uuid.clone());
        list.push(json!({
            "type": "xdcr",
            "id": id,
            "source": def.from_bucket,
            "target": format!("/remoteClusters/{}/buckets/{}", uuid.unwrap_or_default(), def.to_bucket),
            "status": if def.paused { "paused" } else { "running" },
            "replicationType": "xmem",
            "filterExpression": def.filter_expression.clone().unwrap_or_default(),
            "changesLeft": get("changes_left"),
            "docsReceivedFromDcp": get("docs_received_from_dcp"),
            "docsFiltered": get("docs_filtered"),
            "docsWritten": get("docs_written"),
            "docsFailedCrTarget": get("docs_failed_cr_target"),
            "docsFailedCrSource": get("docs_failed_cr_source"),
            "dataReplicated": get("data_replicated"),
            "resumedVbuckets": get("resumed_vbuckets"),
            "resumedSeqnos": get("resumed_seqnos"),
            "starts": get("starts"),
            "rewinds": get("rewinds"),
            "rewindsToZero": get("rewinds_to_zero"),
            "checkpointUnixMs": get("checkpoint_unix_ms"),
            "latencyP50UsMax": get("latency_p50_us"),
            "latencyP99UsMax": get("latency_p99_us"),
            "nodesMissing": missing,
            "errors": nodes.iter().filter_map(|n| n.get(id)?.get("last_error")?.as_str().map(String::from)).collect::<Vec<_>>(),
        }));
    }
    Json(list).into_response()
}
