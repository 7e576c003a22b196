//! One bucket a node serves: its engine, the map it is served under, its collections
//! manifest, and its durable writes.
//!
//! Everything a request needs of "its" bucket hangs here, so a connection that selected a
//! bucket holds one `Arc<BucketHandle>` and never looks a bucket up again. A node holds its
//! buckets in a [`Buckets`] table; a bucket deleted from the table stays alive for the
//! connections still holding it, which find its vbuckets dead or its engine shut down.

use crate::cluster_map::{self, BucketFacts, MapView};
use crate::config::ServerConfig;
use crate::node_error::OpenError;
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use sluice_cluster::{ClusterMap, Manifest, NodeId, NodeInfo};
use sluice_engine::{Bucket, BucketConfig, BucketType, SystemClock};
use sluice_storage::{FjallStore, StoreMemory};
use sluice_types::DurabilityLevel;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a bucket is opened with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketSpec {
    pub name: String,
    pub bucket_type: BucketType,
    pub vbuckets: u16,
    pub replicas: u8,
    pub quota_bytes: u64,
    /// The uuid the cluster gave the bucket. Files of a bucket of the same name under
    /// another uuid belong to a deleted one, and are wiped. `None`: keep (or create) the
    /// local identity's (the node's own bucket, opened before the node knows the cluster).
    pub uuid: Option<String>,
    /// How `*_WITH_META` versions are judged, fixed at the bucket's creation.
    pub conflict_resolution: sluice_engine::ConflictResolution,
}

impl BucketSpec {
    /// The bucket a node is started with (`--bucket` and its flags).
    pub fn from_config(config: &ServerConfig) -> BucketSpec {
        BucketSpec {
            name: config.bucket.clone(),
            bucket_type: config.bucket_type,
            vbuckets: config.vbuckets,
            replicas: config.replicas,
            quota_bytes: config.memory_quota_mb * 1024 * 1024,
            uuid: None,
            conflict_resolution: Default::default(),
        }
    }
}

/// Facts about a bucket that must not change across restarts, kept beside its data.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct BucketIdentity {
    uuid: String,
    bucket_type: String,
    num_vbuckets: u16,
}

pub struct BucketHandle {
    pub name: String,
    /// Hex uuid of the bucket's files here, stable across restarts.
    pub uuid: String,
    /// The uuid the cluster knows the bucket by, once the node knows it: what maps show
    /// (the node's own bucket is opened before that, under a uuid of its own).
    cluster_uuid: parking_lot::RwLock<Option<String>>,
    pub bucket_type: BucketType,
    pub engine: Arc<Bucket>,
    /// The replicas' seqno acks, which durable writes on this bucket's actives wait for.
    pub durability: crate::durability::DurabilityMonitor,
    /// Woken when the bucket freed memory: writes stalled for room retry (see
    /// `ServerConfig::write_stall`).
    pub write_room: Arc<tokio::sync::Notify>,
    /// The bucket's map as this node serves it; the cluster agent follows it.
    map: tokio::sync::watch::Sender<Arc<MapView>>,
    /// The bucket's collections manifest as this node serves it: the cluster's (installed
    /// from the replicated metadata), the default one until then. Requests read it through
    /// `manifest()`: a clone of the `Arc`, never the lock held across work.
    manifest: RwLock<Arc<Manifest>>,
    /// The served manifest's uid, read without the lock: a session keeps its own copy of
    /// the manifest and takes a new one only when this moved (see `Session::keyspace`).
    manifest_uid_now: std::sync::atomic::AtomicU64,
    /// Set once the cluster deleted the bucket: connections still holding it close.
    deleted: AtomicBool,
    /// The bucket's durability minimum as a wire level byte (0: none): every mutation is
    /// made at least this durable. The cluster's definition sets it.
    durability_min: AtomicU8,
}

