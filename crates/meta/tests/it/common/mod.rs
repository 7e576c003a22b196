//! Shared by the cluster tests: real meta nodes in this process, each with its own HTTP
//! listener on 127.0.0.1 (an ephemeral port, kept across restarts) and its own directory.
#![allow(dead_code)]

use sluice_cluster::metadata::{BucketDef, ClusterState, MetaCommand};
use sluice_cluster::{BucketKind, NodeId, NodeInfo};
use sluice_meta::{MetaConfig, MetaNode};
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpSocket};
use tokio::task::JoinHandle;

/// Every test body runs under this bound.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(40);

/// Fast timing for loopback: heartbeats every 50 ms, elections after 300–600 ms.
pub fn config(id: NodeId, addr: SocketAddr, dir: &Path) -> MetaConfig {
    let secret = sluice_meta::ClusterSecret::from_bytes([0x5e; sluice_meta::secret::SECRET_BYTES]);
    let mut config = MetaConfig::new(id, addr.to_string(), dir, secret);
    config.heartbeat_interval = Duration::from_millis(50);
    config.election_timeout_min = Duration::from_millis(300);
    config.election_timeout_max = Duration::from_millis(600);
    config.request_timeout = Duration::from_secs(3);
    config
}

/// Runs a test body with a time bound, so a hang fails instead of stalling the suite.
pub async fn bounded<F: Future<Output = ()>>(body: F) {
    let started = Instant::now();
    tokio::time::timeout(TEST_TIMEOUT, body)
        .await
        .unwrap_or_else(|_| panic!("the test did not finish within {TEST_TIMEOUT:?}"));
    eprintln!("test body took {:?}", started.elapsed());
}

/// One meta node and the HTTP server in front of it.
pub struct TestNode {
    pub id: NodeId,
    pub addr: SocketAddr,
    pub dir: PathBuf,
    pub node: MetaNode,
    server: JoinHandle<()>,
}

fn bind(port: u16) -> TcpListener {
    let socket = TcpSocket::new_v4().expect("socket");
    // A restarted node takes its old port back while old connections linger in TIME_WAIT.
    socket.set_reuseaddr(true).expect("reuseaddr");
    socket
        .bind(SocketAddr::from(([127, 0, 0, 1], port)))
        .expect("bind");
    socket.listen(64).expect("listen")
}

impl TestNode {
    /// Starts node `id` on `dir`, listening on `port` (0: any free port).
    pub async fn start_with(
        id: NodeId,
        dir: &Path,
        port: u16,
        tune: impl FnOnce(&mut MetaConfig),
    ) -> TestNode {
        let listener = bind(port);
        let addr = listener.local_addr().expect("local addr");
        let mut config = config(id, addr, dir);
        tune(&mut config);
        let node = MetaNode::start(config).await.expect("meta node starts");
        let app = sluice_meta::http::router(&node);
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("serve");
        });
        TestNode {
            id,
            addr,
            dir: dir.to_path_buf(),
            node,
            server,
        }
    }

    pub async fn start(id: NodeId, dir: &Path, port: u16) -> TestNode {
        Self::start_with(id, dir, port, |_| {}).await
    }

    /// Shuts the node down and stops listening; returns what a restart needs.
    pub async fn stop(self) -> (NodeId, PathBuf, u16) {
        self.node.shutdown().await.expect("clean shutdown");
        self.server.abort();
        let _ = self.server.await;
        (self.id, self.dir, self.addr.port())
    }

    pub fn state(&self) -> Arc<ClusterState> {
        Arc::clone(&self.node.state().borrow())
    }
}

/// `n` nodes (ids 0..n) in one cluster: node 0 initializes it, the others are added through
/// node `via(i)`.
pub async fn form(root: &Path, n: u32, via: impl Fn(u32) -> usize) -> Vec<TestNode> {
    let first = TestNode::start(NodeId(0), &root.join("n0"), 0).await;
    first.node.initialize_single().await.expect("initialize");
    let mut nodes = vec![first];
    eventually("node 0 leads", Duration::from_secs(5), || {
        nodes[0].node.leader() == Some(NodeId(0))
    })
    .await;
    for i in 1..n {
        let t = TestNode::start(NodeId(i), &root.join(format!("n{i}")), 0).await;
        let (id, addr) = (t.id, t.addr.to_string());
        nodes.push(t);
        nodes[via(i)]
            .node
            .add_node(id, &addr)
            .await
            .unwrap_or_else(|e| panic!("adding {id}: {e}"));
    }
    nodes
}

/// Polls `check` every 10 ms until it holds; panics after `within`.
pub async fn eventually(what: &str, within: Duration, mut check: impl FnMut() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until every node applied the same state, and returns it.
pub async fn converged(nodes: &[&TestNode]) -> Arc<ClusterState> {
    eventually(
        "all nodes apply the same state",
        Duration::from_secs(5),
        || {
            let first = nodes[0].state();
            nodes.iter().all(|n| n.state() == first)
        },
    )
    .await;
    nodes[0].state()
}

/// The leader all of `nodes` agree on, once they agree on one of themselves (followers
/// remember a leader that is gone until their election timeout).
pub async fn agreed_leader(nodes: &[&TestNode]) -> NodeId {
    let mut leader = None;
    eventually(
        "the nodes agree on a leader",
        Duration::from_secs(10),
        || {
            let first = nodes[0].node.leader();
            leader = first;
            nodes.iter().any(|n| Some(n.id) == first)
                && nodes.iter().all(|n| n.node.leader() == first)
        },
    )
    .await;
    leader.expect("checked above")
}

pub fn node_info(id: u32) -> NodeInfo {
    NodeInfo {
        id: NodeId(id),
        host: "127.0.0.1".to_string(),
        kv_port: 11210 + id as u16,
        admin_port: 8091 + id as u16,
        tls: None,
        services: sluice_cluster::Services::ALL,
    }
}

pub fn bucket() -> BucketDef {
    BucketDef {
        name: "default".to_string(),
        uuid: "5e1f".to_string(),
        kind: BucketKind::Couchbase,
        replicas: 1,
        vbuckets: 16,
        quota_bytes: 64 << 20,
        durability_min: None,
        conflict_resolution: Default::default(),
    }
}

/// The commands that register node `id` in the cluster state.
pub fn register(id: u32) -> [MetaCommand; 2] {
    [
        MetaCommand::AllocateNodeId,
        MetaCommand::AddNode {
            info: node_info(id),
        },
    ]
}
