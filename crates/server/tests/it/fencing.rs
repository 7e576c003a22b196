//! Fencing (named scenario of the SyncWrites issue): a node cut off from a majority of the
//! metadata voters stops serving its active vbuckets within the fencing bound — writes and
//! reads get NOT_MY_VBUCKET, replica reads still work — while a node with one peer down (the
//! rest cannot outvote it) keeps serving.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::cluster::{node, place_on, VBS};
use sluice_client::{Client, ConnectOptions, StoreOptions};
use sluice_cluster::NodeId;
use sluice_manager::fencing::FENCE_BOUND;
use sluice_manager::Running;
use sluice_proto::Status;
use sluice_types::vbucket_of;
use std::time::{Duration, Instant};

fn key_active_on(n: &Running, me: NodeId) -> String {
    let view = n.node.cluster_map();
    (0..)
        .map(|i| format!("fence-{i}"))
        .find(|k| {
            view.map
                .vbmap()
                .chain(vbucket_of(k.as_bytes(), VBS))
                .unwrap()
                .active
                == Some(me)
        })
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cut_off_from_the_majority_stops_serving_its_actives() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = node(dirs[0].path(), None, |_| {}).await;
    let b = node(dirs[1].path(), Some(a.admin_addr), |_| {}).await;
    let c = node(dirs[2].path(), Some(a.admin_addr), |_| {}).await;
    place_on(&a, &[&a, &b, &c], &[NodeId(0), NodeId(1), NodeId(2)]).await;
    let k = key_active_on(&a, NodeId(0));
    let mut client = Client::connect(
        a.kv_addr,
        ConnectOptions::sluice("Administrator", "password", "default"),
    )
    .await
    .unwrap();
    client
        .set(k.as_bytes(), b"before", StoreOptions::default())
        .await
        .unwrap();

    // One peer down: the other two voters are still a majority with this node.
    c.shutdown().await.unwrap();
    tokio::time::sleep(FENCE_BOUND * 2).await;
    assert!(!a.node.is_fenced(), "one peer down is no partition");
    client
        .set(k.as_bytes(), b"one-down", StoreOptions::default())
        .await
        .unwrap();

    // Both peers gone: they could be a majority elsewhere, promoting this node's replicas.
    let cut = Instant::now();
    b.shutdown().await.unwrap();
    let deadline = cut + Duration::from_secs(15);
    let fenced_after = loop {
        match client
            .set(k.as_bytes(), b"cut-off", StoreOptions::default())
            .await
        {
            Err(e) if e.status() == Some(Status::NotMyVbucket) => break cut.elapsed(),
            Ok(_) | Err(_) => {
                assert!(Instant::now() < deadline, "never fenced");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    println!("fenced {fenced_after:?} after the last peer went (bound {FENCE_BOUND:?})");
    let err = client.get(k.as_bytes()).await.unwrap_err();
    assert_eq!(err.status(), Some(Status::NotMyVbucket), "reads too: {err}");
    assert!(a.node.is_fenced());
    a.shutdown().await.unwrap();
}