impl BucketHandle {
    /// Opens (or creates) bucket `spec` under the node's data directory and warms it up,
    /// serving at first the map of `me` alone. Blocking.
    pub fn open(
        config: &ServerConfig,
        spec: &BucketSpec,
        me: &NodeInfo,
    ) -> Result<BucketHandle, OpenError> {
        let bucket_dir = config.data_dir.join(&spec.name);
        std::fs::create_dir_all(&bucket_dir).map_err(|source| OpenError::Io {
            what: "creating data directory",
            path: bucket_dir.clone(),
            source,
        })?;
        let identity = load_or_create_identity(&bucket_dir, spec)?;
        let mut bc = BucketConfig::new(&spec.name, spec.bucket_type);
        bc.num_vbuckets = spec.vbuckets;
        bc.quota_bytes = spec.quota_bytes;
        bc.value_bytes_max = config.value_bytes_max;
        bc.expiry_pager_interval = Duration::from_secs(config.expiry_pager_interval_s.max(1));
        bc.flush_interval = config.flush_interval;
        bc.conflict_resolution = spec.conflict_resolution;
        // Per node and bucket, so concurrent writes on two nodes (of two clusters replicating
        // both ways) rarely tie on CAS: see sluice_engine's `hlc`.
        bc.cas_salt = (rand::random::<u64>() % sluice_engine::CAS_SALT_MODULUS) as u16;
        let store: Option<Arc<dyn sluice_storage::Store>> = match spec.bucket_type {
            BucketType::Couchbase => Some(Arc::new(
                open_store_in_batch_thread(
                    &bucket_dir.join("store"),
                    StoreMemory::for_quota(bc.quota_bytes),
                )
                .map_err(|source| OpenError::Storage {
                    dir: bucket_dir.clone(),
                    source,
                })?,
            )),
            BucketType::Ephemeral => None,
        };
        let started = Instant::now();
        let engine = Bucket::open(bc, store, Arc::new(SystemClock)).map_err(OpenError::Warmup)?;
        let write_room = Arc::new(tokio::sync::Notify::new());
        let room = write_room.clone();
        engine.set_room_listener(Box::new(move || room.notify_waiters()));
        tracing::info!(bucket = %spec.name, items = engine.gauges()[0].1,
            elapsed_ms = started.elapsed().as_millis() as u64, "warmup complete");
        let manifest = Arc::new(Manifest::new());
        let facts = BucketFacts {
            name: &spec.name,
            uuid: &identity.uuid,
            bucket_type: spec.bucket_type,
            manifest_uid: manifest.uid(),
        };
        let alone = cluster_map::single_node(me.clone(), spec.replicas, spec.vbuckets);
        let placeholder = MapView::render(alone, me.id, me, &facts);
        Ok(BucketHandle {
            name: spec.name.clone(),
            cluster_uuid: parking_lot::RwLock::new(spec.uuid.clone()),
            uuid: identity.uuid,
            bucket_type: spec.bucket_type,
            engine,
            durability: Default::default(),
            write_room,
            map: tokio::sync::watch::Sender::new(Arc::new(placeholder)),
            manifest_uid_now: std::sync::atomic::AtomicU64::new(manifest.uid()),
            manifest: RwLock::new(manifest),
            deleted: AtomicBool::new(false),
            durability_min: AtomicU8::new(0),
        })
    }

    /// The level every mutation is made at least as durable as (`None`: as the client asks).
    pub fn durability_min(&self) -> Option<DurabilityLevel> {
        DurabilityLevel::from_wire(self.durability_min.load(Ordering::Relaxed))
    }

    /// Sets the bucket's durability minimum; the next mutation on any connection obeys it.
    pub fn set_durability_min(&self, level: Option<DurabilityLevel>) {
        let wire = level.map_or(0, DurabilityLevel::to_wire);
        self.durability_min.store(wire, Ordering::Relaxed);
    }

    /// Marks the bucket deleted: the connections that selected it close at their next
    /// request, its DCP streams at their next check.
    pub fn mark_deleted(&self) {
        self.deleted.store(true, Ordering::Release);
    }

