//! Two in-process nodes given one cluster map: each serves the map (GET_CLUSTER_CONFIG,
//! NOT_MY_VBUCKET), takes the vbucket states it assigns, and feeds its replicas from the
//! right node; after a failover map, the survivor serves every vbucket with every write.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::kv_peer::Kv;
use sluice_cluster::{fail_over, place, ClusterMap, NodeId, NodeInfo};
use sluice_engine::BucketType;
use sluice_manager::Running;
use sluice_proto::encode::Packet;
use sluice_server::ServerConfig;
use sluice_types::{vbucket_of, VbId, VbState};
use std::path::Path;
use std::time::Duration;

const VBS: u16 = 16;
const KEYS: usize = 600;
const NOT_MY_VBUCKET: u16 = 0x07;

/// A node; with `join`, a member of that node's cluster (so it holds the cluster's secret
/// and its peers let its replication in; the maps are then installed by hand).
async fn node(dir: &Path, join: Option<std::net::SocketAddr>) -> Running {
    let mut c = ServerConfig::new(dir);
    c.join = join.map(|a| a.to_string());
    c.kv_port = 0;
    c.admin_port = 0;
    c.vbuckets = VBS;
    c.memory_quota_mb = 64;
    c.bucket_type = BucketType::Couchbase;
    sluice_manager::start(c).await.unwrap()
}

fn info(r: &Running, id: u32) -> NodeInfo {
    r.node.node_info(NodeId(id))
}

fn key(i: usize) -> Vec<u8> {
    format!("doc{i}").into_bytes()
}

/// The node (0 or 1) the map makes active for `vb`.
fn owner(map: &ClusterMap, vb: u16) -> usize {
    map.vbmap().chain(VbId(vb)).unwrap().active.unwrap().0 as usize
}

async fn config_rev(addr: std::net::SocketAddr) -> u64 {
    let mut kv = Kv::open(addr).await;
    let a = kv.call(Packet::request(0xb5, 0, 1)).await;
    assert_eq!(a.status, 0);
    let doc: serde_json::Value = serde_json::from_slice(&a.value).unwrap();
    doc["rev"].as_u64().unwrap()
}

