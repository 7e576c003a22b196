//! Which buckets this node serves, following the replicated metadata:
//!
//! - a bucket the metadata defines and this node does not serve is opened (created empty
//!   the first time), given its map, held back if a restart lost its data (`restart_hold`),
//!   and given its cluster agent; only once the agent applied the map is it listed for
//!   SELECT_BUCKET, so no client reaches a vbucket before its state is the map's;
//! - every bucket's newest map is served (re-rendered once this node's ports are known),
//!   with the quota the metadata gives it (an edit applies at once), and its newest
//!   collections manifest;
//! - a bucket the metadata no longer defines is deleted here: its agent and builds stop, it
//!   leaves the table, the connections that selected it close, its engine stops and its
//!   files are removed;
//! - the users the metadata lists are let in.
//!
//! Runs on every node, until the meta node stops.

use crate::control::{BucketControl, Control};
use sluice_cluster::metadata::{BucketEntry, ClusterState, ConflictMode};
use sluice_cluster::{BucketKind, NodeId};
use sluice_engine::{BucketType, ConflictResolution};
use sluice_meta::MetaNode;
use sluice_server::{BucketHandle, BucketSpec};
use std::sync::Arc;
use std::time::Duration;

/// How long a newly opened bucket waits for its agent's first map before it is listed
/// anyway (the agent logs why it could not apply it).
const FIRST_MAP_WAIT: Duration = Duration::from_secs(10);

/// Follows the metadata until the meta node stops. `restarted`: this node came back into
/// its cluster (a bucket it reopens may have lost data).
pub async fn follow(control: Arc<Control>, meta: MetaNode, restarted: bool) {
    let mut states = meta.state();
    let mut users_seen = None;
    loop {
        let state: Arc<ClusterState> = states.borrow_and_update().clone();
        if users_seen.as_ref() != Some(state.users()) {
            control.node.credentials.set_users(state.users());
            users_seen = Some(state.users().clone());
        }
        serve(&control, &meta, &state, restarted).await;
        if states.changed().await.is_err() {
            return;
        }
    }
}

/// Makes the node serve exactly the buckets of `state`, each with its newest map. A bucket
/// is served once it is placed (defined and given its first map: two proposals).
async fn serve(control: &Arc<Control>, meta: &MetaNode, state: &ClusterState, restarted: bool) {
    let id = meta.id();
    for (name, entry) in state.buckets() {
        let Some(map) = &entry.map else { continue };
        let bucket = match control.bucket(name) {
            Some(bc) => bc,
            None => match open(control, meta, entry).await {
                Some(bc) => bc,
                None => continue,
            },
        };
        // The node's own bucket was opened under a uuid of its own: maps show the cluster's.
        let renamed = bucket.bucket.adopt_cluster_uuid(&entry.def.uuid);
        install_manifest(&bucket.bucket, entry);
        install(control, &bucket.bucket, map, id, renamed);
        if bucket.bucket.engine.memory().quota_bytes != entry.def.quota_bytes {
            // Edited (or the node's own bucket, opened with its flag's quota).
            bucket.bucket.engine.set_quota(entry.def.quota_bytes);
        }
        bucket.bucket.set_durability_min(entry.def.durability_min);
        if !bucket.agent_running() {
            start(control, meta, &bucket, restarted);
        }
        if control.node.buckets.get(name).is_none() {
            list_once_applied(control, &bucket).await;
        }
    }
    for bc in control.buckets() {
        if state.bucket(&bc.bucket.name).is_none() {
            delete(control, &bc).await;
        }
    }
}

/// Serves `map` for `bucket` if it is newer than the one served, was rendered for another
/// node id (before this node knew its own), or must be rendered again (`render`).
fn install(
    control: &Control,
    bucket: &BucketHandle,
    map: &sluice_cluster::ClusterMap,
    id: NodeId,
    render: bool,
) {
    let served = bucket.cluster_map();
    if render || map.rev() > served.rev() || served.this != id {
        bucket.install_map(map.clone(), id, &control.node.node_info(id));
    }
}

/// Serves bucket `entry`'s collections manifest if it is newer than the one served.
pub(crate) fn install_manifest(bucket: &BucketHandle, entry: &BucketEntry) {
    if entry.manifest.uid() > bucket.manifest().uid() {
        let uid = entry.manifest.uid();
        bucket.install_manifest(Arc::new(entry.manifest.clone()));
        tracing::debug!(bucket = %bucket.name, uid, "collections manifest installed");
    }
}