    pub fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::Acquire)
    }

    /// The map this bucket is served under now.
    pub fn cluster_map(&self) -> Arc<MapView> {
        self.map.borrow().clone()
    }

    /// Follows map changes (the cluster agent, connections pushing maps).
    pub fn watch_cluster_map(&self) -> tokio::sync::watch::Receiver<Arc<MapView>> {
        self.map.subscribe()
    }

    /// Serves `map` from now on, as node `this` listening on `me`. A map older than the one
    /// served is ignored (maps only move forward; a revision may be re-rendered, e.g. once
    /// ports are bound). A rendering identical to the one served wakes no watcher: clients
    /// would be pushed a map they have, and the cluster agent would apply the map again,
    /// undoing vbucket states the map does not record yet (a takeover in flight).
    pub fn install_map(&self, map: ClusterMap, this: NodeId, me: &NodeInfo) {
        let view = Arc::new(self.render(map, this, me, self.manifest().uid()));
        self.map.send_if_modified(|current| {
            if view.rev() < current.rev() || view.same_rendering(current) {
                return false;
            }
            *current = view;
            true
        });
        // A manifest installed while this map was rendered is shown all the same.
        self.show_manifest_uid();
    }

    /// The bucket's collections manifest as this node serves it now.
    pub fn manifest(&self) -> Arc<Manifest> {
        self.manifest.read().clone()
    }

    /// The uid of [`Self::manifest`], without taking its lock.
    pub fn manifest_uid(&self) -> u64 {
        self.manifest_uid_now.load(Ordering::Acquire)
    }

    /// Serves `manifest` from now on if it is newer (a larger uid) than the one served;
    /// whether it did. The map served is rendered again with the new uid
    /// (`collectionsManifestUid`), at the same revision.
    pub fn install_manifest(&self, manifest: Arc<Manifest>) -> bool {
        {
            let mut current = self.manifest.write();
            if manifest.uid() <= current.uid() {
                return false;
            }
            *current = manifest.clone();
            self.manifest_uid_now
                .store(manifest.uid(), Ordering::Release);
        }
        // The engine records the change in its active vbuckets and sweeps what a dropped
        // collection left behind.
        self.engine
            .set_live_collections(crate::live_collections::of(&manifest));
        self.show_manifest_uid();
        true
    }

    /// Renders the map served again if it shows an older manifest uid than the one served,
    /// and puts it in place without waking the map's watchers. The revision is the same, so
    /// clients would ignore a push of it, and the cluster agent must not apply a map again
    /// (it would undo a takeover the map does not record yet); readers of the map
    /// (GET_CLUSTER_CONFIG, NOT_MY_VBUCKET, the admin map) see the new uid at once.
    ///
    /// Both the manifest and the map are stored before this runs, so whichever of
    /// `install_map` and `install_manifest` runs it last sees both.
    fn show_manifest_uid(&self) {
        loop {
            let uid = self.manifest().uid();
            let served = self.cluster_map();
            if served.manifest_uid >= uid {
                return;
            }
            let view = Arc::new(self.render(served.map.clone(), served.this, served.me(), uid));
            let mut replaced = false;
            self.map.send_if_modified(|current| {
                if Arc::ptr_eq(current, &served) {
                    *current = view;
                    replaced = true;
                }
                false
            });
            if replaced {
                return;
            }
            // Another map was installed meanwhile: look at that one.
        }
    }

    /// `map` rendered for node `this` (listening on `me`) with this bucket's facts and the
    /// manifest uid `manifest_uid`.
    fn render(&self, map: ClusterMap, this: NodeId, me: &NodeInfo, manifest_uid: u64) -> MapView {
        let cluster_uuid = self.cluster_uuid.read().clone();
        let facts = BucketFacts {
            name: &self.name,
            uuid: cluster_uuid.as_deref().unwrap_or(&self.uuid),
            bucket_type: self.bucket_type,
            manifest_uid,
        };
        MapView::render(map, this, me, &facts)
    }

    /// Shows `uuid`, the cluster's, in the maps from the next one installed on. Whether it
    /// changed (the map served then needs rendering again).
    pub fn adopt_cluster_uuid(&self, uuid: &str) -> bool {
        let mut current = self.cluster_uuid.write();
        if current.as_deref() == Some(uuid) {
            return false;
        }
        *current = Some(uuid.to_string());
        true
    }

    /// The bucket's cluster map (CCCP JSON): GET_CLUSTER_CONFIG, NOT_MY_VBUCKET bodies.
    pub fn bucket_config_json(&self) -> bytes::Bytes {
        self.cluster_map().bucket_json.clone()
    }

    /// Whether any vbucket has ever taken a change (a high seqno above 0).
    pub fn holds_data(&self) -> bool {
        self.engine.vb_seqnos(None).iter().any(|(_, s)| s.0 > 0)
    }
}

