//! A Sluice node's control plane: how a node takes its place in the cluster and makes itself
//! what the cluster map says, and how the cluster's membership changes (failover, rebalance).
//! The data plane (`sluice-server`) serves whatever map it is given; this crate decides the
//! maps (through the Raft-replicated metadata of `sluice-meta`) and starts the node.
//!
//! Layout:
//! - [`start`] / [`Running`] — a whole node: the data plane bound and served, its place in
//!   the cluster taken, the agent or a hand-set replication following;
//! - `control`     — [`Control`]: what the control plane holds beside the data plane's
//!   `Node`, per bucket (`BucketControl`: builds, agent, held vbuckets);
//! - `membership`  — the node's id and meta node: a new cluster, a join, or a restart;
//! - `buckets`     — which buckets the node serves, following the metadata: opened, given
//!   their maps and agents, deleted; `buckets_api` — `/pools/default/buckets`: create,
//!   list, describe, delete; `collections_api` — a bucket's scopes and collections
//!   (`/pools/default/buckets/B/scopes...`);
//! - `cluster_agent` — makes a bucket what its map says: vbucket states, replication feeds;
//! - `failover`    — failing a node over (its replicas elsewhere become active);
//! - `auto_failover` — the leader's probes, and the failover of a node down too long;
//! - `fencing`     — every node's probes of the voters; cut off, it stops serving its actives;
//! - `restart_hold` — after a restart that lost data, the actives wait until no replica is
//!   found ahead (or are handed to the one that is);
//! - `rebalance`   — the orchestrator, on the metadata leader: a plan's moves carried out
//!   with data (builds, takeovers, chains), resumed by a new leader; `builds` — the copies
//!   it builds on this node;
//! - `janitor`     — the leader's repairs when copies and map disagree (a takeover whose
//!   chain was never published, one cut short, copies never dropped);
//! - `peer`        — calls to another member's admin port, as the cluster identity;
//! - `admin`       — the admin port: the data plane's routes, the cluster's, and Raft's;
//!   `admin_auth` — who may call which of them (HTTP Basic, the callers' roles);
//!   `users_api` — users and their roles (`/settings/rbac/users`);
//! - `xdcr`        — cross-cluster replication: remote clusters, replications, and the
//!   pipelines that stream this node's active vbuckets to the remote clusters.

mod admin;
mod admin_auth;
mod auto_failover;
mod buckets;
mod buckets_api;
mod builds;
mod cluster_agent;
mod collections_api;
mod control;
mod error;
mod failover;
pub mod fencing;
mod index_catalog;
mod janitor;
mod membership;
mod membership_error;
mod peer;
mod rebalance;
mod restart_hold;
mod users_api;
pub mod xdcr;

pub use cluster_agent::{plan as agent_plan, AgentPlan, FeedSpec};
pub use control::Control;
pub use error::NodeError;
pub use membership_error::MembershipError;
pub use rebalance::RebalanceError;

use sluice_server::{Node, Replication, ReplicationSpec, ServerConfig};
use std::future::Future;
use std::sync::Arc;

/// A running node: its data plane, its control plane, and the addresses it actually bound
/// (ports may be 0 in tests).
pub struct Running {
    pub node: Arc<Node>,
    pub control: Arc<Control>,
    pub kv_addr: std::net::SocketAddr,
    pub admin_addr: std::net::SocketAddr,
    pub memcached_addr: Option<std::net::SocketAddr>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    replication: Option<Replication>,
    /// This node's share of the replicated cluster metadata.
    pub meta: sluice_meta::MetaNode,
}

