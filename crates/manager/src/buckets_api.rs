//! Buckets through REST, shaped like Couchbase Server's, so the SDKs' bucket managers and
//! `sluice bucket` work against it:
//!
//! - `GET /pools/default/buckets` — every bucket (`ro_admin`, `cluster_admin`);
//! - `GET /pools/default/buckets/B` — one (any role on B); 404 if there is none;
//! - `POST /pools/default/buckets` — creates one (`cluster_admin`), from a form:
//!   `name`, `ramQuotaMB` (per node, at least [`QUOTA_MB_MIN`]), `bucketType`
//!   (`couchbase`/`membase` or `ephemeral`), `replicaNumber` (0 to 3, default 1),
//!   `durabilityMinLevel` (`none`, `majority`, `majorityAndPersistActive` or
//!   `persistToMajority`; an ephemeral bucket's at most `majority`),
//!   `conflictResolutionType` (`seqno`, the default: revisions first; or `lww`: last write
//!   wins, CAS first), fixed for the bucket's life.
//!   The bucket is placed on every active node at once (it is empty: nothing moves) and the
//!   answer (202) comes once every node serves it, or after [`SERVED_WAIT`];
//! - `POST /pools/default/buckets/B` — edits it (`bucket_admin[B]`): a new `ramQuotaMB`
//!   applies on every node at once (a smaller one makes the pager evict down to it); a new
//!   `replicaNumber` is recorded and the next rebalance builds or drops the copies, as in
//!   Couchbase Server; a new `durabilityMinLevel` applies to the next write; changing
//!   `bucketType` or `conflictResolutionType` is refused, as Couchbase refuses it;
//! - `DELETE /pools/default/buckets/B` — deletes it on every node (`cluster_admin`): its
//!   data and files go, its connections close.
//!
//! A refused form answers 400 with `{"errors": {field: why}}`, as Couchbase does (the SDKs
//! read "already exists" from it); a refusal by the metadata (a rebalance runs, too many
//! buckets) answers 400 too, under `_`.

use crate::control::Control;
use crate::peer;
use axum::extract::{Form, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};
use sluice_client::admin_http;
use sluice_cluster::metadata::{
    BucketDef, BucketEntry, BucketError, ConflictMode, MetaCommand, NodeStatus, Rejection,
};
use sluice_cluster::{BucketKind, ClusterMap, NodeInfo};
use sluice_meta::MetaNode;
use sluice_types::DurabilityLevel;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The smallest per-node quota a bucket may have (Couchbase's).
pub const QUOTA_MB_MIN: u64 = 100;
/// How long a create or delete waits for every node to have done it before answering.
pub const SERVED_WAIT: Duration = Duration::from_secs(20);
/// One node's answer about a bucket, at most this long.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Clone)]
struct ApiState {
    control: Arc<Control>,
    meta: MetaNode,
}

pub fn router(control: Arc<Control>, meta: MetaNode) -> Router {
    Router::new()
        .route("/pools/default/buckets", get(list).post(create))
        .route(
            "/pools/default/buckets/{name}",
            get(one).post(edit).delete(delete),
        )
        .with_state(ApiState { control, meta })
}

async fn list(State(s): State<ApiState>) -> Response {
    let state = s.meta.state().borrow().clone();
    let nodes = listed_nodes(&state);
    let all: Vec<Value> = state
        .buckets()
        .values()
        .map(|b| describe(b, &nodes))
        .collect();
    Json(all).into_response()
}

async fn one(State(s): State<ApiState>, Path(name): Path<String>) -> Response {
    let state = s.meta.state().borrow().clone();
    match state.buckets().get(&name) {
        Some(b) => Json(describe(b, &listed_nodes(&state))).into_response(),
        None => not_found(&name),
    }
}

/// The form of a create or an edit.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct BucketForm {
    name: Option<String>,
    #[serde(rename = "ramQuotaMB")]
    ram_quota_mb: Option<String>,
    /// Older clients' name for `ramQuotaMB`.
    ram_quota: Option<String>,
    bucket_type: Option<String>,
    replica_number: Option<String>,
    durability_min_level: Option<String>,
    conflict_resolution_type: Option<String>,
}

