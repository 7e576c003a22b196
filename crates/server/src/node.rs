//! A node: its bucket, the users allowed in, and what it tells clients about the cluster.

use crate::cluster_map;
use crate::config::ServerConfig;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use sluice_engine::{Bucket, BucketConfig, BucketType, SystemClock};
use sluice_sasl::MemoryCredentialStore;
use sluice_storage::{FjallStore, StoreMemory};
use std::path::Path;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
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
    pub credentials: MemoryCredentialStore,
    pub started: Instant,
    pub connections_current: AtomicU64,
    pub connections_total: AtomicU64,
    pub connections_rejected: AtomicU64,
    /// Open DCP producer connections and their statistics.
    pub dcp: crate::dcp::DcpRegistry,
    kv_port: AtomicU16,
    admin_port: AtomicU16,
    /// The map never changes while a single node runs: built once, after the ports are bound.
    bucket_config: OnceLock<Vec<u8>>,
}

impl Node {
    /// Opens (or creates) the bucket under the data directory and warms it up. Blocking.
    pub fn open(config: ServerConfig) -> anyhow::Result<Node> {
        let bucket_dir = config.data_dir.join(&config.bucket);
        std::fs::create_dir_all(&bucket_dir)
            .with_context(|| format!("creating data directory {}", bucket_dir.display()))?;
        let identity = load_or_create_identity(&bucket_dir, &config)?;
        let mut bc = BucketConfig::new(&config.bucket, config.bucket_type);
        bc.num_vbuckets = config.vbuckets;
        bc.quota_bytes = config.memory_quota_mb * 1024 * 1024;
        bc.value_bytes_max = config.value_bytes_max;
        bc.expiry_pager_interval = Duration::from_secs(config.expiry_pager_interval_s.max(1));
        let store: Option<Arc<dyn sluice_storage::Store>> = match config.bucket_type {
            BucketType::Couchbase => Some(Arc::new(
                open_store_in_batch_thread(
                    &bucket_dir.join("store"),
                    StoreMemory::for_quota(bc.quota_bytes),
                )
                .with_context(|| format!("opening storage in {}", bucket_dir.display()))?,
            )),
            BucketType::Ephemeral => None,
        };
        let started = Instant::now();
        let bucket =
            Bucket::open(bc, store, Arc::new(SystemClock)).context("warming up the bucket")?;
        tracing::info!(bucket = %config.bucket, items = bucket.gauges()[0].1,
            elapsed_ms = started.elapsed().as_millis() as u64, "warmup complete");
        let mut rng = rand::rngs::OsRng;
        let mut credentials = MemoryCredentialStore::new(&mut rng);
        credentials
            .add_user(&config.username, &config.password, &mut rng)
            .context("creating the administrator's credentials")?;
        Ok(Node {
            kv_port: AtomicU16::new(config.kv_port),
            admin_port: AtomicU16::new(config.admin_port),
            config,
            bucket,
            bucket_uuid: identity.uuid,
            credentials,
            started,
            connections_current: AtomicU64::new(0),
            connections_total: AtomicU64::new(0),
            connections_rejected: AtomicU64::new(0),
            dcp: Default::default(),
            bucket_config: OnceLock::new(),
        })
    }

    pub(crate) fn set_bound_ports(&self, kv: u16, admin: u16) {
        self.kv_port.store(kv, Ordering::Relaxed);
        self.admin_port.store(admin, Ordering::Relaxed);
    }

    pub fn kv_port(&self) -> u16 {
        self.kv_port.load(Ordering::Relaxed)
    }

    pub fn admin_port(&self) -> u16 {
        self.admin_port.load(Ordering::Relaxed)
    }

    /// The bucket's cluster map (CCCP JSON).
    pub fn bucket_config_json(&self) -> Vec<u8> {
        cluster_map::bucket_config(self)
    }

    /// The bucket's cluster map, built once (NOT_MY_VBUCKET bodies, config polling).
    pub fn bucket_config_cached(&self) -> &[u8] {
        self.bucket_config.get_or_init(|| self.bucket_config_json())
    }

    /// The bucketless (global) cluster map.
    pub fn global_config_json(&self) -> Vec<u8> {
        cluster_map::global_config(self)
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

fn load_or_create_identity(dir: &Path, config: &ServerConfig) -> anyhow::Result<BucketIdentity> {
    let path = dir.join("bucket.json");
    let wanted_type = match config.bucket_type {
        BucketType::Couchbase => "couchbase",
        BucketType::Ephemeral => "ephemeral",
    };
    if path.exists() {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let id: BucketIdentity =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        anyhow::ensure!(
            id.num_vbuckets == config.vbuckets,
            "{} was created with --vbuckets {}, not {}: keys would hash to other vbuckets",
            dir.display(),
            id.num_vbuckets,
            config.vbuckets
        );
        anyhow::ensure!(
            id.bucket_type == wanted_type,
            "{} holds a {} bucket, not {}",
            dir.display(),
            id.bucket_type,
            wanted_type
        );
        return Ok(id);
    }
    let id = BucketIdentity {
        uuid: format!("{:032x}", rand::random::<u128>()),
        bucket_type: wanted_type.into(),
        num_vbuckets: config.vbuckets,
    };
    let tmp = dir.join("bucket.json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(&id)?)?;
    std::fs::rename(&tmp, &path)?;
    Ok(id)
}
