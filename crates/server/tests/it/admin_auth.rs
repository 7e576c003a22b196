//! The admin port's door: every route but `/health` needs HTTP Basic credentials; the
//! internal routes (Raft, forwarded proposals, rebalance internals, positions) need the
//! cluster identity, and an administrator gets 403 there. Refused calls change nothing. A
//! node started with a wrong administrator password cannot join, and a joiner admitted
//! with the right one receives the cluster's secret.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::cluster::node;
use sluice_client::Credentials;
use sluice_cluster::NodeId;
use sluice_types::VbId;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One HTTP/1.1 exchange, with `auth` as the `Authorization` header if given: the status.
async fn status(addr: SocketAddr, method: &str, path: &str, auth: Option<&str>, body: &str) -> u16 {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let auth = auth.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).await.unwrap();
    let text = String::from_utf8_lossy(&answer);
    text.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Every admin route, with a body that would act if it were let through.
const PUBLIC: &[(&str, &str, &str)] = &[
    ("GET", "/metrics", ""),
    ("GET", "/api/v1/buckets/default/stats", ""),
    ("GET", "/pools/default/b/default", ""),
    ("GET", "/api/v1/cluster", ""),
    ("POST", "/api/v1/cluster/place", "{}"),
    (
        "POST",
        "/api/v1/cluster/failover",
        r#"{"node": 0, "allow_data_loss": true}"#,
    ),
    ("POST", "/api/v1/cluster/rebalance", r#"{"eject": [0]}"#),
    ("GET", "/api/v1/cluster/rebalance", ""),
    ("POST", "/api/v1/cluster/rebalance/abort", ""),
    ("POST", "/internal/meta/join/allocate", "null"),
    (
        "POST",
        "/internal/meta/join/admit",
        r#"{"info": {"id": 9, "host": "127.0.0.1", "kv_port": 1, "admin_port": 2}}"#,
    ),
];

const INTERNAL: &[(&str, &str, &str)] = &[
    (
        "POST",
        "/internal/rebalance/build",
        r#"{"vb": 0, "source": "127.0.0.1:1"}"#,
    ),
    ("POST", "/internal/rebalance/takeover", r#"{"vb": 0}"#),
    ("POST", "/internal/rebalance/drop", r#"{"vb": 0}"#),
    ("GET", "/internal/rebalance/vb/0", ""),
    ("GET", "/internal/rebalance/map_rev", ""),
    ("GET", "/internal/vbuckets/positions", ""),
    ("POST", "/internal/raft/append", "{}"),
    (
        "POST",
        "/internal/raft/vote",
        r#"{"vote": {"leader_id": {"term": 99, "node_id": 9}, "committed": false}, "last_log_id": null}"#,
    ),
    ("POST", "/internal/raft/snapshot", "{}"),
    (
        "POST",
        "/internal/meta/propose",
        r#"{"op": "AllocateNodeId", "timeout_ms": 1000}"#,
    ),
    (
        "POST",
        "/internal/meta/add-node",
        r#"{"op": {"id": 9, "admin_addr": "127.0.0.1:2"}, "timeout_ms": 1000}"#,
    ),
    (
        "POST",
        "/internal/meta/remove-node",
        r#"{"op": {"id": 0}, "timeout_ms": 1000}"#,
    ),
];

/// What a refused call must leave as it was.
fn fingerprint(n: &sluice_manager::Running) -> String {
    let state = n.meta.state().borrow().clone();
    format!(
        "map rev {:?}, nodes {:?}, next id {:?}, voters {:?}, vb0 {:?}",
        state.map("default").map(|m| m.rev()),
        state.nodes().keys().collect::<Vec<_>>(),
        state.next_node_id(),
        n.meta.membership().voters,
        n.node.bucket.engine.vb_state(VbId(0)).unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_but_health_needs_the_right_identity() {
    let dir = tempfile::tempdir().unwrap();
    let a = node(dir.path(), None, |c| c.replicas = 0).await;
    let addr = a.admin_addr;
    let secret = a.node.credentials.cluster_password().unwrap().to_string();
    let admin = Credentials::new("Administrator", "password").basic_header();
    let cluster = Credentials::new("@cluster", secret.clone()).basic_header();
    let wrong = Credentials::new("Administrator", "passw0rd").basic_header();
    let stranger = Credentials::new("mallory", "password").basic_header();
    let other_cluster = Credentials::new("@cluster", "0".repeat(64)).basic_header();
    let before = fingerprint(&a);

    assert_eq!(status(addr, "GET", "/health", None, "").await, 200);
    for &(method, path, body) in PUBLIC.iter().chain(INTERNAL) {
        for (who, auth) in [
            ("no one", None),
            ("a wrong password", Some(wrong.as_str())),
            ("an unknown user", Some(stranger.as_str())),
            ("another cluster's secret", Some(other_cluster.as_str())),
            ("garbage", Some("Basic !!!")),
        ] {
            let got = status(addr, method, path, auth, body).await;
            assert_eq!(got, 401, "{method} {path} as {who}");
        }
    }
    for &(method, path, body) in INTERNAL {
        let got = status(addr, method, path, Some(&admin), body).await;
        assert_eq!(got, 403, "{method} {path} as the administrator");
    }
    assert_eq!(fingerprint(&a), before, "a refused call changed nothing");

    // With the right identity the routes answer.
    for path in ["/metrics", "/api/v1/cluster", "/pools/default/b/default"] {
        assert_eq!(
            status(addr, "GET", path, Some(&admin), "").await,
            200,
            "{path}"
        );
    }
    for path in [
        "/internal/rebalance/map_rev",
        "/internal/vbuckets/positions",
    ] {
        assert_eq!(
            status(addr, "GET", path, Some(&cluster), "").await,
            200,
            "{path}"
        );
    }
    a.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_administrator_can_make_a_node_join() {
    // A start that failed keeps its bucket open until the process exits: the admitted node
    // gets a directory of its own.
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = node(dirs[0].path(), None, |_| {}).await;
    let before = fingerprint(&a);

    let mut c = sluice_server::ServerConfig::new(dirs[1].path());
    c.kv_port = 0;
    c.admin_port = 0;
    c.vbuckets = common::cluster::VBS;
    c.memory_quota_mb = 64;
    c.join = Some(a.admin_addr.to_string());
    c.password = "not the cluster's".into();
    let refused = sluice_manager::start(c).await.err().unwrap();
    assert!(refused.to_string().contains("401"), "{refused}");
    assert_eq!(fingerprint(&a), before, "the refused join changed nothing");
    assert!(!dirs[1].path().join("cluster_secret").exists());

    let b = node(dirs[2].path(), Some(a.admin_addr), |_| {}).await;
    assert_eq!(b.meta.id(), NodeId(1));
    assert_eq!(
        b.node.credentials.cluster_password(),
        a.node.credentials.cluster_password(),
        "the joiner holds the cluster's secret"
    );
    let kept = std::fs::read_to_string(dirs[2].path().join("cluster_secret")).unwrap();
    assert_eq!(Some(kept.as_str()), a.node.credentials.cluster_password());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dirs[2].path().join("cluster_secret"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o777,
        0o600,
        "the secret is readable by its owner only"
    );
    b.shutdown().await.unwrap();
    a.shutdown().await.unwrap();
}