/// The buckets a node serves, by name.
#[derive(Default)]
pub struct Buckets {
    table: RwLock<BTreeMap<String, Arc<BucketHandle>>>,
}

impl Buckets {
    pub fn get(&self, name: &str) -> Option<Arc<BucketHandle>> {
        self.table.read().get(name).cloned()
    }

    /// Every bucket, in name order.
    pub fn all(&self) -> Vec<Arc<BucketHandle>> {
        self.table.read().values().cloned().collect()
    }

    /// The buckets' names, in order.
    pub fn names(&self) -> Vec<String> {
        self.table.read().keys().cloned().collect()
    }

    /// Serves `bucket` from now on (replacing one of the same name).
    pub fn insert(&self, bucket: Arc<BucketHandle>) {
        self.table.write().insert(bucket.name.clone(), bucket);
    }

    /// Stops listing bucket `name`; connections holding it keep it until they let go.
    pub fn remove(&self, name: &str) -> Option<Arc<BucketHandle>> {
        self.table.write().remove(name)
    }
}

/// Opens the store from a short-lived batch-class thread, so the storage engine's workers
/// (created during open) inherit the batch scheduling class.
fn open_store_in_batch_thread(
    dir: &Path,
    memory: StoreMemory,
) -> sluice_storage::Result<FjallStore> {
    let dir = dir.to_path_buf();
    std::thread::spawn(move || {
        sluice_engine::mark_current_thread_as_batch();
        FjallStore::open_with(&dir, memory)
    })
    .join()
    .unwrap_or_else(|_| {
        Err(sluice_storage::StoreError::Io(
            "storage open panicked".into(),
        ))
    })
}