async fn create(State(s): State<ApiState>, Form(form): Form<BucketForm>) -> Response {
    let state = s.meta.state().borrow().clone();
    // New buckets get the vbucket count the cluster's buckets have (the SDKs hash keys
    // onto it; Couchbase's is fixed per cluster).
    let vbuckets = state
        .buckets()
        .values()
        .next()
        .map_or(s.control.node.config.vbuckets, |b| b.def.vbuckets);
    let def = match read_create(&form, vbuckets) {
        Ok(def) => def,
        Err(errors) => return bad_request(errors),
    };
    if state.bucket(&def.name).is_some() {
        return error("name", "Bucket with given name already exists".into());
    }
    let name = def.name.clone();
    let (vbuckets, replicas) = (def.vbuckets, def.replicas);
    match s
        .meta
        .propose(MetaCommand::DefineBucket { bucket: def })
        .await
    {
        Ok(Ok(_)) => {}
        Ok(Err(rejection)) => return refused(rejection),
        Err(e) => return unavailable(e),
    }
    let state = s.meta.state().borrow().clone();
    let nodes = listed_nodes(&state);
    let targets: Vec<_> = nodes.iter().map(|n| n.id).collect();
    // Every node is listed (`nodesExt`); the data nodes get the vbuckets.
    let data = state.running(&targets, sluice_cluster::Service::Kv);
    let vbmap = match sluice_cluster::place(&data, vbuckets, replicas) {
        Ok(m) => m,
        Err(e) => return error("_", e.to_string()),
    };
    let set = MetaCommand::SetMap {
        bucket: name.clone(),
        expected_rev: None,
        nodes: targets,
        vbmap,
    };
    match s.meta.propose(set).await {
        Ok(Ok(_)) => {}
        Ok(Err(rejection)) => return refused(rejection),
        Err(e) => return unavailable(e),
    }
    // (This node's state may not have applied the map yet: the nodes placed are known.)
    let served = wait_on_nodes(&s.meta, &name, nodes, true).await;
    tracing::info!(bucket = %name, served, "bucket created");
    (StatusCode::ACCEPTED, Json(json!({ "served": served }))).into_response()
}

async fn edit(
    State(s): State<ApiState>,
    Path(name): Path<String>,
    Form(form): Form<BucketForm>,
) -> Response {
    let Some(def) = s.meta.state().borrow().bucket(&name).cloned() else {
        return not_found(&name);
    };
    let edit = match read_edit(&form, &def) {
        Ok(edit) => edit,
        Err(errors) => return bad_request(errors),
    };
    let quota = edit.quota_mb.map(|mb| MetaCommand::SetBucketQuota {
        name: name.clone(),
        quota_bytes: mb * 1024 * 1024,
    });
    let replicas = edit
        .replicas
        .map(|replicas| MetaCommand::SetBucketReplicas {
            name: name.clone(),
            replicas,
        });
    let durability_min = edit
        .durability_min
        .map(|level| MetaCommand::SetBucketDurabilityMin {
            name: name.clone(),
            level,
        });
    for cmd in quota.into_iter().chain(replicas).chain(durability_min) {
        match s.meta.propose(cmd).await {
            Ok(Ok(_)) => {}
            Ok(Err(Rejection::NoSuchBucket { .. })) => return not_found(&name),
            Ok(Err(rejection)) => return refused(rejection),
            Err(e) => return unavailable(e),
        }
    }
    tracing::info!(bucket = %name, ?edit, "bucket edited");
    // A new replica count takes effect when the cluster is rebalanced, as in Couchbase.
    let rebalance_needed = edit.replicas.is_some();
    Json(json!({ "edited": name, "rebalance_needed": rebalance_needed })).into_response()
}

