//! `sluice server`: flags → `ServerConfig`, then serve until Ctrl-C or SIGTERM.

use clap::{Args, ValueEnum};
use sluice_engine::BucketType;
use sluice_server::ServerConfig;
use std::path::PathBuf;

/// How much of the traffic between members is encrypted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EncryptionArg {
    /// Nothing: members call each other in cleartext (with the cluster secret).
    Off,
    /// The control plane: Raft, joins, rebalance, failover and janitor calls.
    Control,
    /// The control plane and the data: replication and rebalance streams too.
    All,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum BucketTypeArg {
    /// Durable: persisted to disk, values evicted under memory pressure.
    Couchbase,
    /// Memory only: never touches disk; temporary failure when full.
    Ephemeral,
}

/// How new connections are spread over the connection threads.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum PlacementArg {
    /// On the thread for the CPU the connection's packets arrive on (SO_INCOMING_CPU), so a
    /// client thread's connections share one connection thread; no thread more than 16
    /// connections ahead of the least loaded one.
    IncomingCpu,
    /// As incoming-cpu, with each connection thread bound to one CPU.
    Pinned,
    /// In turn.
    RoundRobin,
}

#[derive(Args, Debug)]
pub struct ServerArgs {
    /// Directory for the node's data (created if missing).
    #[arg(long, env = "SLUICE_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    /// Address every listener binds.
    #[arg(long, env = "SLUICE_BIND", default_value = "127.0.0.1")]
    pub bind: String,
    /// Host clients are told to dial (in the cluster map). Defaults to --bind.
    #[arg(long, env = "SLUICE_ADVERTISE_HOST")]
    pub advertise_host: Option<String>,
    /// KV port (Couchbase SDKs, DCP clients).
    #[arg(long, env = "SLUICE_KV_PORT", default_value_t = 11210)]
    pub kv_port: u16,
    /// Admin HTTP port (/health, /metrics, stats).
    #[arg(long, env = "SLUICE_ADMIN_PORT", default_value_t = 8091)]
    pub admin_port: u16,
    /// The node's TLS certificate (PEM, with any intermediates). With `--tls-key`, the KV
    /// and admin ports are also served over TLS (`--kv-tls-port`, `--admin-tls-port`), and
    /// the map lists them as `kvSSL` / `mgmtSSL` for `couchbases://` clients.
    #[arg(
        long,
        env = "SLUICE_TLS_CERT",
        requires = "tls_key",
        value_name = "PEM"
    )]
    pub tls_cert: Option<PathBuf>,
    /// The TLS certificate's private key (PEM).
    #[arg(
        long,
        env = "SLUICE_TLS_KEY",
        requires = "tls_cert",
        value_name = "PEM"
    )]
    pub tls_key: Option<PathBuf>,
    /// KV port over TLS (only with --tls-cert).
    #[arg(long, env = "SLUICE_KV_TLS_PORT", default_value_t = 11207)]
    pub kv_tls_port: u16,
    /// Admin HTTP port over TLS (only with --tls-cert).
    #[arg(long, env = "SLUICE_ADMIN_TLS_PORT", default_value_t = 18091)]
    pub admin_tls_port: u16,
    /// Encrypt the cluster's own traffic, as Couchbase's node-to-node encryption does.
    /// `control`: Raft, joins, and the rebalance, failover, janitor and probe calls between
    /// members go to their TLS admin ports, verified against --tls-ca, and this node takes
    /// its members' calls only over TLS (a --join names the member's TLS admin port).
    /// `all`: also the replication and rebalance streams, to the members' TLS KV ports.
    /// Needs --tls-cert, --tls-key and --tls-ca; every member must be started with the same
    /// setting. Under `control`, replication stays in cleartext (its KV logins are SCRAM:
    /// the secret never crosses, the documents do).
    #[arg(
        long,
        env = "SLUICE_CLUSTER_ENCRYPTION",
        value_enum,
        default_value = "off",
        requires_if("control", "tls_ca"),
        requires_if("all", "tls_ca")
    )]
    pub cluster_encryption: EncryptionArg,
    /// The CA (PEM) the members' certificates are signed by: what this node trusts when it
    /// calls its peers with --cluster-encryption control.
    #[arg(long, env = "SLUICE_TLS_CA", value_name = "PEM")]
    pub tls_ca: Option<PathBuf>,
    /// Optional unauthenticated memcached-binary listener bound to the bucket, for plain
    /// memcached tools. Off unless given.
    #[arg(long, env = "SLUICE_MEMCACHED_PORT")]
    pub memcached_port: Option<u16>,
    /// Bucket name.
    #[arg(long, env = "SLUICE_BUCKET", default_value = "default")]
    pub bucket: String,
    /// Bucket type.
    #[arg(
        long,
        env = "SLUICE_BUCKET_TYPE",
        value_enum,
        default_value = "couchbase"
    )]
    pub bucket_type: BucketTypeArg,
    /// Memory quota of the bucket, in MiB.
    #[arg(long, env = "SLUICE_MEMORY_QUOTA_MB", default_value_t = 256)]
    pub memory_quota_mb: u64,
    /// Block cache of the index service, in MiB (Couchbase's index memory quota; at least
    /// 16). It fills as indexes are read; index memtables come on top of it.
    #[arg(long, env = "SLUICE_INDEX_MEMORY_QUOTA_MB",
          default_value_t = sluice_server::INDEX_MEMORY_QUOTA_MB_DEFAULT)]
    pub index_memory_quota_mb: u64,
    /// The services this node runs, comma-separated: kv (the data service; Couchbase's
    /// "data"), index, query (Couchbase's "n1ql"). Only kv nodes hold vbuckets, only index
    /// nodes hold index copies, only query nodes answer /query/service. Fixed once the node
    /// has joined; the node that creates a cluster must run kv.
    #[arg(long, env = "SLUICE_SERVICES", default_value = "kv,index,query",
          value_parser = parse_services)]
    pub services: sluice_cluster::Services,
    /// Number of vbuckets (fixed for the life of the data directory).
    #[arg(long, env = "SLUICE_VBUCKETS", default_value_t = 1024,
          value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub vbuckets: u16,
    #[command(flatten)]
    pub admin: crate::login_args::AdminLogin,
    /// Most concurrent connections per listener for users (and for connections not yet
    /// authenticated); more go into the KV port's reserve (`--system-connections`), then are
    /// closed at once.
    #[arg(long, env = "SLUICE_MAX_CONNECTIONS", default_value_t = 10_000)]
    pub max_connections: usize,
    /// KV connections beyond --max-connections kept for the cluster's own replication and
    /// rebalance: one admitted there is closed unless it authenticates as the cluster.
    #[arg(long, env = "SLUICE_SYSTEM_CONNECTIONS",
          default_value_t = sluice_server::SYSTEM_CONNECTIONS_DEFAULT)]
    pub system_connections: usize,
    /// Largest packet body accepted before a connection authenticates; a larger one closes
    /// the connection before its body is read.
    #[arg(long, env = "SLUICE_MAX_UNAUTHENTICATED_BYTES",
          default_value_t = sluice_server::UNAUTH_BODY_BYTES_MAX_DEFAULT as u32,
          value_parser = clap::value_parser!(u32).range(1024..))]
    pub max_unauthenticated_bytes: u32,
    /// Seconds a new connection has to authenticate before it is closed.
    #[arg(long, env = "SLUICE_AUTH_TIMEOUT_S",
          default_value_t = sluice_server::AUTH_TIMEOUT_DEFAULT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    pub auth_timeout_s: u64,
    /// Seconds an authenticated connection may send nothing (with no answer pending) before
    /// it is closed; 0 = never. DCP connections are watched by their noops instead.
    #[arg(long, env = "SLUICE_IDLE_TIMEOUT_S",
          default_value_t = sluice_server::IDLE_TIMEOUT_DEFAULT.as_secs())]
    pub idle_timeout_s: u64,
    /// Connections the admin port (and, apart, the TLS admin port) holds at once; one more
    /// is closed as soon as it is accepted.
    #[arg(long, env = "SLUICE_ADMIN_MAX_CONNECTIONS",
          default_value_t = sluice_server::admin_limits::ADMIN_CONNECTIONS_MAX_DEFAULT as u32,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub admin_max_connections: u32,
    /// Admin connections beyond --admin-max-connections kept for the cluster's members
    /// (per admin listener): one admitted there is served only requests made as the
    /// cluster identity; anything else gets 503 and is closed.
    #[arg(long, env = "SLUICE_ADMIN_SYSTEM_CONNECTIONS",
          default_value_t = sluice_server::admin_limits::ADMIN_RESERVE_DEFAULT as u32,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub admin_system_connections: u32,
    /// Seconds an admin connection may go without a byte in either direction before it is
    /// closed (slow headers, a silent keep-alive, a client that never reads).
    #[arg(long, env = "SLUICE_ADMIN_IDLE_TIMEOUT_S",
          default_value_t = sluice_server::admin_limits::ADMIN_IDLE_TIMEOUT_DEFAULT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    pub admin_idle_timeout_s: u64,
    /// Seconds an admin request may take before it is answered 503.
    #[arg(long, env = "SLUICE_ADMIN_REQUEST_TIMEOUT_S",
          default_value_t = sluice_server::admin_limits::ADMIN_REQUEST_TIMEOUT_DEFAULT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    pub admin_request_timeout_s: u64,
    /// Largest document value accepted, in bytes.
    #[arg(long, env = "SLUICE_MAX_ITEM_BYTES", default_value_t = 20 * 1024 * 1024)]
    pub max_item_bytes: usize,
    /// How often the expiry pager removes expired documents, in seconds.
    #[arg(long, env = "SLUICE_EXPIRY_PAGER_INTERVAL_S", default_value_t = 10)]
    pub expiry_pager_interval_s: u64,
    /// Shortest time between the starts of two flusher commits, in milliseconds: writes
    /// arriving meanwhile are persisted together by the next one (fewer syncs under a steady
    /// trickle of writes). A write arriving while the flusher is idle is persisted at once.
    /// 0 commits again as soon as the last commit is done.
    #[arg(
        long,
        env = "SLUICE_FLUSH_INTERVAL_MS",
        default_value_t = sluice_engine::FLUSH_INTERVAL_DEFAULT.as_millis() as u64
    )]
    pub flush_interval_ms: u64,
    /// How long a write to a couchbase bucket that has no memory for it right now (the
    /// persistence backlog at its budget, or the quota full of unpersisted items) waits,
    /// in milliseconds, for the flusher or the pager to make room before it is answered
    /// TMPFAIL. The connection's later requests wait behind it. 0: TMPFAIL at once.
    #[arg(
        long,
        env = "SLUICE_WRITE_STALL_MS",
        default_value_t = sluice_server::WRITE_STALL_DEFAULT.as_millis() as u64
    )]
    pub write_stall_ms: u64,
    /// Threads serving connections, each with its own event loop (default: one per core).
    #[arg(long, env = "SLUICE_WORKERS")]
    pub workers: Option<usize>,
    /// Threads of the runtime that serves the admin port, the query service and the index
    /// feeds (default: one per core). The KV connections have their own (`--workers`).
    #[arg(long, env = "SLUICE_SERVICE_THREADS", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub service_threads: Option<u16>,
    /// How new connections are spread over the connection threads.
    #[arg(
        long,
        env = "SLUICE_CONNECTION_PLACEMENT",
        value_enum,
        default_value = "incoming-cpu"
    )]
    pub connection_placement: PlacementArg,
    /// Keep this node's bucket a replica of another node's (its KV address, host:port):
    /// every vbucket follows that node over DCP, with the same credentials and bucket
    /// name. Reads from it with GET_REPLICA; writes get NOT_MY_VBUCKET.
    #[arg(long, env = "SLUICE_REPLICA_OF", value_name = "HOST:PORT")]
    pub replica_of: Option<String>,
    /// Memory each DCP connection may hold for its streams (backfilled items and items read
    /// from memory, not yet sent), in MiB. At least 8.
    #[arg(long, env = "SLUICE_DCP_BACKFILL_BUFFER_MB", default_value_t = 20,
          value_parser = clap::value_parser!(u64).range(8..=4096))]
    pub dcp_backfill_buffer_mb: u64,
    /// Join the cluster one of whose members has this admin address (host:port). Read on
    /// the data directory's first start only: afterwards the node restarts as a member (on
    /// the same ports). Without it, a fresh data directory starts a new cluster of one.
    #[arg(
        long,
        env = "SLUICE_JOIN",
        value_name = "HOST:ADMINPORT",
        conflicts_with = "replica_of"
    )]
    pub join: Option<String>,
    /// Replica copies per vbucket (0 to 3), when this node starts a new cluster. The slots
    /// stay empty until other nodes join and the bucket is placed on them.
    #[arg(long, env = "SLUICE_REPLICAS", default_value_t = 0,
          value_parser = clap::value_parser!(u8).range(0..=3))]
    pub replicas: u8,
    /// Fail a node over automatically once it has been unreachable this many seconds (the
    /// metadata leader probes every node; at most one node is failed over this way until a
    /// rebalance, and never one whose vbuckets have no replica elsewhere). 0 turns it off;
    /// otherwise at least 2, longer than a cut-off node takes to fence itself (1.5 s), so a
    /// node failed over automatically has stopped serving first.
    #[arg(
        long,
        env = "SLUICE_AUTO_FAILOVER_TIMEOUT",
        default_value_t = 120,
        value_name = "SECS",
        value_parser = auto_failover_secs
    )]
    pub auto_failover_timeout: u64,
    /// Source address of this node's connections to other nodes (replication, Raft,
    /// probes). Default: the OS chooses. Giving each node its own loopback address lets
    /// a fault-injecting proxy tell their connections apart on one host.
    #[arg(long, env = "SLUICE_SOURCE_IP", value_name = "IP")]
    pub source_ip: Option<std::net::IpAddr>,
}

