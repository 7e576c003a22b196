//! Failover promotes the most advanced replica, not the first one in the chain. Three
//! in-process nodes, two replicas: node 1 (first replica of some of node 0's vbuckets) is
//! down while durable writes are acknowledged by nodes 0 and 2, then node 0 stops and node 1
//! comes back behind (node 0 is gone, so it cannot catch up). Failing node 0 over must make
//! node 2 active for those vbuckets, with node 1 following it, and every write made before
//! must read back.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::cluster::{node, until, VBS};
use sluice_client::admin_http;
use sluice_client::{ClusterClient, ClusterOptions, Durability, DurabilityLevel, StoreOptions};
use sluice_cluster::metadata::MetaCommand;
use sluice_cluster::{place, Chain, NodeId};
use sluice_manager::Running;
use sluice_server::ServerConfig;
use sluice_types::{vbucket_of, Seqno, VbId};
use std::time::Duration;

const N0: NodeId = NodeId(0);
const N1: NodeId = NodeId(1);
const N2: NodeId = NodeId(2);

/// Two replicas, and no automatic failover: the test fails node 0 over itself.
fn two_replicas(c: &mut ServerConfig) {
    c.replicas = 2;
    c.auto_failover_timeout = None;
}

/// `(state, high seqno, complete)` of `vb` on `n`, read from its positions endpoint.
async fn position(n: &Running, vb: VbId) -> (String, u64, bool) {
    let answer = admin_http::get(
        &n.admin_addr.to_string(),
        &n.meta.config().secret.credentials(),
        "/internal/vbuckets/positions",
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    assert!(answer.ok(), "{:?}", answer.body);
    let all = answer.body["vbuckets"].as_array().unwrap();
    assert_eq!(all.len(), usize::from(VBS));
    let p = all.iter().find(|p| p["vb"] == vb.0).unwrap();
    (
        p["state"].as_str().unwrap().to_string(),
        p["high_seqno"].as_u64().unwrap(),
        p["complete"].as_bool().unwrap(),
    )
}

fn high(n: &Running, vb: VbId) -> Seqno {
    n.node.bucket.engine.vb_state_and_high(vb).unwrap().1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_promotes_the_most_advanced_replica_not_the_first() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = node(dirs[0].path(), None, two_replicas).await;
    let b = node(dirs[1].path(), Some(a.admin_addr), two_replicas).await;
    let c = node(dirs[2].path(), Some(a.admin_addr), two_replicas).await;
    assert_eq!([a.meta.id(), b.meta.id(), c.meta.id()], [N0, N1, N2]);

    // Place the empty bucket on the three, two replicas each.
    until("every node is known", || {
        a.meta.state().borrow().nodes().len() == 3
    })
    .await;
    let first = a.meta.state().borrow().map("default").unwrap().rev();
    let vbmap = place(&[N0, N1, N2], VBS, 2).unwrap();
    let placed = a
        .meta
        .propose(MetaCommand::SetMap {
            bucket: "default".into(),
            expected_rev: Some(first),
            nodes: vec![N0, N1, N2],
            vbmap: vbmap.clone(),
        })
        .await
        .unwrap();
    assert!(placed.is_ok(), "{placed:?}");
    let rev = a.meta.state().borrow().map("default").unwrap().rev();
    until("every node serves the placed map", || {
        [&a, &b, &c]
            .iter()
            .all(|n| n.node.cluster_map().rev() == rev)
    })
    .await;

    // Node 0's vbuckets, and among them those whose first replica is node 1: there the old
    // rule (first live replica) would promote the copy that lags.
    let of_n0: Vec<VbId> = vbmap
        .iter()
        .filter(|(_, ch)| ch.active == Some(N0))
        .map(|(vb, _)| vb)
        .collect();
    let lagging: Vec<VbId> = vbmap
        .iter()
        .filter(|(_, ch)| **ch == Chain::new(Some(N0), vec![Some(N1), Some(N2)]))
        .map(|(vb, _)| vb)
        .collect();
    assert!(!lagging.is_empty(), "no chain [n0 n1 n2] in {vbmap:?}");
    // Keys of node 0's vbuckets only: node 1's are unavailable while it is down.
    let keys: Vec<String> = (0..2000)
        .map(|i| format!("fp{i}"))
        .filter(|k| of_n0.contains(&vbucket_of(k.as_bytes(), VBS)))
        .take(240)
        .collect();
    let (before, during) = keys.split_at(keys.len() / 2);
    assert!(lagging
        .iter()
        .all(|vb| during.iter().any(|k| vbucket_of(k.as_bytes(), VBS) == *vb)));

    let client = ClusterClient::connect(
        &[a.kv_addr.to_string()],
        ClusterOptions::sluice("Administrator", "password", "default"),
    )
    .await
    .unwrap();
    let durable = StoreOptions {
        durability: Some(Durability::new(DurabilityLevel::Majority)),
        ..Default::default()
    };
    for k in before {
        client
            .set(k.as_bytes(), k.as_bytes(), durable)
            .await
            .unwrap();
    }
    until("node 1 has every write so far", || {
        lagging.iter().all(|&vb| high(&b, vb) == high(&a, vb))
    })
    .await;

    // Node 1 stops; durable writes go on, acknowledged by nodes 0 and 2 (a majority of 3).
    let b_ports = (b.kv_addr.port(), b.admin_addr.port());
    b.shutdown().await.unwrap();
    for k in during {
        client
            .set(k.as_bytes(), k.as_bytes(), durable)
            .await
            .unwrap_or_else(|e| panic!("{k}: {e}"));
    }
    until("node 2 has every write", || {
        of_n0.iter().all(|&vb| high(&c, vb) == high(&a, vb))
    })
    .await;
    drop(client);

    // Node 0 stops for good; node 1 comes back (the metadata needs two of three voters) and
    // cannot catch up: its active is gone. On its old ports: node 2 may hold the newer Raft
    // log, and can only reach node 1 at the address it knows.
    a.shutdown().await.unwrap();
    let b = node(dirs[1].path(), None, |c| {
        two_replicas(c);
        (c.kv_port, c.admin_port) = b_ports;
    })
    .await;
    assert_eq!(b.meta.id(), N1);
    for &vb in &lagging {
        let (b_state, b_high, b_complete) = position(&b, vb).await;
        let (c_state, c_high, c_complete) = position(&c, vb).await;
        assert_eq!((b_state.as_str(), c_state.as_str()), ("replica", "replica"));
        assert!(b_complete && c_complete, "{vb}");
        assert!(
            b_high < c_high,
            "{vb}: node 1 at {b_high}, node 2 at {c_high}"
        );
        assert_eq!(Seqno(b_high), high(&b, vb));
    }

    // Fail node 0 over, through node 1 (whichever node is asked decides the same).
    let answer = admin_http::post(
        &b.admin_addr.to_string(),
        &common::cluster::admin(),
        "/api/v1/cluster/failover",
        &serde_json::json!({ "node": N0.0 }),
        Duration::from_secs(15),
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    // One bucket: its part of the failover.
    let report = &answer.body["buckets"][0];
    assert_eq!(report["bucket"], "default", "{:?}", answer.body);
    assert_eq!(
        report["promoted"].as_u64(),
        Some(of_n0.len() as u64),
        "{:?}",
        answer.body
    );
    assert_eq!(
        report["promoted_out_of_order"].as_u64(),
        Some(lagging.len() as u64),
        "{:?}",
        answer.body
    );
    assert_eq!(report["no_safe_copy"], serde_json::json!([]));

    // Node 2 is active where node 1 lagged, node 1 follows it (once node 2 has applied the
    // failover: node 1 answered when it was committed, node 2 may apply it a heartbeat later).
    let rev = report["rev"].as_u64().unwrap();
    until("node 2 applies the failover", || {
        c.meta.state().borrow().map("default").unwrap().rev().0 >= rev
    })
    .await;
    let map = c.meta.state().borrow().map("default").unwrap().clone();
    for &vb in &lagging {
        assert_eq!(
            map.vbmap().chain(vb),
            Some(&Chain::new(Some(N2), vec![Some(N1), None])),
            "{vb}"
        );
    }
    let new_rev = map.rev();
    until("nodes 1 and 2 serve the failover's map", || {
        [&b, &c]
            .iter()
            .all(|n| n.node.cluster_map().rev() >= new_rev)
    })
    .await;

    // Every write made before reads back, through the new map.
    let client = ClusterClient::connect(
        &[c.kv_addr.to_string()],
        ClusterOptions::sluice("Administrator", "password", "default"),
    )
    .await
    .unwrap();
    for k in &keys {
        let got = client
            .get(k.as_bytes())
            .await
            .unwrap_or_else(|e| panic!("{k}: {e}"));
        assert_eq!(&got.value[..], k.as_bytes(), "{k}");
    }
    // Node 1 catches up from its new active.
    until("node 1 follows node 2", || {
        lagging.iter().all(|&vb| high(&b, vb) >= high(&c, vb))
    })
    .await;

    for n in [b, c] {
        n.shutdown().await.unwrap();
    }
}
