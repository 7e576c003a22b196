//! A node: its bucket, the users allowed in, and what it tells clients about the cluster.

use crate::cluster_map::{self, BucketFacts, MapView};
use crate::config::ServerConfig;
use crate::node_error::OpenError;
use serde::{Deserialize, Serialize};
use sluice_cluster::{ClusterMap, NodeId, NodeInfo, TlsPorts};
use sluice_engine::{Bucket, BucketConfig, BucketType, SystemClock};
use sluice_storage::{FjallStore, StoreMemory};
use std::path::Path;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Facts about a bucket that must not change across restarts, kept beside its data.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct BucketIdentity {
    uuid: String,
    bucket_type: String,
    num_vbuckets: u16,
}

pub struct Node {
    pub config: ServerConfig,
    pub bucket: Arc<Bucket>,
    /// Hex uuid of the bucket, stable across restarts (cluster map `uuid`).
    pub bucket_uuid: String,
    /// The users, and the cluster identity once the secret is known.
    pub credentials: crate::credentials::NodeCredentials,
    pub started: Instant,
    pub connections_current: AtomicU64,
    pub connections_total: AtomicU64,
    pub connections_rejected: AtomicU64,
    /// Which connection thread gets each new connection, and how many each holds.
    pub placer: crate::placement::Placer,
    /// Open DCP producer connections and their statistics.
    pub dcp: crate::dcp::DcpRegistry,
    /// What the replication feeds into this node applied (STAT `replication`, `/metrics`).
    pub replication: crate::dcp::replication_stats::ReplicationStats,
    /// The replicas' seqno acks, which durable writes on this node's actives wait for.
    pub durability: crate::durability::DurabilityMonitor,
    kv_port: AtomicU16,
    admin_port: AtomicU16,
    /// The TLS ports bound (0 until bound, and without TLS).
    kv_tls_port: AtomicU16,
    admin_tls_port: AtomicU16,
    /// The TLS identity both TLS listeners serve with (`None`: no TLS ports).
    pub tls: Option<crate::tls::Tls>,
    /// The cluster map this node serves, rendered for it; the cluster agent follows it.
    map: tokio::sync::watch::Sender<Arc<MapView>>,
    /// Cut off from a majority of the cluster's voters (set by the manager's fencing):
    /// reads and writes on active vbuckets are refused.
    fenced: std::sync::atomic::AtomicBool,
    /// How long this node may serve its actives without a new round of probes (see
    /// `lease`): checked against the clock on every request, so a node that was frozen
    /// does not serve on stale word.
    pub lease: crate::lease::Lease,
    /// Woken when the bucket freed memory: writes stalled for room retry (see
    /// `ServerConfig::write_stall`).
    pub write_room: Arc<tokio::sync::Notify>,
}