impl ServerArgs {
    pub fn to_config(&self) -> ServerConfig {
        let mut c = ServerConfig::new(&self.data_dir);
        c.bind_host = self.bind.clone();
        c.advertise_host = self
            .advertise_host
            .clone()
            .unwrap_or_else(|| self.bind.clone());
        c.kv_port = self.kv_port;
        c.admin_port = self.admin_port;
        c.memcached_port = self.memcached_port;
        c.tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(sluice_server::tls::TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
            }),
            _ => None,
        };
        c.kv_tls_port = self.kv_tls_port;
        c.admin_tls_port = self.admin_tls_port;
        c.cluster_encryption = match self.cluster_encryption {
            EncryptionArg::Off => sluice_server::ClusterEncryption::Off,
            EncryptionArg::Control => sluice_server::ClusterEncryption::Control,
            EncryptionArg::All => sluice_server::ClusterEncryption::All,
        };
        c.cluster_ca = self.tls_ca.clone();
        c.bucket = self.bucket.clone();
        c.bucket_type = match self.bucket_type {
            BucketTypeArg::Couchbase => BucketType::Couchbase,
            BucketTypeArg::Ephemeral => BucketType::Ephemeral,
        };
        c.memory_quota_mb = self.memory_quota_mb;
        c.index_memory_quota_mb = self.index_memory_quota_mb;
        c.services = self.services;
        c.vbuckets = self.vbuckets;
        c.username = self.admin.username.clone();
        c.password = self.admin.password.clone();
        c.connections_max = self.max_connections;
        c.system_connections = self.system_connections;
        c.unauth_body_bytes_max = self.max_unauthenticated_bytes as usize;
        c.auth_timeout = std::time::Duration::from_secs(self.auth_timeout_s);
        c.admin_limits = sluice_server::admin_limits::AdminLimits {
            connections_max: self.admin_max_connections as usize,
            reserve: self.admin_system_connections as usize,
            idle: std::time::Duration::from_secs(self.admin_idle_timeout_s),
            request: std::time::Duration::from_secs(self.admin_request_timeout_s),
        };
        c.idle_timeout =
            (self.idle_timeout_s > 0).then(|| std::time::Duration::from_secs(self.idle_timeout_s));
        c.value_bytes_max = self.max_item_bytes;
        c.expiry_pager_interval_s = self.expiry_pager_interval_s;
        c.flush_interval = std::time::Duration::from_millis(self.flush_interval_ms);
        c.write_stall = std::time::Duration::from_millis(self.write_stall_ms);
        c.replica_of = self.replica_of.clone();
        c.join = self.join.clone();
        c.replicas = self.replicas;
        c.source_ip = self.source_ip;
        c.auto_failover_timeout = (self.auto_failover_timeout > 0)
            .then(|| std::time::Duration::from_secs(self.auto_failover_timeout));
        c.dcp_backfill_buffer_bytes = (self.dcp_backfill_buffer_mb as usize) << 20;
        c.connection_placement = match self.connection_placement {
            PlacementArg::IncomingCpu => sluice_server::Placement::IncomingCpu,
            PlacementArg::Pinned => sluice_server::Placement::Pinned,
            PlacementArg::RoundRobin => sluice_server::Placement::RoundRobin,
        };
        if let Some(w) = self.workers {
            c.connection_threads = w.max(1);
        }
        c
    }
}

