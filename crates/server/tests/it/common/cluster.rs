//! In-process cluster nodes for the cluster tests: start one (fresh, or joining a member),
//! wait for a condition, and place the still empty bucket on a set of nodes.
// Each test binary uses a part of these helpers.
#![allow(dead_code)]

use sluice_cluster::metadata::MetaCommand;
use sluice_cluster::{place, NodeId};
use sluice_engine::BucketType;
use sluice_manager::Running;
use sluice_server::ServerConfig;
use std::path::Path;
use std::time::Duration;

/// The administrator every test node starts with (`ServerConfig`'s default).
pub fn admin() -> sluice_client::Credentials {
    sluice_client::Credentials::new("Administrator", "password")
}

/// vbuckets of the test bucket.
pub const VBS: u16 = 16;

/// A node with ephemeral ports, 16 vbuckets, one replica, 64 MiB; `tweak` adjusts the rest.
pub async fn node(
    dir: &Path,
    join: Option<std::net::SocketAddr>,
    tweak: impl FnOnce(&mut ServerConfig),
) -> Running {
    let mut c = ServerConfig::new(dir);
    c.kv_port = 0;
    c.admin_port = 0;
    c.vbuckets = VBS;
    c.memory_quota_mb = 64;
    c.replicas = 1;
    c.bucket_type = BucketType::Couchbase;
    c.join = join.map(|a| a.to_string());
    tweak(&mut c);
    sluice_manager::start(c).await.unwrap()
}

/// `count` keys `{prefix}{i}` whose vbucket is active on node `me` in `n`'s map.
pub fn keys_active_on(n: &Running, me: NodeId, prefix: &str, count: usize) -> Vec<String> {
    let view = n.node.cluster_map();
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .filter(|k| {
            let vb = sluice_types::vbucket_of(k.as_bytes(), VBS);
            view.map
                .vbmap()
                .chain(vb)
                .is_some_and(|c| c.active == Some(me))
        })
        .take(count)
        .collect()
}

/// Two nodes, the second joined to the first, the bucket placed on both (one replica): the
/// directories (kept for restarts) and the nodes.
pub async fn placed_pair() -> (Vec<tempfile::TempDir>, Running, Running) {
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = node(dirs[0].path(), None, |_| {}).await;
    let b = node(dirs[1].path(), Some(a.admin_addr), |_| {}).await;
    place_on(&a, &[&a, &b], &[NodeId(0), NodeId(1)]).await;
    (dirs, a, b)
}

/// Polls `cond` every 20 ms for up to 30 s.
pub async fn until(what: &str, cond: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Places the bucket on `ids` (one replica) through `via` once it knows them all, and waits
/// until every node of `all` serves that map.
pub async fn place_on(via: &Running, all: &[&Running], ids: &[NodeId]) {
    until("every node is known", || {
        via.meta.state().borrow().nodes().len() >= ids.len()
    })
    .await;
    let first = via.meta.state().borrow().map("default").unwrap().rev();
    let placed = via
        .meta
        .propose(MetaCommand::SetMap {
            bucket: "default".into(),
            expected_rev: Some(first),
            nodes: ids.to_vec(),
            vbmap: place(ids, VBS, 1).unwrap(),
        })
        .await
        .unwrap();
    assert!(placed.is_ok(), "{placed:?}");
    let rev = via.meta.state().borrow().map("default").unwrap().rev();
    until("every node serves the placed map", || {
        all.iter().all(|n| n.node.cluster_map().rev() == rev)
    })
    .await;
}