async fn delete(State(s): State<ApiState>, Path(name): Path<String>) -> Response {
    let nodes = listed_nodes(&s.meta.state().borrow());
    let cmd = MetaCommand::DeleteBucket { name: name.clone() };
    match s.meta.propose(cmd).await {
        Ok(Ok(_)) => {}
        Ok(Err(Rejection::NoSuchBucket { .. })) => return not_found(&name),
        Ok(Err(rejection)) => return refused(rejection),
        Err(e) => return unavailable(e),
    }
    let gone = wait_on_nodes(&s.meta, &name, nodes, false).await;
    tracing::info!(bucket = %name, gone, "bucket deleted");
    Json(json!({ "deleted": name, "gone_from_every_node": gone })).into_response()
}

/// An edit's form checked against the bucket's definition: what it changes, or the errors
/// by field.
fn read_edit(form: &BucketForm, def: &BucketDef) -> Result<Edit, BTreeMap<String, String>> {
    let mut errors = BTreeMap::new();
    let quota_mb = form.quota_mb(&mut errors);
    let replicas = form.replicas(&mut errors);
    let kind = form.bucket_type.as_deref().map(|t| match t {
        "couchbase" | "membase" => Some(BucketKind::Couchbase),
        "ephemeral" => Some(BucketKind::Ephemeral),
        _ => None,
    });
    if kind.is_some_and(|k| k != Some(def.kind)) {
        errors.insert("bucketType".into(), "Cannot change bucket type.".into());
    }
    let durability_min = form.durability_min(&mut errors);
    // Fixed at creation, as in Couchbase: the versions stored were judged by it.
    if form.conflict_resolution_type.is_some()
        && conflict_mode(form, &mut errors).is_some_and(|m| m != def.conflict_resolution)
    {
        let why = "Conflict resolution type cannot be changed".into();
        errors.insert(CONFLICT_FIELD.into(), why);
    }
    if let Some(level) = durability_min {
        let edited = BucketDef {
            durability_min: level,
            ..def.clone()
        };
        check_definition(&edited, &mut errors);
    }
    match errors.is_empty() {
        true => Ok(Edit {
            quota_mb,
            replicas: replicas.filter(|&r| r != def.replicas),
            durability_min: durability_min.filter(|&l| l != def.durability_min),
        }),
        false => Err(errors),
    }
}

/// What an edit changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Edit {
    /// A new quota per node, in MiB.
    quota_mb: Option<u64>,
    /// A new replica count, applied by the next rebalance.
    replicas: Option<u8>,
    /// A new durability minimum (`Some(None)`: none), applied to the next write.
    durability_min: Option<Option<DurabilityLevel>>,
}

impl BucketForm {
    /// The quota per node in MiB, if one was given and is usable (else why not, in
    /// `errors`).
    fn quota_mb(&self, errors: &mut BTreeMap<String, String>) -> Option<u64> {
        let quota = self.ram_quota_mb.as_ref().or(self.ram_quota.as_ref())?;
        let why = match quota.parse::<u64>() {
            Ok(mb) if mb >= QUOTA_MB_MIN => return Some(mb),
            Ok(_) => format!("RAM quota cannot be less than {QUOTA_MB_MIN} MiB"),
            Err(_) => "The RAM Quota must be a number".to_string(),
        };
        errors.insert("ramQuota".into(), why);
        None
    }

    /// The durability minimum, if one was given and is a level's name (`Some(None)` for
    /// `none`; else why not, in `errors`).
    fn durability_min(
        &self,
        errors: &mut BTreeMap<String, String>,
    ) -> Option<Option<DurabilityLevel>> {
        match self.durability_min_level.as_deref()? {
            "none" => Some(None),
            name => match DurabilityLevel::from_name(name) {
                Some(level) => Some(Some(level)),
                None => {
                    let why = "Durability minimum level must be one of none, majority, \
                               majorityAndPersistActive or persistToMajority";
                    errors.insert(DURABILITY_FIELD.into(), why.into());
                    None
                }
            },
        }
    }

    /// The replica count, if one was given and is usable (else why not, in `errors`).
    fn replicas(&self, errors: &mut BTreeMap<String, String>) -> Option<u8> {
        let max = sluice_cluster::limits::REPLICAS_MAX;
        match self.replica_number.as_deref()?.parse::<u8>() {
            Ok(r) if r <= max => Some(r),
            _ => {
                let why = format!("Replica number must be an integer from 0 to {max}");
                errors.insert("replicaNumber".into(), why);
                None
            }
        }
    }
}

