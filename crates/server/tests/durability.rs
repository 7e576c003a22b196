//! Durable writes on a replicated vbucket wait for the replica's seqno acknowledgements:
//! once acknowledged, the replica already holds the write (and, for persist-to-majority, has
//! it on disk); with the replica gone the write times out as ambiguous, never acknowledged;
//! with the replica back, durable writes succeed again.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

mod common;

use common::cluster::{node, place_on, VBS};
use sluice_client::{Client, ConnectOptions, Durability, DurabilityLevel, StoreOptions};
use sluice_cluster::NodeId;
use sluice_manager::Running;
use sluice_proto::Status;
use sluice_types::{vbucket_of, VbId};
use std::time::Duration;

fn durable(level: DurabilityLevel, timeout_ms: u16) -> StoreOptions {
    StoreOptions {
        durability: Some(Durability {
            level,
            timeout_ms: Some(timeout_ms),
        }),
        ..Default::default()
    }
}

/// Keys whose vbucket is active on node 0 (with its replica on node 1).
fn keys_active_on(n: &Running, me: NodeId, count: usize) -> Vec<String> {
    let view = n.node.cluster_map();
    (0..)
        .map(|i| format!("dur-{i}"))
        .filter(|k| {
            let vb = vbucket_of(k.as_bytes(), VBS);
            view.map.vbmap().chain(vb).unwrap().active == Some(me)
        })
        .take(count)
        .collect()
}

async fn client(addr: std::net::SocketAddr) -> Client {
    Client::connect(
        addr,
        ConnectOptions::sluice("Administrator", "password", "default"),
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_writes_wait_for_the_replica() {
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = node(dirs[0].path(), None, |_| {}).await;
    let b = node(dirs[1].path(), Some(a.admin_addr), |_| {}).await;
    place_on(&a, &[&a, &b], &[NodeId(0), NodeId(1)]).await;

    let keys = keys_active_on(&a, NodeId(0), 20);
    let mut ca = client(a.kv_addr).await;
    let mut cb = client(b.kv_addr).await;
    for (i, k) in keys.iter().enumerate() {
        let level = [
            DurabilityLevel::Majority,
            DurabilityLevel::MajorityAndPersistOnMaster,
            DurabilityLevel::PersistToMajority,
        ][i % 3];
        let value = format!("v{i}");
        let m = ca
            .set(k.as_bytes(), value.as_bytes(), durable(level, 5000))
            .await
            .unwrap_or_else(|e| panic!("{k} at {level:?}: {e}"));
        // Acknowledged: the replica holds it already, no waiting.
        let r = cb.get_replica(k.as_bytes()).await.unwrap();
        assert_eq!(&r.value[..], value.as_bytes(), "{k}");
        assert_eq!(r.cas, m.cas);
        let vb: VbId = vbucket_of(k.as_bytes(), VBS);
        let seqno = m.token.unwrap().seqno;
        if level != DurabilityLevel::Majority {
            assert!(a.node.bucket.persisted_seqno(vb).unwrap() >= seqno, "{k}");
        }
        if level == DurabilityLevel::PersistToMajority {
            assert!(b.node.bucket.persisted_seqno(vb).unwrap() >= seqno, "{k}");
        }
    }

    // The replica goes away: a durable write is applied here but never acknowledged.
    drop(cb);
    b.shutdown().await.unwrap();
    let k = &keys[0];
    let err = ca
        .set(
            k.as_bytes(),
            b"unacked",
            durable(DurabilityLevel::Majority, 300),
        )
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(Status::SyncWriteAmbiguous), "{err}");
    // Plain writes go on.
    ca.set(k.as_bytes(), b"plain", StoreOptions::default())
        .await
        .unwrap();

    // The replica comes back (same member, its own directory): durable writes succeed
    // again once it has caught up and acknowledged.
    let b = node(dirs[1].path(), None, |_| {}).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match ca
            .set(
                k.as_bytes(),
                b"again",
                durable(DurabilityLevel::Majority, 1000),
            )
            .await
        {
            Ok(_) => break,
            Err(e) if e.status() == Some(Status::SyncWriteAmbiguous) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "never durable again"
                );
            }
            Err(e) => panic!("{e}"),
        }
    }
    let mut cb = client(b.kv_addr).await;
    assert_eq!(
        &cb.get_replica(k.as_bytes()).await.unwrap().value[..],
        b"again"
    );
    b.shutdown().await.unwrap();
    a.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_without_its_replica_refuses_durable_writes() {
    // One node, one replica configured, nobody to hold it: the majority (2 of 2) cannot be
    // reached, so the write is refused before it is made.
    let dir = tempfile::tempdir().unwrap();
    let a = node(dir.path(), None, |_| {}).await;
    let mut ca = client(a.kv_addr).await;
    let err = ca
        .set(b"k", b"v", durable(DurabilityLevel::Majority, 300))
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(Status::DurabilityImpossible), "{err}");
    assert!(
        ca.get(b"k").await.unwrap_err().is_not_found(),
        "nothing written"
    );
    a.shutdown().await.unwrap();
}