/// Waits until every key reads back from `node` (as a replica or an active) with `value`.
async fn all_readable(addr: std::net::SocketAddr, replica_of: &ClusterMap, me: usize, want: &str) {
    let mut kv = Kv::open(addr).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    for i in 0..KEYS {
        let k = key(i);
        let vb = vbucket_of(&k, VBS).0;
        loop {
            let a = if owner(replica_of, vb) == me {
                kv.get(&k, vb).await
            } else {
                kv.get_replica(&k, vb).await
            };
            if a.status == 0 && a.value == want.as_bytes() {
                if owner(replica_of, vb) != me {
                    assert_eq!(replica_lookup(&mut kv, &k, vb).await, want.as_bytes());
                }
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "doc{i} (vb {vb}) on node {me}: status {:#x}",
                a.status
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The body a multi-path lookup with the replica-read flag reads from a replica vbucket.
async fn replica_lookup(kv: &mut Kv, key: &[u8], vb: u16) -> Vec<u8> {
    let whole_doc = [0x00, 0x00, 0x00, 0x00];
    let a = kv
        .call(
            Packet::request(0xd0, vb, 9)
                .key(key)
                .extras(&[0x20])
                .value(&whole_doc),
        )
        .await;
    assert_eq!(
        (a.status, &a.value[..2]),
        (0, &[0, 0][..]),
        "replica lookup"
    );
    a.value[6..].to_vec()
}

/// A plain HTTP/1.1 GET on the admin port, as the administrator.
async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let auth = sluice_client::Credentials::new("Administrator", "password").basic_header();
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: {auth}\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).await.unwrap();
    body
}

/// The value of the sample line starting with `series` (name and labels).
fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
        .unwrap_or_else(|| panic!("no {series} in /metrics:\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_follow_one_map_and_survive_a_failover() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first = node(da.path(), None).await;
    let second = node(db.path(), Some(first.admin_addr)).await;
    assert_eq!(second.meta.id(), NodeId(1));
    let nodes = [first, second];
    let solo_rev = nodes[0].node.cluster_map().rev();
    let ids = [NodeId(0), NodeId(1)];
    let map = nodes[0]
        .node
        .cluster_map()
        .map
        .next(
            vec![info(&nodes[0], 0), info(&nodes[1], 1)],
            place(&ids, VBS, 1).unwrap(),
        )
        .unwrap();
    assert!(map.rev() > solo_rev);
    for (i, n) in nodes.iter().enumerate() {
        n.node.install_map(map.clone(), ids[i]);
        assert_eq!(config_rev(n.kv_addr).await, map.rev().0);
    }
    // The agent applies the map's states.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    for (i, n) in nodes.iter().enumerate() {
        for vb in 0..VBS {
            let want = if owner(&map, vb) == i {
                VbState::Active
            } else {
                VbState::Replica
            };
            while n.node.bucket.engine.vb_state(VbId(vb)).unwrap() != want {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "vb {vb} on node {i}"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }

    // Writes go to the active copy; the other node answers NOT_MY_VBUCKET with the map.
    let mut kvs = [
        Kv::open(nodes[0].kv_addr).await,
        Kv::open(nodes[1].kv_addr).await,
    ];
    for i in 0..KEYS {
        let k = key(i);
        let vb = vbucket_of(&k, VBS).0;
        let o = owner(&map, vb);
        let wrong = kvs[1 - o].set(&k, b"v1", vb).await;
        assert_eq!(wrong.status, NOT_MY_VBUCKET, "doc{i}");
        let body: serde_json::Value = serde_json::from_slice(&wrong.value).unwrap();
        assert_eq!(body["rev"].as_u64(), Some(map.rev().0));
        assert_eq!(kvs[o].set(&k, b"v1", vb).await.status, 0, "doc{i}");
    }
    // Each node holds a replica of every vbucket the other owns.
    all_readable(nodes[0].kv_addr, &map, 0, "v1").await;
    all_readable(nodes[1].kv_addr, &map, 1, "v1").await;

    // A deleted document: a replica-read lookup finds its tombstone only with
    // access-deleted (SUBDOC_SUCCESS_DELETED), and nothing without (KEY_ENOENT).
    let gone = b"deleted-doc".to_vec();
    let gone_vb = vbucket_of(&gone, VBS).0;
    let active = owner(&map, gone_vb);
    assert_eq!(kvs[active].set(&gone, b"v", gone_vb).await.status, 0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while kvs[1 - active].get_replica(&gone, gone_vb).await.status != 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the write replicated"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let del = kvs[active]
        .call(Packet::request(0x04, gone_vb, 5).key(&gone))
        .await;
    assert_eq!(del.status, 0);
    let replica = &mut kvs[1 - active];
    while replica.get_replica(&gone, gone_vb).await.status != 0x01 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the deletion replicated"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let whole_doc = [0x00, 0x00, 0x00, 0x00];
    let lookup = |flags: &'static [u8]| {
        Packet::request(0xd0, gone_vb, 9)
            .key(&gone)
            .extras(flags)
            .value(&whole_doc)
    };
    let with_deleted = replica.call(lookup(&[0x20 | 0x04])).await;
    assert_eq!(with_deleted.status, 0xcd, "SUBDOC_SUCCESS_DELETED");
    let live_only = replica.call(lookup(&[0x20])).await;
    assert_eq!(live_only.status, 0x01, "KEY_ENOENT");

    // Each node counted what its feed applied, with a latency for every change.
    for (i, n) in nodes.iter().enumerate() {
        let replicated = (0..KEYS)
            .filter(|k| owner(&map, vbucket_of(&key(*k), VBS).0) != i)
            .count();
        let metrics = http_get(n.admin_addr, "/metrics").await;
        let feed = format!("feed=\"replication:n{}->n{i}:default\"", 1 - i);
        let items = metric(
            &metrics,
            &format!("sluice_replication_items_total{{{feed}}}"),
        );
        assert!(
            items >= replicated as f64,
            "node {i}: {items} < {replicated}"
        );
        let count = metric(
            &metrics,
            &format!("sluice_replication_latency_seconds_count{{{feed}}}"),
        );
        assert_eq!(count, items, "node {i}: one latency per change");
        let inf = metric(
            &metrics,
            &format!("sluice_replication_latency_seconds_bucket{{le=\"+Inf\",{feed}}}"),
        );
        assert_eq!(inf, items, "node {i}");
    }

    // Node 1 goes away; node 0 gets the failover map and serves everything it replicated.
    let [n0, n1] = nodes;
    n1.shutdown().await.unwrap();
    let out = fail_over(map.vbmap(), &[NodeId(1)]);
    assert!(out.lost.is_empty());
    let after = map.with_vbmap(out.map).unwrap();
    n0.node.install_map(after.clone(), NodeId(0));
    for vb in 0..VBS {
        assert_eq!(owner(&after, vb), 0);
    }
    all_readable(n0.kv_addr, &after, 0, "v1").await;
    // Promoted vbuckets started a new history branch.
    for promo in &out.promotions {
        let log = n0.node.bucket.engine.failover_log(promo.vb).unwrap();
        assert!(log.entries().len() >= 2, "{:?}: {log:?}", promo.vb);
    }
    n0.shutdown().await.unwrap();
}
