//! The network front end of a Sluice node. The only crate (with the client) that touches
//! sockets and the async runtime.
//!
//! Layout:
//! - `config`      — [`ServerConfig`]: ports, data directory, bucket, credentials, limits;
//! - `node`        — [`Node`]: the bucket, the credential store, the cluster map, counters;
//! - `cluster_map` — the map this node serves, rendered (CCCP JSON) once per revision;
//! - `cluster_agent` — makes the node what the map says: vbucket states, replication feeds;
//! - `membership`  — the node's id and meta node: a new cluster, a join, or a restart;
//! - `failover`    — failing a node over (its replicas elsewhere become active);
//! - `auto_failover` — the leader's probes, and the failover of a node down too long;
//! - `rebalance`   — the orchestrator: a plan's moves carried out with data (builds,
//!   takeovers, chains); `rebalance_builds` — the copies it builds on this node;
//! - `listener`    — accept loops (KV port, optional memcached port), connection limit;
//! - `workers`     — connection threads, one single-threaded runtime each;
//! - `connection`  — one task per connection: read, frame, execute, write, in order;
//! - `session`     — per-connection state: features, user, bucket, SASL exchange;
//! - `exec/`       — execution per opcode family (`kv`, `session_ops`, `vbucket_ops`, `stats`),
//!   each a plain function from a validated request to response bytes;
//! - `dcp/`        — DCP producer connections (streams, backfills, flow control, noops),
//!   and replication (the consumer side);
//! - `durability`  — the replicas' seqno acks and the wait of a durable write for them;
//! - `admin`       — HTTP: `/health`, `/metrics` (Prometheus), `/api/v1/buckets/{name}/stats`;
//! - `metrics`     — the Prometheus collector over engine counters.
#![deny(unsafe_code)]

mod admin;
mod auto_failover;
mod cluster_agent;
mod cluster_map;
mod config;
mod connection;
mod dcp;
mod durability;
mod exec;
mod failover;
mod listener;
mod membership;
mod metrics;
mod node;
mod placement;
mod rebalance;
mod rebalance_builds;
mod session;
mod workers;

pub use cluster_agent::{plan as agent_plan, AgentPlan, FeedSpec};
pub use cluster_map::MapView;
pub use config::{ServerConfig, WRITE_STALL_DEFAULT};
pub use dcp::replication::{Replication, ReplicationSpec};
pub use node::Node;
pub use placement::Placement;

use std::future::Future;
use std::sync::Arc;

/// A running server: its node and the addresses it actually bound (ports may be 0 in tests).
pub struct Running {
    pub node: Arc<Node>,
    pub kv_addr: std::net::SocketAddr,
    pub admin_addr: std::net::SocketAddr,
    pub memcached_addr: Option<std::net::SocketAddr>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    replication: Option<Replication>,
    agent: Option<cluster_agent::ClusterAgent>,
    /// This node's share of the replicated cluster metadata.
    pub meta: sluice_meta::MetaNode,
}

/// Opens the bucket (warmup), binds every port, takes this node's place in the cluster (a
/// new one, a join, or a restart; see `membership`) and starts serving.
pub async fn start(config: ServerConfig) -> anyhow::Result<Running> {
    let node = Arc::new(tokio::task::spawn_blocking(move || Node::open(config)).await??);
    let cfg = &node.config;
    let kv = tokio::net::TcpListener::bind((cfg.bind_host.as_str(), cfg.kv_port)).await?;
    let admin = tokio::net::TcpListener::bind((cfg.bind_host.as_str(), cfg.admin_port)).await?;
    let memcached = match cfg.memcached_port {
        Some(port) => Some(tokio::net::TcpListener::bind((cfg.bind_host.as_str(), port)).await?),
        None => None,
    };
    let kv_addr = kv.local_addr()?;
    let admin_addr = admin.local_addr()?;
    let memcached_addr = memcached.as_ref().map(|l| l.local_addr()).transpose()?;
    node.set_bound_ports(kv_addr.port(), admin_addr.port());

    // The cluster first: the admin port serves the meta node's Raft routes while it joins,
    // and no KV request is taken before the node serves the cluster's map.
    let plan = membership::plan(&node).await?;
    let meta = membership::start_meta(&node, &plan).await?;
    let mut tasks = vec![tokio::spawn(admin::serve(
        node.clone(),
        admin,
        meta.clone(),
    ))];
    if let Err(e) = membership::complete(&node, &meta, &plan).await {
        for t in &tasks {
            t.abort();
        }
        let _ = meta.shutdown().await;
        return Err(e);
    }
    if let Some(map) = meta.state().borrow().map() {
        node.install_map(map.clone(), meta.id());
    }
    tasks.push(tokio::spawn(membership::follow_map(
        node.clone(),
        meta.clone(),
    )));
    if let Some(timeout) = cfg.auto_failover_timeout {
        tasks.push(tokio::spawn(auto_failover::run(meta.clone(), timeout)));
    }

    let replication = cfg.replica_of.as_ref().map(|source| {
        let spec = ReplicationSpec {
            source: source.clone(),
            username: cfg.username.clone(),
            password: cfg.password.clone(),
            bucket: cfg.bucket.clone(),
            vbuckets: (0..cfg.vbuckets).map(sluice_types::VbId).collect(),
            name: format!("replication:{kv_addr}<-{source}:{}", cfg.bucket),
            consumer_name: meta.id().0.to_string(),
        };
        Replication::start(node.clone(), spec)
    });
    // `--replica-of` follows one node by hand; otherwise the cluster map decides.
    let agent = replication
        .is_none()
        .then(|| cluster_agent::ClusterAgent::start(node.clone()));

    let workers = Arc::new(workers::Workers::start(node.clone())?);
    tasks.push(tokio::spawn(listener::serve(
        node.clone(),
        kv,
        listener::Port::Kv,
        workers.clone(),
    )));
    if let Some(l) = memcached {
        tasks.push(tokio::spawn(listener::serve(
            node.clone(),
            l,
            listener::Port::Memcached,
            workers.clone(),
        )));
    }
    tracing::info!(%kv_addr, %admin_addr, ?memcached_addr, bucket = %node.bucket.config.name,
        node_id = %meta.id(), replica_of = ?cfg.replica_of, "sluice node serving");
    Ok(Running {
        node,
        kv_addr,
        admin_addr,
        memcached_addr,
        tasks,
        replication,
        agent,
        meta,
    })
}

impl Running {
    /// The replication this node runs (`replica_of`), if any.
    pub fn replication(&self) -> Option<&Replication> {
        self.replication.as_ref()
    }

    /// Stops accepting, flushes the bucket and records a clean stop.
    pub async fn shutdown(mut self) -> anyhow::Result<()> {
        if let Some(r) = self.replication.take() {
            r.stop().await;
        }
        if let Some(a) = self.agent.take() {
            a.stop().await;
        }
        self.node.builds.stop(|_| true).await;
        for t in &self.tasks {
            t.abort();
        }
        if let Err(e) = self.meta.shutdown().await {
            tracing::warn!(error = %e, "stopping the meta node");
        }
        let node = self.node.clone();
        tokio::task::spawn_blocking(move || node.bucket.shutdown()).await??;
        tracing::info!("sluice node stopped cleanly");
        Ok(())
    }
}

/// Runs a node until `stop` resolves, then shuts it down cleanly.
pub async fn run_until(config: ServerConfig, stop: impl Future<Output = ()>) -> anyhow::Result<()> {
    let running = start(config).await?;
    stop.await;
    tracing::info!("shutting down: flushing to disk");
    running.shutdown().await
}
