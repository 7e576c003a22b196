//! Failover on three in-process nodes with one replica: a node stops, the metadata leader
//! fails it over after the auto-failover timeout, its replicas elsewhere become active on a
//! new failover-log branch, and every durable write acknowledged before is read back through
//! the new map. Durable writes to promoted vbuckets (no replica left) are refused as
//! impossible; the manual failover endpoint answers what it cannot do.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::cluster::{node, place_on, until, VBS};
use sluice_client::admin_http;
use sluice_client::{ClusterClient, ClusterOptions, Durability, DurabilityLevel, StoreOptions};
use sluice_cluster::metadata::NodeStatus;
use sluice_cluster::NodeId;
use sluice_manager::Running;
use sluice_proto::Status;
use sluice_types::vbucket_of;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_node_is_failed_over_and_nothing_acknowledged_is_lost() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let fast = |c: &mut sluice_server::ServerConfig| {
        c.auto_failover_timeout = Some(Duration::from_secs(1))
    };
    let a = node(dirs[0].path(), None, fast).await;
    let b = node(dirs[1].path(), Some(a.admin_addr), fast).await;
    let c = node(dirs[2].path(), Some(a.admin_addr), fast).await;
    let ids = [NodeId(0), NodeId(1), NodeId(2)];
    place_on(&a, &[&a, &b, &c], &ids).await;
    let placed_map = a.meta.state().borrow().map("default").unwrap().clone();

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
    let keys: Vec<String> = (0..200).map(|i| format!("fo{i}")).collect();
    for k in &keys {
        client
            .set(k.as_bytes(), k.as_bytes(), durable)
            .await
            .unwrap_or_else(|e| panic!("{k}: {e}"));
    }

    // The victim is not the leader, so the leader's clock runs the whole time.
    let leader = a.meta.leader().unwrap();
    let (victim, survivors): (Running, Vec<Running>) = {
        let mut all = vec![a, b, c];
        let at = all
            .iter()
            .position(|n| n.meta.id() != leader)
            .expect("a follower");
        let v = all.remove(at);
        (v, all)
    };
    let victim_id = victim.meta.id();
    victim.shutdown().await.unwrap();
    until("the victim is failed over", || {
        survivors.iter().all(|n| {
            let view = n.node.cluster_map();
            view.rev() > placed_map.rev() && !view.map.nodes().iter().any(|i| i.id == victim_id)
        })
    })
    .await;
    let state = survivors[0].meta.state().borrow().clone();
    assert_eq!(
        state.node(victim_id).unwrap().status,
        NodeStatus::FailedOver
    );

    // Promoted vbuckets are active on a new branch of their history.
    let after = survivors[0].node.cluster_map().map.clone();
    for (vb, chain) in placed_map.vbmap().iter() {
        if chain.active != Some(victim_id) {
            continue;
        }
        let new_active = after.vbmap().chain(vb).unwrap().active.unwrap();
        let n = survivors
            .iter()
            .find(|n| n.meta.id() == new_active)
            .unwrap();
        let holder = n.node.clone();
        until("the promoted replica is active", || {
            holder.bucket.engine.vb_state(vb).ok() == Some(sluice_types::VbState::Active)
        })
        .await;
        let log = n.node.bucket.engine.failover_log(vb).unwrap();
        assert!(log.entries().len() >= 2, "{vb}: {log:?}");
    }

    // Every acknowledged durable write is there.
    for k in &keys {
        let got = client
            .get(k.as_bytes())
            .await
            .unwrap_or_else(|e| panic!("{k}: {e}"));
        assert_eq!(&got.value[..], k.as_bytes());
    }
    // A promoted vbucket has no replica left: durable writes are impossible, plain ones work.
    let promoted_key = keys
        .iter()
        .find(|k| {
            let vb = vbucket_of(k.as_bytes(), VBS);
            placed_map.vbmap().chain(vb).unwrap().active == Some(victim_id)
        })
        .unwrap();
    let err = client
        .set(promoted_key.as_bytes(), b"x", durable)
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(Status::DurabilityImpossible), "{err}");
    client
        .set(promoted_key.as_bytes(), b"x", StoreOptions::default())
        .await
        .unwrap();

    // The manual endpoint: an unknown node, and one already failed over.
    let admin = survivors[0].admin_addr.to_string();
    let post = |node: u32| {
        let admin = admin.clone();
        async move {
            admin_http::post(
                &admin,
                &common::cluster::admin(),
                "/api/v1/cluster/failover",
                &serde_json::json!({ "node": node }),
                Duration::from_secs(10),
            )
            .await
            .unwrap()
        }
    };
    assert_eq!(post(9).await.status, 404);
    let again = post(victim_id.0).await;
    assert_eq!(again.status, 409, "{:?}", again.body);
    // A survivor now holds the only copy of the vbuckets promoted onto it.
    let loses = post(survivors[1].meta.id().0).await;
    assert_eq!(loses.status, 409, "{:?}", loses.body);
    assert!(
        loses.body["error"].as_str().unwrap().contains("loses"),
        "{:?}",
        loses.body
    );

    for n in survivors {
        n.shutdown().await.unwrap();
    }
}
