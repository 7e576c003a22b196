//! Three nodes form a cluster through `join`: one replicated state (openraft), one map served
//! by all; a map placing the bucket on all three is followed by every node, a smart client
//! bootstrapped from any node reaches every vbucket, replicas fill, and a node restarted on
//! other ports comes back as the same member, without `join`, at its new address.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::cluster::{node, VBS};
use sluice_client::{ClusterClient, ClusterOptions, StoreOptions};
use sluice_cluster::metadata::{MetaCommand, NodeStatus};
use sluice_cluster::{place, NodeId};
use sluice_manager::Running;
use std::time::Duration;

/// Waits until every node's applied state satisfies `cond`.
async fn until(nodes: &[&Running], what: &str, cond: impl Fn(&Running) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !nodes.iter().all(|n| cond(n)) {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_join_share_one_map_and_serve_it() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = node(dirs[0].path(), None, |_| {}).await;
    let b = node(dirs[1].path(), Some(a.admin_addr), |_| {}).await;
    // A member other than the first admits the third.
    let c = node(dirs[2].path(), Some(b.admin_addr), |_| {}).await;
    assert_eq!(
        [a.meta.id(), b.meta.id(), c.meta.id()],
        [NodeId(0), NodeId(1), NodeId(2)]
    );
    let all = [&a, &b, &c];
    until(&all, "every node sees three nodes", |n| {
        n.meta.state().borrow().nodes().len() == 3
    })
    .await;
    // Joined, not placed yet: only node 0 is in the map, and the others hold no vbucket.
    let state = a.meta.state().borrow().clone();
    assert_eq!(state.node(NodeId(1)).unwrap().status, NodeStatus::Joining);
    let first = state.map("default").unwrap().clone();
    assert_eq!(first.nodes().len(), 1);
    for n in &all {
        assert_eq!(n.node.cluster_map().rev(), first.rev());
    }
    assert!(b
        .node
        .bucket
        .engine
        .vb_seqnos(Some(sluice_types::VbState::Active))
        .is_empty());

    // Place the (empty) bucket on all three, through a follower.
    let ids = [NodeId(0), NodeId(1), NodeId(2)];
    let applied = c
        .meta
        .propose(MetaCommand::SetMap {
            bucket: "default".into(),
            expected_rev: Some(first.rev()),
            nodes: ids.to_vec(),
            vbmap: place(&ids, VBS, 1).unwrap(),
        })
        .await
        .unwrap();
    assert!(applied.is_ok(), "{applied:?}");
    let placed = a.meta.state().borrow().map("default").unwrap().clone();
    until(&all, "every node serves the new map", |n| {
        n.node.cluster_map().rev() == placed.rev()
    })
    .await;

    // A smart client from node 2 alone reaches every vbucket; replicas fill.
    let client = ClusterClient::connect(
        &[c.kv_addr.to_string()],
        ClusterOptions::sluice("Administrator", "password", "default"),
    )
    .await
    .unwrap();
    let keys: Vec<String> = (0..300).map(|i| format!("k{i}")).collect();
    for k in &keys {
        client
            .set(k.as_bytes(), b"v", StoreOptions::default())
            .await
            .unwrap();
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    for k in &keys {
        loop {
            match client.get_replica(k.as_bytes(), 0).await {
                Ok(r) if &r.value[..] == b"v" => break,
                other => assert!(
                    tokio::time::Instant::now() < deadline,
                    "{k}: replica {other:?}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    // Node 1 restarts from its directory without join, on other ports: same id and state;
    // the cluster records its new address in the next map, and the client follows it.
    let old_kv = b.kv_addr.port();
    b.shutdown().await.unwrap();
    let b = node(dirs[1].path(), None, |_| {}).await;
    assert_eq!(b.meta.id(), NodeId(1));
    assert_ne!(b.kv_addr.port(), old_kv);
    let new_kv = b.kv_addr.port();
    let all = [&a, &b, &c];
    until(
        &all,
        "every node serves the map with node 1's new address",
        |n| {
            let view = n.node.cluster_map();
            view.rev() > placed.rev()
                && view
                    .map
                    .nodes()
                    .iter()
                    .any(|i| i.id == NodeId(1) && i.kv_port == new_kv)
        },
    )
    .await;
    for k in &keys {
        assert_eq!(&client.get(k.as_bytes()).await.unwrap().value[..], b"v");
    }
    for n in [c, b, a] {
        n.shutdown().await.unwrap();
    }
}