/// The form field a durability minimum comes in, and its errors go under.
const DURABILITY_FIELD: &str = "durabilityMinLevel";

/// The form's `conflictResolutionType` (`seqno`, the default, or `lww`); `None` after an
/// error.
fn conflict_mode(form: &BucketForm, errors: &mut BTreeMap<String, String>) -> Option<ConflictMode> {
    let Some(word) = form.conflict_resolution_type.as_deref() else {
        return Some(ConflictMode::Seqno);
    };
    let mode = ConflictMode::parse(word);
    if mode.is_none() {
        let why = "Conflict resolution type must be seqno or lww".into();
        errors.insert(CONFLICT_FIELD.into(), why);
    }
    mode
}

const CONFLICT_FIELD: &str = "conflictResolutionType";

/// A create's form checked and made a definition, or the errors by field.
fn read_create(form: &BucketForm, vbuckets: u16) -> Result<BucketDef, BTreeMap<String, String>> {
    let mut errors = BTreeMap::new();
    let name = form.name.clone().unwrap_or_default();
    if name.is_empty() {
        errors.insert("name".into(), "Bucket name needs to be specified".into());
    }
    let given = form.ram_quota_mb.is_some() || form.ram_quota.is_some();
    if !given {
        errors.insert("ramQuota".into(), "RAM quota must be specified".into());
    }
    let quota_mb = form.quota_mb(&mut errors).unwrap_or(0);
    let kind = match form.bucket_type.as_deref().unwrap_or("couchbase") {
        "couchbase" | "membase" => BucketKind::Couchbase,
        "ephemeral" => BucketKind::Ephemeral,
        "memcached" => {
            let why = "memcached buckets are not supported: use an ephemeral bucket".into();
            errors.insert("bucketType".into(), why);
            BucketKind::Couchbase
        }
        _ => {
            errors.insert("bucketType".into(), "invalid bucket type".into());
            BucketKind::Couchbase
        }
    };
    let replicas = match form.replica_number {
        None => 1,
        Some(_) => form.replicas(&mut errors).unwrap_or(0),
    };
    let durability_min = form.durability_min(&mut errors).flatten();
    let conflict_resolution = conflict_mode(form, &mut errors).unwrap_or_default();
    let def = BucketDef {
        name,
        uuid: format!("{:032x}", rand::random::<u128>()),
        kind,
        replicas,
        vbuckets,
        quota_bytes: quota_mb * 1024 * 1024,
        durability_min,
        conflict_resolution,
    };
    if errors.is_empty() {
        check_definition(&def, &mut errors);
    }
    match errors.is_empty() {
        true => Ok(def),
        false => Err(errors),
    }
}

/// `def`'s own checks, each error under the field that caused it.
fn check_definition(def: &BucketDef, errors: &mut BTreeMap<String, String>) {
    if let Err(e) = def.validate() {
        let field = match e {
            BucketError::EphemeralDurability { .. } => DURABILITY_FIELD,
            _ => "name",
        };
        errors.insert(field.into(), e.to_string());
    }
}

/// A bucket as Couchbase describes it (the fields the SDKs read).
fn describe(b: &BucketEntry, nodes: &[NodeInfo]) -> Value {
    let def = &b.def;
    let (bucket_type, eviction) = match def.kind {
        BucketKind::Couchbase => ("membase", "valueOnly"),
        BucketKind::Ephemeral => ("ephemeral", "noEviction"),
    };
    // A bucket is served by its map's data nodes.
    let data = |n: &&NodeInfo| n.runs(sluice_cluster::Service::Kv);
    let serving = b
        .map
        .as_ref()
        .map_or(0, |m| m.nodes().iter().filter(data).count() as u64);
    let name = &def.name;
    let nodes: Vec<Value> = b
        .map
        .as_ref()
        .map(ClusterMap::nodes)
        .unwrap_or(nodes)
        .iter()
        .filter(data)
        .map(|n| {
            json!({
                "hostname": format!("{}:{}", n.host, n.admin_port),
                "status": "healthy",
                "version": concat!(env!("CARGO_PKG_VERSION"), "-sluice"),
                "services": n.services.iter().map(|s| s.rest_name()).collect::<Vec<_>>(),
                "ports": { "direct": n.kv_port },
            })
        })
        .collect();
    json!({
        "name": name,
        "uuid": def.uuid,
        "bucketType": bucket_type,
        "quota": { "ram": def.quota_bytes * serving, "rawRAM": def.quota_bytes },
        "replicaNumber": def.replicas,
        "numVBuckets": def.vbuckets,
        "evictionPolicy": eviction,
        "conflictResolutionType": def.conflict_resolution.as_str(),
        "durabilityMinLevel": def.durability_min.map_or("none", DurabilityLevel::name),
        "replicaIndex": false,
        "controllers": { "flush": format!("/pools/default/buckets/{name}/controller/doFlush") },
        "bucketCapabilities": sluice_cluster::bucket_capabilities(def.kind),
        "nodes": nodes,
    })
}

