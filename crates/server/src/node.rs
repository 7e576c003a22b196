//! A node: its buckets, the users allowed in, and what it tells clients about the cluster.

use crate::bucket_handle::{BucketHandle, BucketSpec, Buckets};
use crate::cluster_map::{self, MapView};
use crate::config::ServerConfig;
use crate::node_error::OpenError;
use sluice_cluster::{ClusterMap, NodeId, NodeInfo, TlsPorts};
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

pub struct Node {
    pub config: ServerConfig,
    /// The bucket the node was started with (`--bucket`): the memcached port's, and the one
    /// the control plane manages until it manages each bucket.
    pub bucket: Arc<BucketHandle>,
    /// Every bucket the node serves, `bucket` among them.
    pub buckets: Buckets,
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
    kv_port: AtomicU16,
    admin_port: AtomicU16,
    /// The TLS ports bound (0 until bound, and without TLS).
    kv_tls_port: AtomicU16,
    admin_tls_port: AtomicU16,
    /// The TLS identity both TLS listeners serve with (`None`: no TLS ports).
    pub tls: Option<crate::tls::Tls>,
    /// How this node verifies its peers when the cluster encrypts its traffic
    /// (`ServerConfig::cluster_encryption`); `None`: members call each other in cleartext.
    pub member_tls: Option<Arc<rustls::ClientConfig>>,
    /// Cut off from a majority of the cluster's voters (set by the manager's fencing):
    /// reads and writes on active vbuckets are refused.
    fenced: std::sync::atomic::AtomicBool,
    /// How long this node may serve its actives without a new round of probes (see
    /// `lease`): checked against the clock on every request, so a node that was frozen
    /// does not serve on stale word.
    pub lease: crate::lease::Lease,
    /// The index service: the index store under `data_dir/index` and its feeders.
    pub index: Arc<crate::index_service::IndexService>,
    /// The control plane's figures (XDCR), once it installed them.
    pub control_stats: std::sync::OnceLock<Arc<dyn crate::control_stats::ControlStats>>,
}

impl Node {
    /// Where this node's replication and rebalance streams dial `peer`: its TLS KV port when
    /// the cluster encrypts its data too (`ClusterEncryption::All`).
    pub fn peer_kv_addr(&self, peer: &NodeInfo) -> String {
        peer.kv_addr(self.config.cluster_encryption.data())
    }

    /// How this node dials a member's KV port `addr` (as [`Node::peer_kv_addr`] gave it) for
    /// `bucket`, authenticated as `username`: from the configured source address, and over
    /// TLS when `tls` (the cluster encrypts its data). A TLS setup that fails is logged and
    /// the options are left without TLS: the handshake-less connection to a TLS port then
    /// fails and is retried by the caller, never the data in the clear by mistake.
    pub fn member_connect_options(
        &self,
        addr: &str,
        bucket: &str,
        (username, password): (&str, &str),
        tls: bool,
    ) -> sluice_client::ConnectOptions {
        let mut connect = sluice_client::ConnectOptions::sluice(username, password, bucket);
        connect.source_ip = self.config.source_ip;
        if let (true, Some(config)) = (tls, &self.member_tls) {
            let host = sluice_client::net::host_of(addr);
            match sluice_client::TlsConnect::for_host(config.clone(), host) {
                Ok(t) => connect.tls = Some(Arc::new(t)),
                Err(e) => tracing::error!(%addr, error = %e, "no TLS to the member"),
            }
        }
        connect
    }

    /// How this node calls its peers' admin ports: from its source address, and over TLS
    /// (verifying them against the cluster's CA) when the cluster encrypts its control
    /// traffic.
    pub fn member_dial(&self) -> sluice_client::net::Dial {
        sluice_client::net::Dial {
            source: self.config.source_ip,
            tls: self.member_tls.clone(),
        }
    }

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
        let member_tls = match config.cluster_encryption {
            crate::ClusterEncryption::Off => None,
            _ => Some(
                crate::tls::member_client(config.cluster_ca.as_deref(), config.tls.as_ref())
                    .map_err(OpenError::Tls)?,
            ),
        };
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
            services: config.services,
        };
        let bucket = Arc::new(BucketHandle::open(
            &config,
            &BucketSpec::from_config(&config),
            &me,
        )?);
        let index_dir = config.data_dir.join("index");
        let index = crate::index_service::IndexService::open(
            &index_dir,
            config.index_memory_quota_mb.saturating_mul(1024 * 1024),
        )
        .map_err(|source| OpenError::Index {
            dir: index_dir,
            source,
        })?;
        let buckets = Buckets::default();
        buckets.insert(bucket.clone());
        let placer =
            crate::placement::Placer::new(config.connection_placement, config.connection_threads);
        Ok(Node {
            kv_port: AtomicU16::new(config.kv_port),
            admin_port: AtomicU16::new(config.admin_port),
            kv_tls_port: AtomicU16::new(0),
            admin_tls_port: AtomicU16::new(0),
            tls,
            member_tls,
            config,
            bucket,
            buckets,
            credentials,
            started: Instant::now(),
            connections_current: AtomicU64::new(0),
            connections_total: AtomicU64::new(0),
            connections_rejected: AtomicU64::new(0),
            placer,
            dcp: Default::default(),
            replication: Default::default(),
            fenced: std::sync::atomic::AtomicBool::new(false),
            lease: crate::lease::Lease::new(std::time::Instant::now()),
            index: Arc::new(index),
            control_stats: std::sync::OnceLock::new(),
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
        let me = self.node_info(SOLO_NODE);
        for bucket in self.buckets.all() {
            let served = bucket.cluster_map();
            if served.map.nodes().len() == 1 {
                let vbuckets = served.map.vbmap().num_vbuckets();
                let replicas = served.map.vbmap().replicas();
                let map = cluster_map::single_node(me.clone(), replicas, vbuckets);
                bucket.install_map(map, SOLO_NODE, &me);
            }
        }
    }

    /// Whether any vbucket of any bucket has ever taken a change (a high seqno above 0):
    /// such a node can neither join a cluster nor have its vbuckets placed elsewhere.
    pub fn holds_data(&self) -> bool {
        self.buckets.all().iter().any(|b| b.holds_data())
    }

    /// Where this node listens, as a map lists it.
    pub fn node_info(&self, id: NodeId) -> NodeInfo {
        NodeInfo {
            id,
            host: self.config.advertise_host.clone(),
            kv_port: self.kv_port(),
            admin_port: self.admin_port(),
            tls: self.tls_ports(),
            services: self.config.services,
        }
    }

    /// The map the node's own bucket (`bucket`) is served under now; its node list is what
    /// bucketless clients are told (the global config).
    pub fn cluster_map(&self) -> Arc<MapView> {
        self.bucket.cluster_map()
    }

    /// Serves `map` for the node's own bucket from now on, as node `this`.
    pub fn install_map(&self, map: ClusterMap, this: NodeId) {
        self.bucket.install_map(map, this, &self.node_info(this));
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

    /// The bucketless (global) cluster map.
    pub fn global_config_json(&self) -> bytes::Bytes {
        self.cluster_map().global_json.clone()
    }
}

/// A node's id while it is not part of a cluster.
pub const SOLO_NODE: NodeId = NodeId(0);