/// Opens the bucket (warmup), binds every port, takes this node's place in the cluster (a
/// new one, a join, or a restart; see `membership`) and starts serving.
pub async fn start(config: ServerConfig) -> Result<Running, NodeError> {
    let node = Arc::new(tokio::task::spawn_blocking(move || Node::open(config)).await??);
    let listeners = sluice_server::bind(&node).await.map_err(NodeError::Bind)?;
    let (kv_addr, admin_addr, memcached_addr) = (
        listeners.kv_addr,
        listeners.admin_addr,
        listeners.memcached_addr,
    );
    let control = Arc::new(Control::new(node.clone()));
    let cfg = &node.config;

    // The cluster first: the admin port serves the meta node's Raft routes while it joins,
    // and no KV request is taken before the node serves the cluster's map.
    let planned = membership::plan(&node).await?;
    let meta = membership::start_meta(&node, &planned).await?;
    let (kv_tls, admin_tls) = match listeners.tls {
        Some(t) => (Some(t.kv), Some(t.admin)),
        None => (None, None),
    };
    let mut tasks = vec![tokio::spawn(admin::serve(
        control.clone(),
        listeners.admin,
        admin_tls,
        meta.clone(),
    ))];
    if let Err(e) = membership::complete(&node, &meta, &planned.plan).await {
        for t in &tasks {
            t.abort();
        }
        let _ = meta.shutdown().await;
        return Err(e.into());
    }
    let state = meta.state().borrow().clone();
    let home = control
        .bucket(&cfg.bucket)
        .expect("the node's own bucket is in the table");
    if let Some(entry) = state.buckets().get(&cfg.bucket) {
        // Before the KV port serves: a restarted node knows its collections at once, and
        // the map below is rendered with the cluster's bucket uuid, not re-rendered (and
        // pushed to clients, and re-applied by the agent) once the bucket watcher runs.
        home.bucket.adopt_cluster_uuid(&entry.def.uuid);
        buckets::install_manifest(&home.bucket, entry);
    }
    if let Some(map) = state.map(&cfg.bucket) {
        // Over the placeholder map of this node alone, even at the same revision.
        let id = meta.id();
        home.bucket
            .install_map(map.clone(), id, &node.node_info(id));
    }
    node.credentials.set_users(state.users());
    let view = xdcr::StatsView {
        control: Arc::downgrade(&control),
        meta: meta.clone(),
    };
    let _ = node.control_stats.set(Arc::new(view));
    if state.uuid().is_empty() {
        tasks.push(tokio::spawn(membership::ensure_cluster_uuid(meta.clone())));
    }
    // The query service's DDL goes to the replicated catalog.
    node.index
        .set_catalog(Arc::new(index_catalog::MetaCatalog { meta: meta.clone() }));
    if let Some(timeout) = cfg.auto_failover_timeout {
        tasks.push(tokio::spawn(auto_failover::run(meta.clone(), timeout)));
    }
    tasks.push(tokio::spawn(fencing::run(meta.clone(), node.clone())));

    let replication = cfg.replica_of.as_ref().map(|source| {
        let spec = ReplicationSpec {
            source: source.clone(),
            username: cfg.username.clone(),
            password: cfg.password.clone(),
            bucket: cfg.bucket.clone(),
            vbuckets: (0..cfg.vbuckets).map(sluice_types::VbId).collect(),
            name: format!("replication:{kv_addr}<-{source}:{}", cfg.bucket),
            consumer_name: meta.id().0.to_string(),
            // A source given by hand is followed on its cleartext KV port.
            tls: false,
        };
        Replication::start(node.clone(), node.bucket.clone(), spec)
    });
    // `--replica-of` follows one node by hand; otherwise the cluster maps decide.
    let restarted = matches!(planned.plan, membership::Plan::Restart(_));
    if replication.is_none() {
        if state.map(&cfg.bucket).is_some() {
            // Before the KV port serves: a restart that lost data holds its actives first.
            buckets::start(&control, &meta, &home, restarted);
        }
        // The other buckets' agents, and every change of the metadata from now on.
        tasks.push(tokio::spawn(buckets::follow(
            control.clone(),
            meta.clone(),
            restarted,
        )));
        // It repairs what the agents cannot see alone; a hand-set replica has no agent.
        tasks.push(tokio::spawn(janitor::run(meta.clone(), control.clone())));
        // Replications to other clusters, from the buckets' vbuckets active here.
        tasks.push(tokio::spawn(xdcr::follow(control.clone(), meta.clone())));
    }

    tasks.extend(
        sluice_server::serve(node.clone(), listeners.kv, kv_tls, listeners.memcached)
            .map_err(NodeError::Serve)?,
    );
    // Once the KV port serves: each feeder is a DCP stream of this node. Then the catalog:
    // indexes created or dropped while this node was away are created or dropped here.
    node.index.start_all(&node);
    tasks.push(tokio::spawn(index_catalog::follow(
        node.clone(),
        meta.clone(),
    )));
    tracing::info!(%kv_addr, %admin_addr, ?memcached_addr, bucket = %node.bucket.engine.config.name,
        node_id = %meta.id(), replica_of = ?cfg.replica_of, "sluice node serving");
    Ok(Running {
        node,
        control,
        kv_addr,
        admin_addr,
        memcached_addr,
        tasks,
        replication,
        meta,
    })
}

impl Running {
    /// The replication this node runs (`replica_of`), if any.
    pub fn replication(&self) -> Option<&Replication> {
        self.replication.as_ref()
    }

    /// Stops accepting, flushes the bucket and records a clean stop.
    pub async fn shutdown(mut self) -> Result<(), NodeError> {
        if let Some(r) = self.replication.take() {
            r.stop().await;
        }
        // The metadata follower first: it would start agents for buckets again.
        for t in &self.tasks {
            t.abort();
        }
        self.node.index.stop_all();
        self.control.xdcr.stop_all().await;
        for bc in self.control.buckets() {
            bc.stop().await;
        }
        if let Err(e) = self.meta.shutdown().await {
            tracing::warn!(error = %e, "stopping the meta node");
        }
        for bucket in self.node.buckets.all() {
            tokio::task::spawn_blocking(move || bucket.engine.shutdown())
                .await?
                .map_err(NodeError::Flush)?;
        }
        tracing::info!("sluice node stopped cleanly");
        Ok(())
    }
}

/// Runs a node until `stop` resolves, then shuts it down cleanly.
pub async fn run_until(
    config: ServerConfig,
    stop: impl Future<Output = ()>,
) -> Result<(), NodeError> {
    let running = start(config).await?;
    stop.await;
    tracing::info!("shutting down: flushing to disk");
    running.shutdown().await
}