/// The active nodes: those a bucket without a map is described with, and those a deleted
/// bucket must leave.
fn listed_nodes(state: &sluice_cluster::ClusterState) -> Vec<NodeInfo> {
    state
        .nodes()
        .values()
        .filter(|n| n.status == NodeStatus::Active)
        .map(|n| n.info.clone())
        .collect()
}

/// Waits until every one of `nodes` serves bucket `name` to clients (its map, as the SDKs
/// fetch it: listed for SELECT_BUCKET) (`serving`) or no longer does; `false` if one still
/// did not after [`SERVED_WAIT`].
async fn wait_on_nodes(meta: &MetaNode, name: &str, nodes: Vec<NodeInfo>, serving: bool) -> bool {
    let path = format!("/pools/default/b/{}", admin_http::percent_encode(name));
    let deadline = tokio::time::Instant::now() + SERVED_WAIT;
    let mut waiting = nodes;
    while !waiting.is_empty() {
        let mut still = Vec::new();
        for node in waiting {
            let answer = peer::call(meta, &node, &path, None, ASK_TIMEOUT).await;
            let serves = answer.as_ref().is_ok_and(|a| a.ok());
            let gone = answer.is_ok_and(|a| a.status == 404);
            if (serving && !serves) || (!serving && !gone) {
                still.push(node);
            }
        }
        waiting = still;
        if waiting.is_empty() {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            let ids: Vec<u32> = waiting.iter().map(|n| n.id.0).collect();
            tracing::warn!(bucket = %name, nodes = ?ids, serving,
                "nodes had not caught up with the bucket's creation or deletion");
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    true
}

fn bad_request(errors: BTreeMap<String, String>) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({ "errors": errors }))).into_response()
}

/// 400 with one error, under `field`.
pub(crate) fn error(field: &str, why: String) -> Response {
    bad_request([(field.to_string(), why)].into_iter().collect())
}

fn refused(rejection: Rejection) -> Response {
    error("_", rejection.to_string())
}

pub(crate) fn not_found(name: &str) -> Response {
    let error = format!("Requested resource not found: no bucket {name:?}");
    (StatusCode::NOT_FOUND, Json(json!({ "error": error }))).into_response()
}