/// Opens bucket `entry` here and gives it its map and collections manifest; `None` if it cannot be opened (logged: the
/// next state change tries again).
async fn open(
    control: &Arc<Control>,
    meta: &MetaNode,
    entry: &BucketEntry,
) -> Option<Arc<BucketControl>> {
    let def = &entry.def;
    let node = control.node.clone();
    let spec = BucketSpec {
        name: def.name.clone(),
        bucket_type: match def.kind {
            BucketKind::Couchbase => BucketType::Couchbase,
            BucketKind::Ephemeral => BucketType::Ephemeral,
        },
        vbuckets: def.vbuckets,
        replicas: def.replicas,
        quota_bytes: def.quota_bytes,
        uuid: Some(def.uuid.clone()),
        conflict_resolution: resolution_of(def.conflict_resolution),
    };
    let me = node.node_info(meta.id());
    let opened =
        tokio::task::spawn_blocking(move || BucketHandle::open(&node.config, &spec, &me)).await;
    let handle = match opened {
        Ok(Ok(handle)) => Arc::new(handle),
        Ok(Err(e)) => {
            tracing::error!(bucket = %def.name, error = %e, "cannot open the bucket");
            return None;
        }
        Err(e) => {
            tracing::error!(bucket = %def.name, error = %e, "opening the bucket panicked");
            return None;
        }
    };
    tracing::info!(bucket = %def.name, "bucket opened");
    install_manifest(&handle, entry);
    // The cluster's map before the agent starts: the placeholder (every vbucket active
    // here) must never be applied.
    if let Some(map) = &entry.map {
        let id = meta.id();
        handle.install_map(map.clone(), id, &control.node.node_info(id));
    }
    Some(control.insert(BucketControl::new(handle)))
}

/// Starts what runs for a bucket this node serves, once its map is installed: the restart
/// hold if its data came back short, and its cluster agent.
pub(crate) fn start(
    control: &Arc<Control>,
    meta: &MetaNode,
    bc: &Arc<BucketControl>,
    restarted: bool,
) {
    if crate::restart_hold::hold_at_start(bc, restarted) {
        tokio::spawn(crate::restart_hold::run(bc.clone(), meta.clone()));
    }
    bc.start_agent(&control.node);
}

/// Lists a bucket for SELECT_BUCKET once its agent applied a map (or after
/// [`FIRST_MAP_WAIT`]).
async fn list_once_applied(control: &Control, bc: &BucketControl) {
    let waited = tokio::time::timeout(FIRST_MAP_WAIT, async {
        while bc.applied_rev().is_none() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    if waited.is_err() {
        tracing::warn!(bucket = %bc.bucket.name, "listed before its cluster agent applied a map");
    }
    control.node.buckets.insert(bc.bucket.clone());
}

/// Deletes bucket `bc` here (the metadata deleted it).
async fn delete(control: &Control, bc: &Arc<BucketControl>) {
    let name = bc.bucket.name.clone();
    control.remove(&name);
    bc.stop().await;
    control.node.buckets.remove(&name);
    bc.bucket.mark_deleted();
    // Its indexes go with it (a bucket created later under the name starts without them).
    for def in control.node.index.definitions_of(&name) {
        if let Err(e) = control.node.index.drop_index(def.id).await {
            tracing::warn!(bucket = %name, index = %def.name, error = %e,
                "dropping a deleted bucket's index");
        }
    }
    let engine = bc.bucket.engine.clone();
    let dir = control.node.config.data_dir.join(&name);
    let removed = tokio::task::spawn_blocking(move || {
        if let Err(e) = engine.shutdown() {
            tracing::warn!(error = %e, "stopping a deleted bucket's engine");
        }
        std::fs::remove_dir_all(&dir)
    })
    .await;
    match removed {
        Ok(Ok(())) => tracing::info!(bucket = %name, "bucket deleted"),
        Ok(Err(e)) => {
            tracing::error!(bucket = %name, error = %e, "removing a deleted bucket's files")
        }
        Err(e) => tracing::error!(bucket = %name, error = %e, "deleting the bucket panicked"),
    }
}

/// The engine's conflict resolution for a bucket's `conflictResolutionType`.
pub(crate) fn resolution_of(mode: ConflictMode) -> ConflictResolution {
    match mode {
        ConflictMode::Seqno => ConflictResolution::Revision,
        ConflictMode::Lww => ConflictResolution::LastWriteWins,
    }
}
