//! The cluster identity on the KV port: only a connection authenticated as the cluster
//! (`@cluster` with the cluster's secret) may request a takeover stream, which kills the
//! active copy, or send seqno acks, which complete durable writes. An administrator's
//! connection is refused the first (EACCESS) and has the second ignored.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::cluster::{node, placed_pair, until, VBS};
use common::dcp_peer::Consumer;
use common::kv_peer::Kv;
use sluice_client::Packet;
use sluice_client::{Client, ConnectOptions, Durability, DurabilityLevel, StoreOptions};
use sluice_cluster::NodeId;
use sluice_proto::Status;
use sluice_types::identity::CLUSTER_USER;
use sluice_types::{vbucket_of, VbId, VbState};
use std::time::Duration;

/// A DCP producer connection on `addr`, logged in as `user`, naming replica node 1 as its
/// consumer.
async fn producer_conn(addr: std::net::SocketAddr, user: &str, password: &str) -> Consumer {
    let kv = Kv::open_as(addr, user, password).await;
    let controls = [("consumer_name", "1"), ("enable_sync_writes", "true")];
    Consumer::open_on(kv, &format!("test:{user}"), 0, &controls).await
}

/// DCP_STREAM_REQ for all of `vb` with the takeover flag.
fn takeover_request(vb: u16) -> Vec<u8> {
    let mut extras = [0u8; 48];
    extras[..4].copy_from_slice(&1u32.to_be_bytes()); // TAKEOVER
    extras[16..24].copy_from_slice(&u64::MAX.to_be_bytes()); // end
    Packet::request(0x53, vb, 7).extras(&extras).to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_cluster_may_request_a_takeover() {
    let dir = tempfile::tempdir().unwrap();
    let a = node(dir.path(), None, |c| c.replicas = 0).await;
    let secret = a.node.credentials.cluster_password().unwrap().to_string();

    let mut admin = producer_conn(a.kv_addr, "Administrator", "password").await;
    admin.send_raw(&takeover_request(0)).await;
    let (status, _) = admin.recv_response().await;
    assert_eq!(
        status,
        Status::Eaccess.code(),
        "an administrator's takeover"
    );
    assert_eq!(
        a.node.bucket.engine.vb_state(VbId(0)).unwrap(),
        VbState::Active
    );

    let mut cluster = producer_conn(a.kv_addr, CLUSTER_USER, &secret).await;
    cluster.send_raw(&takeover_request(0)).await;
    let (status, _) = cluster.recv_response().await;
    assert_eq!(status, 0, "the cluster's takeover is accepted");
    a.shutdown().await.unwrap();
}

/// A durable write to `key` on `c`, which times out after `timeout_ms` without acks.
async fn durable_set(c: &mut Client, key: &str, timeout_ms: u16) -> Result<(), Status> {
    let opts = StoreOptions {
        durability: Some(Durability {
            level: DurabilityLevel::Majority,
            timeout_ms: Some(timeout_ms),
        }),
        ..Default::default()
    };
    c.set(key.as_bytes(), b"durable", opts)
        .await
        .map(|_| ())
        .map_err(|e| e.status().unwrap())
}

/// Starts a durable write of `key` on node `n`, waits until its prepare is in the vbucket,
/// acks that prepare as replica node 1 over `acker`, and returns how the write ended.
async fn write_acked_by(
    n: &sluice_manager::Running,
    key: &str,
    acker: &mut Consumer,
) -> Result<(), Status> {
    let vb = vbucket_of(key.as_bytes(), VBS);
    let before = n.node.bucket.engine.sync_write_seqnos(vb).unwrap().0;
    let opts = ConnectOptions::sluice("Administrator", "password", "default");
    let mut c = Client::connect(n.kv_addr, opts).await.unwrap();
    let key_owned = key.to_string();
    let write = tokio::spawn(async move { durable_set(&mut c, &key_owned, 3000).await });
    until("the prepare is in the vbucket", || {
        n.node.bucket.engine.sync_write_seqnos(vb).unwrap().0 > before
    })
    .await;
    let prepared = n.node.bucket.engine.sync_write_seqnos(vb).unwrap().0;
    let mut extras = [0u8; 16];
    extras[..8].copy_from_slice(&prepared.0.to_be_bytes());
    extras[8..].copy_from_slice(&prepared.0.to_be_bytes());
    acker
        .send_raw(&Packet::request(0x61, vb.0, 0).extras(&extras).to_vec())
        .await;
    write.await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_clusters_seqno_acks_complete_a_durable_write() {
    let (_dirs, a, b) = placed_pair().await;
    // The replica goes: only an ack sent in its name can complete a durable write now.
    b.shutdown().await.unwrap();
    let key = (0..)
        .map(|i| format!("acked-{i}"))
        .find(|k| {
            let vb = vbucket_of(k.as_bytes(), VBS);
            let view = a.node.cluster_map();
            view.map.vbmap().chain(vb).unwrap().active == Some(NodeId(0))
        })
        .unwrap();

    let mut admin = producer_conn(a.kv_addr, "Administrator", "password").await;
    assert_eq!(
        write_acked_by(&a, &key, &mut admin).await,
        Err(Status::SyncWriteAmbiguous),
        "an administrator's ack in node 1's name does not count"
    );

    let secret = a.node.credentials.cluster_password().unwrap().to_string();
    let mut cluster = producer_conn(a.kv_addr, CLUSTER_USER, &secret).await;
    let acked = tokio::time::timeout(
        Duration::from_secs(10),
        write_acked_by(&a, &key, &mut cluster),
    )
    .await
    .unwrap();
    assert_eq!(acked, Ok(()), "the cluster's ack completes the write");
    a.shutdown().await.unwrap();
}