fn load_or_create_identity(dir: &Path, spec: &BucketSpec) -> Result<BucketIdentity, OpenError> {
    let path = dir.join("bucket.json");
    let wanted_type = match spec.bucket_type {
        BucketType::Couchbase => "couchbase",
        BucketType::Ephemeral => "ephemeral",
    };
    let io = |what: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| OpenError::Io { what, path, source }
    };
    if path.exists() {
        let text = std::fs::read_to_string(&path).map_err(io("reading", &path))?;
        let id: BucketIdentity =
            serde_json::from_str(&text).map_err(|source| OpenError::Identity {
                path: path.clone(),
                source,
            })?;
        if spec.uuid.as_ref().is_some_and(|u| *u != id.uuid) {
            // A deleted bucket's files, left by a stop before they were removed.
            tracing::warn!(dir = %dir.display(), had = %id.uuid, "files of a deleted bucket of this name: wiped");
            std::fs::remove_dir_all(dir).map_err(io("removing", dir))?;
            std::fs::create_dir_all(dir).map_err(io("creating", dir))?;
            return load_or_create_identity(dir, spec);
        }
        if id.num_vbuckets != spec.vbuckets {
            return Err(OpenError::VbucketsChanged {
                dir: dir.to_path_buf(),
                had: id.num_vbuckets,
                asked: spec.vbuckets,
            });
        }
        if id.bucket_type != wanted_type {
            return Err(OpenError::TypeChanged {
                dir: dir.to_path_buf(),
                had: id.bucket_type,
                asked: wanted_type,
            });
        }
        return Ok(id);
    }
    let id = BucketIdentity {
        uuid: spec
            .uuid
            .clone()
            .unwrap_or_else(|| format!("{:032x}", rand::random::<u128>())),
        bucket_type: wanted_type.into(),
        num_vbuckets: spec.vbuckets,
    };
    let tmp = dir.join("bucket.json.tmp");
    let bytes = serde_json::to_vec_pretty(&id).map_err(|source| OpenError::Identity {
        path: path.clone(),
        source,
    })?;
    std::fs::write(&tmp, bytes).map_err(io("writing", &tmp))?;
    std::fs::rename(&tmp, &path).map_err(io("writing", &path))?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me(kv_port: u16) -> NodeInfo {
        NodeInfo {
            id: NodeId(0),
            host: "127.0.0.1".into(),
            kv_port,
            admin_port: 8091,
            tls: None,
            services: sluice_cluster::Services::ALL,
        }
    }

    /// An ephemeral bucket (no files but its identity) of 4 vbuckets.
    fn open(dir: &Path) -> BucketHandle {
        let config = ServerConfig::new(dir);
        let spec = BucketSpec {
            name: "b".into(),
            bucket_type: BucketType::Ephemeral,
            vbuckets: 4,
            replicas: 0,
            quota_bytes: 16 << 20,
            uuid: None,
            conflict_resolution: Default::default(),
        };
        BucketHandle::open(&config, &spec, &me(11210)).unwrap()
    }

    fn shown_uid(bucket: &BucketHandle) -> serde_json::Value {
        let json: serde_json::Value = serde_json::from_slice(&bucket.bucket_config_json()).unwrap();
        json["collectionsManifestUid"].clone()
    }

    fn manifest_at(uid: u64) -> Arc<Manifest> {
        let mut m = Manifest::new();
        for i in 0..uid {
            m.create_scope(&format!("s{i}")).unwrap();
        }
        Arc::new(m)
    }

    #[test]
    fn a_newer_manifest_is_served_and_shown_in_the_map_without_waking_its_watchers() {
        let dir = tempfile::tempdir().unwrap();
        let bucket = open(dir.path());
        assert_eq!(bucket.manifest().uid(), 0);
        assert_eq!(shown_uid(&bucket), "0");
        let watcher = bucket.watch_cluster_map();
        let rev = bucket.cluster_map().rev();

        assert!(bucket.install_manifest(manifest_at(26)));
        assert_eq!(bucket.manifest().scope_id("s25"), Ok(33));
        assert_eq!(shown_uid(&bucket), "1a");
        assert_eq!(bucket.cluster_map().rev(), rev, "the same revision");
        assert!(!watcher.has_changed().unwrap(), "no watcher woken");
        // Older or equal manifests are ignored.
        assert!(!bucket.install_manifest(manifest_at(26)));
        assert!(!bucket.install_manifest(manifest_at(3)));
        assert_eq!(bucket.manifest().uid(), 26);

        // A new map revision keeps showing the manifest served.
        let next = bucket
            .cluster_map()
            .map
            .with_vbmap(bucket.cluster_map().map.vbmap().clone());
        bucket.install_map(next.unwrap(), NodeId(0), &me(11210));
        assert!(watcher.has_changed().unwrap());
        assert_eq!(bucket.cluster_map().rev(), rev.next());
        assert_eq!(shown_uid(&bucket), "1a");
        bucket.engine.shutdown().unwrap();
    }

    #[test]
    fn only_a_map_rendered_differently_wakes_the_watchers() {
        let dir = tempfile::tempdir().unwrap();
        let bucket = open(dir.path());
        let mut watcher = bucket.watch_cluster_map();
        let served = bucket.cluster_map();

        // The same map for the same node on the same ports: nothing to tell.
        bucket.install_map(served.map.clone(), served.this, served.me());
        assert!(!watcher.has_changed().unwrap(), "an identical rendering");

        // The same revision with another bucket uuid shows something new.
        assert!(bucket.adopt_cluster_uuid("0123456789abcdef0123456789abcdef"));
        bucket.install_map(served.map.clone(), served.this, served.me());
        assert!(
            watcher.has_changed().unwrap(),
            "the uuid the map shows changed"
        );
        watcher.borrow_and_update();
        assert_eq!(bucket.cluster_map().rev(), served.rev());

        // Once ports change, the same revision is rendered anew.
        bucket.install_map(served.map.clone(), served.this, &me(11299));
        assert!(
            watcher.has_changed().unwrap(),
            "the ports this node shows changed"
        );
        bucket.engine.shutdown().unwrap();
    }
}
