//! A Sluice node's data plane: the network front end for KV, memcached and DCP, with the
//! bucket behind it. The only crate (with the client) that touches sockets and the async
//! runtime for data; the control plane (membership, the cluster agent, failover, rebalance)
//! is `sluice-manager`, which starts a node through [`bind`] and [`serve`].
//!
//! Layout:
//! - `config`      — [`ServerConfig`]: ports, data directory, bucket, credentials, limits;
//! - `node`        — [`Node`]: the buckets, the credential store, counters;
//! - `bucket_handle` — [`BucketHandle`]: one bucket's engine, map and durable writes, and
//!   [`Buckets`], the node's table of them;
//! - `cluster_map` — the map this node serves, rendered (CCCP JSON) once per revision;
//! - `live_collections` — the part of a bucket's manifest its engine is told;
//! - `listener`    — accept loops (KV port, optional memcached port), connection limit;
//! - `placement`   — which connection thread takes a new connection;
//! - `workers`     — connection threads, one single-threaded runtime each;
//! - `connection`  — one task per connection: read, frame, execute, write, in order;
//! - `credentials` — [`NodeCredentials`]: the users and the cluster identity, for SASL and
//!   HTTP Basic;
//! - `session`     — per-connection state: features, user, bucket, SASL exchange;
//! - `exec/`       — execution per command family (`kv`, `session_ops` and `stats`,
//!   `vbucket_ops`, `dcp_ops`), each a plain function from a validated request to response
//!   bytes, matching its family exhaustively; `keyspace`: the client's key → the engine's
//!   collection-qualified key; `collections`: COLLECTIONS_GET_ID / GET_SCOPE_ID;
//! - `dcp/`        — DCP producer connections (streams, backfills, flow control, noops),
//!   and replication (the consumer side);
//! - `durability/` — SyncWrites on this node's actives: the monitors (`sluice_dcp::durability`)
//!   fed with acks, persistence and time, and the writers' waits;
//! - `admin`       — the data plane's HTTP routes: `/health`, `/metrics`, bucket stats, the map;
//! - `metrics`     — the Prometheus collector over engine counters.

mod admin;
pub mod admin_limits;
mod bucket_handle;
mod cluster_map;
mod config;
mod connection;
pub mod control_stats;
mod credentials;
mod dcp;
mod durability;
mod exec;
pub mod index_service;
mod lease;
mod listener;
mod live_collections;
mod metrics;
mod node;
mod node_error;
mod placement;
pub mod query_service;
mod session;
pub mod tls;
mod workers;

pub use admin::{router as admin_router, BucketParam};
pub use bucket_handle::{BucketHandle, BucketSpec, Buckets};
pub use cluster_map::{BucketFacts, MapView};
pub use config::{
    ClusterEncryption, ServerConfig, AUTH_TIMEOUT_DEFAULT, IDLE_TIMEOUT_DEFAULT,
    INDEX_MEMORY_QUOTA_MB_DEFAULT, SYSTEM_CONNECTIONS_DEFAULT, UNAUTH_BODY_BYTES_MAX_DEFAULT,
    WRITE_STALL_DEFAULT,
};
pub use credentials::{
    credential_record, Caller, ClusterIdentityError, CredentialsRefused, NodeCredentials,
    RecordError, UserError,
};
pub use dcp::replication::{Replication, ReplicationSpec, TAKEOVERS_QUEUED_MAX};
pub use dcp::replication_stats::now_unix_ns;
pub use dcp::stages::{Stage, StageLatency};
pub use node::Node;
pub use node_error::OpenError;
pub use placement::Placement;

use std::sync::Arc;
use tokio::net::TcpListener;

/// A node's listeners, bound: KV, admin HTTP, their TLS twins when the node has a
/// certificate, and the optional memcached port.
pub struct Listeners {
    pub kv: TcpListener,
    pub admin: TcpListener,
    pub memcached: Option<TcpListener>,
    /// The KV and admin ports over TLS.
    pub tls: Option<TlsListeners>,
    pub kv_addr: std::net::SocketAddr,
    pub admin_addr: std::net::SocketAddr,
    pub memcached_addr: Option<std::net::SocketAddr>,
}

pub struct TlsListeners {
    pub kv: TcpListener,
    pub admin: TcpListener,
    pub ports: sluice_cluster::TlsPorts,
}

/// Binds every port of `node`'s config (a port of 0 takes any) and records the ports bound,
/// so the map the node serves lists them.
pub async fn bind(node: &Node) -> std::io::Result<Listeners> {
    let cfg = &node.config;
    let host = cfg.bind_host.as_str();
    let kv = TcpListener::bind((host, cfg.kv_port)).await?;
    let admin = TcpListener::bind((host, cfg.admin_port)).await?;
    let memcached = match cfg.memcached_port {
        Some(port) => Some(TcpListener::bind((host, port)).await?),
        None => None,
    };
    let tls = match node.tls {
        Some(_) => {
            let kv = TcpListener::bind((host, cfg.kv_tls_port)).await?;
            let admin = TcpListener::bind((host, cfg.admin_tls_port)).await?;
            let ports = sluice_cluster::TlsPorts {
                kv: kv.local_addr()?.port(),
                admin: admin.local_addr()?.port(),
            };
            Some(TlsListeners { kv, admin, ports })
        }
        None => None,
    };
    let kv_addr = kv.local_addr()?;
    let admin_addr = admin.local_addr()?;
    let memcached_addr = memcached.as_ref().map(|l| l.local_addr()).transpose()?;
    node.set_bound_ports(
        kv_addr.port(),
        admin_addr.port(),
        tls.as_ref().map(|t| t.ports),
    );
    Ok(Listeners {
        kv,
        admin,
        memcached,
        tls,
        kv_addr,
        admin_addr,
        memcached_addr,
    })
}

/// Starts the connection threads and serves the KV (and memcached) listeners. The returned
/// tasks run until aborted.
pub fn serve(
    node: Arc<Node>,
    kv: TcpListener,
    kv_tls: Option<TcpListener>,
    memcached: Option<TcpListener>,
) -> std::io::Result<Vec<tokio::task::JoinHandle<()>>> {
    let workers = Arc::new(workers::Workers::start(node.clone())?);
    let mut tasks = vec![tokio::spawn(durability::run_ticker(node.clone()))];
    tasks.push(tokio::spawn(listener::serve(
        node.clone(),
        kv,
        listener::Port::Kv,
        false,
        workers.clone(),
    )));
    if let Some(l) = kv_tls {
        tasks.push(tokio::spawn(listener::serve(
            node.clone(),
            l,
            listener::Port::Kv,
            true,
            workers.clone(),
        )));
    }
    if let Some(l) = memcached {
        tasks.push(tokio::spawn(listener::serve(
            node,
            l,
            listener::Port::Memcached,
            false,
            workers,
        )));
    }
    Ok(tasks)
}