pub fn run(args: ServerArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.memory_quota_mb >= 16,
        "--memory-quota-mb must be at least 16"
    );
    anyhow::ensure!(
        args.index_memory_quota_mb >= 16,
        "--index-memory-quota-mb must be at least 16"
    );
    anyhow::ensure!(
        args.max_connections > 0,
        "--max-connections must be positive"
    );
    // The main runtime accepts, serves the admin port (and with it the query service), feeds
    // the indexes and runs blocking disk work; the KV connections have their own threads.
    // Queries and index feeds are CPU work, so by default it has a thread per core.
    let threads = args.service_threads.map_or_else(
        || std::thread::available_parallelism().map_or(2, |n| n.get()),
        usize::from,
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()?;
    Ok(rt.block_on(sluice_manager::run_until(args.to_config(), stop_signal()))?)
}

/// Resolves on Ctrl-C or SIGTERM (also `sluice watch`'s clean exit).
pub(crate) async fn stop_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// `--auto-failover-timeout`: 0 (off) or more seconds than the fencing bound.
pub fn auto_failover_secs(v: &str) -> Result<u64, String> {
    let secs: u64 = v.parse().map_err(|e| format!("{e}"))?;
    let bound = sluice_manager::fencing::FENCE_BOUND;
    if secs != 0 && std::time::Duration::from_secs(secs) <= bound {
        return Err(format!(
            "must be 0 (off) or more than the fencing bound ({} ms): a node failed over \
             automatically must have stopped serving first",
            bound.as_millis()
        ));
    }
    Ok(secs)
}

/// `--services`, as clap reads it.
pub(crate) fn parse_services(list: &str) -> Result<sluice_cluster::Services, String> {
    sluice_cluster::Services::parse(list).map_err(|e| e.to_string())
}