impl Node {
    /// What this node authenticates to its peers' KV ports as: the cluster identity. The
    /// secret is set before the node serves a cluster map, so before any replication starts;
    /// without it the password is empty, which no peer accepts.
    pub fn peer_credentials(&self) -> sluice_client::Credentials {
        sluice_client::Credentials::new(
            sluice_types::identity::CLUSTER_USER,
            self.credentials.cluster_password().unwrap_or_default(),
        )
    }
    /// Opens (or creates) the bucket under the data directory and warms it up. Blocking.
    pub fn open(config: ServerConfig) -> Result<Node, OpenError> {
        // First: a broken certificate stops the start before any warmup.
        let tls = config
            .tls
            .as_ref()
            .map(crate::tls::Tls::load)
            .transpose()
            .map_err(OpenError::Tls)?;
        let bucket_dir = config.data_dir.join(&config.bucket);
        std::fs::create_dir_all(&bucket_dir).map_err(|source| OpenError::Io {
            what: "creating data directory",
            path: bucket_dir.clone(),
            source,
        })?;
        let identity = load_or_create_identity(&bucket_dir, &config)?;
        let mut bc = BucketConfig::new(&config.bucket, config.bucket_type);
        bc.num_vbuckets = config.vbuckets;
        bc.quota_bytes = config.memory_quota_mb * 1024 * 1024;
        bc.value_bytes_max = config.value_bytes_max;
        bc.expiry_pager_interval = Duration::from_secs(config.expiry_pager_interval_s.max(1));
        bc.flush_interval = config.flush_interval;
        let store: Option<Arc<dyn sluice_storage::Store>> = match config.bucket_type {
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
        let bucket = Bucket::open(bc, store, Arc::new(SystemClock)).map_err(OpenError::Warmup)?;
        let write_room = Arc::new(tokio::sync::Notify::new());
        let room = write_room.clone();
        bucket.set_room_listener(Box::new(move || room.notify_waiters()));
        tracing::info!(bucket = %config.bucket, items = bucket.gauges()[0].1,
            elapsed_ms = started.elapsed().as_millis() as u64, "warmup complete");
        let credentials =
            crate::credentials::NodeCredentials::new(&config.username, &config.password)
                .map_err(OpenError::Credentials)?;
        // Until the ports are bound (they may be 0 = any), the map shows the configured ones.
        let me = NodeInfo {
            id: SOLO_NODE,
            host: config.advertise_host.clone(),
            kv_port: config.kv_port,
            admin_port: config.admin_port,
            tls: None,
        };
        let facts = BucketFacts {
            name: &config.bucket,
            uuid: &identity.uuid,
            bucket_type: config.bucket_type,
        };
        let placeholder = MapView::render(
            cluster_map::single_node(me.clone(), config.replicas, config.vbuckets),
            SOLO_NODE,
            &me,
            &facts,
        );
        let placer =
            crate::placement::Placer::new(config.connection_placement, config.connection_threads);
        Ok(Node {
            kv_port: AtomicU16::new(config.kv_port),
            admin_port: AtomicU16::new(config.admin_port),
            kv_tls_port: AtomicU16::new(0),
            admin_tls_port: AtomicU16::new(0),
            tls,
            config,
            bucket,
            bucket_uuid: identity.uuid,
            credentials,
            started,
            connections_current: AtomicU64::new(0),
            connections_total: AtomicU64::new(0),
            connections_rejected: AtomicU64::new(0),
            placer,
            dcp: Default::default(),
            replication: Default::default(),
            durability: Default::default(),
            map: tokio::sync::watch::Sender::new(Arc::new(placeholder)),
            fenced: std::sync::atomic::AtomicBool::new(false),
            lease: crate::lease::Lease::new(std::time::Instant::now()),
            write_room,
        })
    }

    /// Fences the node (see the manager's `fencing`), or lifts the fence.
    pub fn set_fenced(&self, fenced: bool) {
        self.fenced.store(fenced, Ordering::Release);
    }

    /// Whether the node is fenced: its active vbuckets refuse reads and writes. Fenced
    /// too once its serving lease ran out.
    pub fn is_fenced(&self) -> bool {
        self.fenced.load(Ordering::Acquire) || self.lease.lapsed()
    }

    /// Records the ports actually bound (0 in the config means "any") and, while the node is
    /// not part of a cluster, serves the map of itself alone on them.
    pub fn set_bound_ports(&self, kv: u16, admin: u16, tls: Option<TlsPorts>) {
        self.kv_port.store(kv, Ordering::Relaxed);
        self.admin_port.store(admin, Ordering::Relaxed);
        if let Some(t) = tls {
            self.kv_tls_port.store(t.kv, Ordering::Relaxed);
            self.admin_tls_port.store(t.admin, Ordering::Relaxed);
        }
        let alone = self.cluster_map().map.nodes().len() == 1;
        if alone {
            let me = self.node_info(SOLO_NODE);
            let map = cluster_map::single_node(me, self.config.replicas, self.config.vbuckets);
            self.install_map(map, SOLO_NODE);
        }
    }

    /// Whether any vbucket of the bucket has ever taken a change (a high seqno above 0):
    /// such a node can neither join a cluster nor have its vbuckets placed elsewhere.
    pub fn holds_data(&self) -> bool {
        self.bucket.vb_seqnos(None).iter().any(|(_, s)| s.0 > 0)
    }

    /// Where this node listens, as a map lists it.
    pub fn node_info(&self, id: NodeId) -> NodeInfo {
        NodeInfo {
            id,
            host: self.config.advertise_host.clone(),
            kv_port: self.kv_port(),
            admin_port: self.admin_port(),
            tls: self.tls_ports(),
        }
    }

    /// The map this node serves now.
    pub fn cluster_map(&self) -> Arc<MapView> {
        self.map.borrow().clone()
    }

    /// Follows map changes (the cluster agent).
    pub fn watch_cluster_map(&self) -> tokio::sync::watch::Receiver<Arc<MapView>> {
        self.map.subscribe()
    }

    /// Serves `map` from now on, as node `this`. A map older than the one served is ignored
    /// (maps only move forward; a revision may be re-rendered, e.g. once ports are bound).
    pub fn install_map(&self, map: ClusterMap, this: NodeId) {
        let facts = BucketFacts {
            name: &self.config.bucket,
            uuid: &self.bucket_uuid,
            bucket_type: self.config.bucket_type,
        };
        let me = self.node_info(this);
        let view = Arc::new(MapView::render(map, this, &me, &facts));
        self.map.send_if_modified(|current| {
            if view.rev() < current.rev() {
                return false;
            }
            *current = view;
            true
        });
    }

    /// The TLS ports bound, if the node serves TLS.
    pub fn tls_ports(&self) -> Option<TlsPorts> {
        let kv = self.kv_tls_port.load(Ordering::Relaxed);
        let admin = self.admin_tls_port.load(Ordering::Relaxed);
        (self.tls.is_some() && kv != 0).then_some(TlsPorts { kv, admin })
    }

    pub fn kv_port(&self) -> u16 {
        self.kv_port.load(Ordering::Relaxed)
    }

    pub fn admin_port(&self) -> u16 {
        self.admin_port.load(Ordering::Relaxed)
    }

    /// The bucket's cluster map (CCCP JSON): GET_CLUSTER_CONFIG, NOT_MY_VBUCKET bodies.
    pub fn bucket_config_json(&self) -> bytes::Bytes {
        self.cluster_map().bucket_json.clone()
    }

    /// The bucketless (global) cluster map.
    pub fn global_config_json(&self) -> bytes::Bytes {
        self.cluster_map().global_json.clone()
    }
}

/// A node's id while it is not part of a cluster.
pub const SOLO_NODE: NodeId = NodeId(0);

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

fn load_or_create_identity(dir: &Path, config: &ServerConfig) -> Result<BucketIdentity, OpenError> {
    let path = dir.join("bucket.json");
    let wanted_type = match config.bucket_type {
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
        if id.num_vbuckets != config.vbuckets {
            return Err(OpenError::VbucketsChanged {
                dir: dir.to_path_buf(),
                had: id.num_vbuckets,
                asked: config.vbuckets,
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
        uuid: format!("{:032x}", rand::random::<u128>()),
        bucket_type: wanted_type.into(),
        num_vbuckets: config.vbuckets,
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