pub(crate) fn unavailable(e: sluice_meta::MetaError) -> Response {
    let error = e.to_string();
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({ "error": error })),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The form as the extractor reads it: every field a string, by its wire name.
    fn form(pairs: &[(&str, &str)]) -> BucketForm {
        let fields: serde_json::Map<String, Value> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
            .collect();
        serde_json::from_value(Value::Object(fields)).unwrap()
    }

    #[test]
    fn a_create_form_becomes_a_definition_or_errors_by_field() {
        let ok = form(&[
            ("name", "orders"),
            ("ramQuotaMB", "128"),
            ("bucketType", "ephemeral"),
            ("replicaNumber", "2"),
            ("durabilityMinLevel", "majority"),
        ]);
        let def = read_create(&ok, 64).unwrap();
        assert_eq!(
            (def.name.as_str(), def.kind, def.replicas, def.vbuckets),
            ("orders", BucketKind::Ephemeral, 2, 64)
        );
        assert_eq!(def.durability_min, Some(DurabilityLevel::Majority));
        assert_eq!(def.quota_bytes, 128 << 20);
        // Older clients send ramQuota; the replica count defaults to 1.
        let old = read_create(&form(&[("name", "b"), ("ramQuota", "100")]), 64).unwrap();
        assert_eq!((old.replicas, old.kind), (1, BucketKind::Couchbase));
        assert_eq!(old.durability_min, None);
        let bad = form(&[
            ("ramQuotaMB", "50"),
            ("bucketType", "memcached"),
            ("replicaNumber", "4"),
            ("durabilityMinLevel", "all"),
            ("conflictResolutionType", "newest"),
        ]);
        let errors = read_create(&bad, 64).unwrap_err();
        let fields: Vec<&str> = errors.keys().map(String::as_str).collect();
        assert_eq!(
            fields,
            [
                "bucketType",
                "conflictResolutionType",
                "durabilityMinLevel",
                "name",
                "ramQuota",
                "replicaNumber"
            ]
        );
        let bad_name = form(&[("name", ".hidden"), ("ramQuotaMB", "100")]);
        assert!(read_create(&bad_name, 64).unwrap_err().contains_key("name"));
        // An ephemeral bucket persists nothing: its minimum cannot ask it to.
        let persisting = form(&[
            ("name", "cache"),
            ("ramQuotaMB", "100"),
            ("bucketType", "ephemeral"),
            ("durabilityMinLevel", "persistToMajority"),
        ]);
        let errors = read_create(&persisting, 64).unwrap_err();
        assert_eq!(errors.keys().collect::<Vec<_>>(), ["durabilityMinLevel"]);
    }

    #[test]
    fn an_edit_changes_the_quota_and_refuses_what_cannot_change() {
        let def = read_create(&form(&[("name", "b"), ("ramQuotaMB", "100")]), 64).unwrap();
        let edit = |pairs: &[(&str, &str)]| read_edit(&form(pairs), &def);
        let changes = |quota_mb, replicas| {
            Ok(Edit {
                quota_mb,
                replicas,
                durability_min: None,
            })
        };
        assert_eq!(edit(&[("ramQuotaMB", "300")]), changes(Some(300), None));
        assert_eq!(edit(&[("replicaNumber", "2")]), changes(None, Some(2)));
        // The SDKs send every setting back: unchanged ones change nothing.
        let same = edit(&[
            ("ramQuotaMB", "100"),
            ("replicaNumber", "1"),
            ("bucketType", "membase"),
            ("durabilityMinLevel", "none"),
            ("conflictResolutionType", "seqno"),
        ]);
        assert_eq!(same, changes(Some(100), None));
        // Conflict resolution is fixed at creation.
        let errors = edit(&[("conflictResolutionType", "lww")]).unwrap_err();
        assert!(errors.contains_key("conflictResolutionType"), "{errors:?}");
        let lww = form(&[
            ("name", "l"),
            ("ramQuotaMB", "100"),
            ("conflictResolutionType", "lww"),
        ]);
        let lww = read_create(&lww, 64).unwrap();
        assert_eq!(lww.conflict_resolution, ConflictMode::Lww);
        assert_eq!(def.conflict_resolution, ConflictMode::Seqno);
        let same_lww = read_edit(&form(&[("conflictResolutionType", "lww")]), &lww);
        assert_eq!(same_lww, changes(None, None));
        assert_eq!(edit(&[]), changes(None, None));
        let majority = Some(DurabilityLevel::MajorityAndPersistOnMaster);
        assert_eq!(
            edit(&[("durabilityMinLevel", "majorityAndPersistActive")]),
            Ok(Edit {
                quota_mb: None,
                replicas: None,
                durability_min: Some(majority),
            })
        );
        let errors = edit(&[
            ("ramQuotaMB", "99"),
            ("replicaNumber", "4"),
            ("bucketType", "ephemeral"),
        ])
        .unwrap_err();
        let fields: Vec<&str> = errors.keys().map(String::as_str).collect();
        assert_eq!(fields, ["bucketType", "ramQuota", "replicaNumber"]);
    }
}
