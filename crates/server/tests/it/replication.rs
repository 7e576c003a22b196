//! Replication over DCP between two in-process nodes: a replica applies its producer's
//! changes exactly (seqno, CAS, history), resumes after a restart from where it stopped, and
//! starts a vbucket over when a producer with another history asks it to roll back.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::dcp_peer::{high_seqnos, write_all};
use common::kv_peer::Kv;
use sluice_engine::BucketType;
use sluice_server::ServerConfig;
use sluice_types::vbucket_of;
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

const VBS: u16 = 16;

async fn node(dir: &Path, replica_of: Option<std::net::SocketAddr>) -> sluice_manager::Running {
    let mut c = ServerConfig::new(dir);
    c.kv_port = 0;
    c.admin_port = 0;
    c.memcached_port = Some(0);
    c.vbuckets = VBS;
    c.memory_quota_mb = 64;
    c.bucket_type = BucketType::Couchbase;
    c.replica_of = replica_of.map(|a| a.to_string());
    sluice_manager::start(c).await.unwrap()
}

fn items(prefix: &str, n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..n)
        .map(|i| {
            (
                format!("key{}", i % 2000).into_bytes(),
                format!("{prefix}-{i}").into_bytes(),
            )
        })
        .collect()
}

/// Waits until the node's cluster agent has made it what its own map says (active
/// everywhere, for a node alone), which happens once after the start returns: states set by
/// hand before that would be undone.
async fn agent_applied(node: &sluice_manager::Running) {
    let rev = node.node.cluster_map().rev();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let own = node.control.bucket(&node.node.config.bucket).unwrap();
    while own.applied_rev() != Some(rev) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the agent applied its map"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until the replica's high seqno equals the active's for every vbucket alive on the
/// active (one it gave away in a takeover is left out).
async fn caught_up(active: &sluice_manager::Running, replica: &sluice_manager::Running) {
    let want = high_seqnos(active.kv_addr).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let have: HashMap<u16, u64> = replica
            .node
            .bucket
            .engine
            .vb_seqnos(None)
            .into_iter()
            .map(|(vb, s)| (vb.0, s.0))
            .collect();
        if want.iter().all(|(vb, s)| have.get(vb) == Some(s)) {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            // The replica's vbucket states too: a replica vbucket made active again (by a map
            // applied after the test set the states) takes no replication.
            let states: Vec<_> = (0..VBS)
                .map(|vb| replica.node.bucket.engine.vb_state(sluice_types::VbId(vb)))
                .collect();
            panic!("replica caught up: want {want:?}, have {have:?}, replica states {states:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every key reads the same from the replica (GET_REPLICA) as from the active: value and CAS.
async fn same_documents(active: &sluice_manager::Running, replica: &sluice_manager::Running) {
    let mut a = Kv::open(active.kv_addr).await;
    let mut r = Kv::open(replica.kv_addr).await;
    for i in 0..2000 {
        let key = format!("key{i}").into_bytes();
        let vb = vbucket_of(&key, VBS).0;
        let x = a.get(&key, vb).await;
        let y = r.get_replica(&key, vb).await;
        assert_eq!(
            (x.status, x.cas, &x.value),
            (y.status, y.cas, &y.value),
            "key{i}"
        );
    }
    for vb in 0..VBS {
        let vb = sluice_types::VbId(vb);
        assert_eq!(
            active.node.bucket.engine.failover_log(vb).unwrap(),
            replica.node.bucket.engine.failover_log(vb).unwrap(),
            "{vb}: one history on both sides"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_follows_resumes_and_rolls_back() {
    let (da, db, dc) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let active = node(da.path(), None).await;
    write_all(active.memcached_addr.unwrap(), &items("a", 6000)).await;
    let replica = node(db.path(), Some(active.kv_addr)).await;
    caught_up(&active, &replica).await;
    same_documents(&active, &replica).await;

    // Writes on a replica are refused; deletes replicate too.
    let mut r = Kv::open(replica.kv_addr).await;
    let key = b"key7";
    assert_eq!(r.set(key, b"x", vbucket_of(key, VBS).0).await.status, 0x07);
    let mut a = Kv::open(active.kv_addr).await;
    let del = a
        .call(sluice_proto::encode::Packet::request(0x04, vbucket_of(key, VBS).0, 1).key(key))
        .await;
    assert_eq!(del.status, 0);
    caught_up(&active, &replica).await;
    assert_eq!(
        r.get_replica(key, vbucket_of(key, VBS).0).await.status,
        0x01
    );

    // A restarted replica resumes from its own position, without starting over.
    replica.shutdown().await.unwrap();
    write_all(active.memcached_addr.unwrap(), &items("b", 3000)).await;
    let replica = node(db.path(), Some(active.kv_addr)).await;
    caught_up(&active, &replica).await;
    same_documents(&active, &replica).await;

    // Pointed at a node with another history, the replica is told to roll back: it starts
    // its vbuckets over and ends up a copy of the new producer.
    replica.shutdown().await.unwrap();
    let other = node(dc.path(), None).await;
    write_all(other.memcached_addr.unwrap(), &items("c", 2500)).await;
    let replica = node(db.path(), Some(other.kv_addr)).await;
    caught_up(&other, &replica).await;
    same_documents(&other, &replica).await;
    replica.shutdown().await.unwrap();
    other.shutdown().await.unwrap();
    active.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_moves_a_vbucket_without_losing_an_acknowledged_write() {
    use sluice_types::{VbId, VbState};
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let active = node(da.path(), None).await;
    write_all(active.memcached_addr.unwrap(), &items("a", 3000)).await;
    // Only the cluster's own replication may take a vbucket over, so the replica follows as
    // the active's cluster identity: a node of its own whose vbuckets are all replicas, fed
    // by a replication started by hand (a `--replica-of` node follows as the administrator).
    let replica = node(db.path(), None).await;
    agent_applied(&replica).await;
    for vb in 0..VBS {
        replica
            .node
            .bucket
            .engine
            .set_vbucket_state(VbId(vb), VbState::Replica)
            .unwrap();
    }
    let who = active.node.peer_credentials();
    let feed = sluice_server::Replication::start(
        replica.node.clone(),
        replica.node.bucket.clone(),
        sluice_server::ReplicationSpec {
            source: active.kv_addr.to_string(),
            username: who.username,
            password: who.password,
            bucket: "default".into(),
            vbuckets: (0..VBS).map(VbId).collect(),
            name: "replication:test".into(),
            consumer_name: "1".into(),
            tls: false,
        },
    );
    caught_up(&active, &replica).await;
    let vb = 3u16;
    let keys: Vec<Vec<u8>> = (0..100_000)
        .map(|i| format!("t{i}").into_bytes())
        .filter(|k| vbucket_of(k, VBS).0 == vb)
        .take(2000)
        .collect();
    // Writes to the vbucket go on while it moves; each acknowledged one must arrive.
    let writer = tokio::spawn({
        let addr = active.kv_addr;
        let keys = keys.clone();
        async move {
            let mut kv = Kv::open(addr).await;
            let mut acked = Vec::new();
            for k in &keys {
                let a = kv.set(k, k, vb).await;
                match a.status {
                    0 => acked.push((k.clone(), a.cas)),
                    0x07 => break, // the vbucket is no longer active there
                    s => panic!("write failed with 0x{s:x}"),
                }
            }
            acked
        }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(feed.takeover(VbId(vb)));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while replica.node.bucket.engine.vb_state(VbId(vb)).unwrap() != VbState::Active {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the takeover finished"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        active.node.bucket.engine.vb_state(VbId(vb)).unwrap(),
        VbState::Dead
    );
    let acked = writer.await.unwrap();
    assert!(!acked.is_empty());
    let mut r = Kv::open(replica.kv_addr).await;
    for (k, cas) in &acked {
        let got = r.get(k, vb).await;
        assert_eq!(
            (got.status, got.cas),
            (0, *cas),
            "{k:?} acknowledged by the old active"
        );
    }
    // The new active takes writes and has started its own branch of history.
    assert_eq!(r.set(b"after", b"x", vb).await.status, 0);
    let old = active.node.bucket.engine.failover_log(VbId(vb)).unwrap();
    let new = replica.node.bucket.engine.failover_log(VbId(vb)).unwrap();
    assert_eq!(
        &new.entries()[1..],
        old.entries(),
        "the new branch sits on the old history"
    );
    // The other vbuckets keep replicating.
    write_all(
        active.memcached_addr.unwrap(),
        &items("z", 500)
            .into_iter()
            .filter(|(k, _)| vbucket_of(k, VBS).0 != vb)
            .collect::<Vec<_>>(),
    )
    .await;
    caught_up(&active, &replica).await;
    feed.stop().await;
    replica.shutdown().await.unwrap();
    active.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_waits_for_vbuckets_its_producer_activates_late() {
    use sluice_types::{VbId, VbState};
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let active = node(da.path(), None).await;
    let set_all = |state: VbState| {
        for vb in 0..VBS {
            active
                .node
                .bucket
                .engine
                .set_vbucket_state(VbId(vb), state)
                .unwrap();
        }
    };
    // The producer does not serve these vbuckets yet (a new map not applied there yet):
    // every stream request is refused at first.
    agent_applied(&active).await;
    set_all(VbState::Dead);
    let replica = node(db.path(), Some(active.kv_addr)).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    set_all(VbState::Active);
    write_all(active.memcached_addr.unwrap(), &items("late", 1000)).await;
    caught_up(&active, &replica).await;
    same_documents(&active, &replica).await;
    replica.shutdown().await.unwrap();
    active.shutdown().await.unwrap();
}

/// Forwards every connection to `target`, and counts the DCP_SEQNO_ACKNOWLEDGED requests the
/// connecting side sends, per vbucket.
async fn ack_counting_proxy(
    target: std::net::SocketAddr,
) -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::Mutex<HashMap<u16, usize>>>,
) {
    use sluice_proto::{decode_frame, Decoded, Opcode};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acks = std::sync::Arc::new(std::sync::Mutex::new(HashMap::new()));
    let seen = acks.clone();
    tokio::spawn(async move {
        loop {
            let (client, _) = listener.accept().await.unwrap();
            let upstream = tokio::net::TcpStream::connect(target).await.unwrap();
            let (mut cr, mut cw) = client.into_split();
            let (mut ur, mut uw) = upstream.into_split();
            tokio::spawn(async move { tokio::io::copy(&mut ur, &mut cw).await });
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = vec![0u8; 64 * 1024];
                loop {
                    let n = match cr.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    if uw.write_all(&chunk[..n]).await.is_err() {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    while let Ok(Decoded::Frame(f, used)) = decode_frame(&buf, 1 << 26) {
                        if f.opcode == Opcode::DcpSeqnoAcknowledged.byte() {
                            *seen.lock().unwrap().entry(f.vbucket_or_status).or_default() += 1;
                        }
                        buf.drain(..used);
                    }
                }
            });
        }
    });
    (addr, acks)
}

/// A replica acks what it holds as soon as its producer accepts the stream, with nothing
/// streamed: a new active (a takeover, a failover) or one that forgot a reconnected
/// replica's acks knows nothing of it otherwise, and a prepare it holds would wait for new
/// traffic that a key blocked by that prepare never gets (found by the nemesis, seed 7).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_acks_what_it_holds_once_its_stream_is_accepted() {
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let active = node(dirs[0].path(), None).await;
    let (via, acks) = ack_counting_proxy(active.kv_addr).await;
    let replica = node(dirs[1].path(), Some(via)).await;
    // No write at all: every vbucket is empty on both sides.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let acked = acks.lock().unwrap().len();
        if acked == usize::from(VBS) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{acked} of {VBS} vbuckets acked with nothing streamed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    replica.shutdown().await.unwrap();
    active.shutdown().await.unwrap();
}

/// Plain writes are never acked: only a prepare waits for a replica's DCP_SEQNO_ACKNOWLEDGED
/// (Couchbase acks its high prepared seqno for the same reason). Before, every snapshot end
/// was acked, about one ack per write under load, each matched against the active's
/// durability monitor. Durable writes still get theirs (`tests/it/durability.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_writes_send_no_seqno_acks() {
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let active = node(dirs[0].path(), None).await;
    let (via, acks) = ack_counting_proxy(active.kv_addr).await;
    let replica = node(dirs[1].path(), Some(via)).await;
    let total = || acks.lock().unwrap().values().sum::<usize>();
    // Each vbucket's stream, once accepted, is acked once with what the replica holds.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while acks.lock().unwrap().len() < usize::from(VBS) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "every stream acked once accepted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = total();
    write_all(active.memcached_addr.unwrap(), &items("plain", 3000)).await;
    caught_up(&active, &replica).await;
    // Mid-snapshot and persistence acks would go out on the 2 ms timer: give them time.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = total();
    assert_eq!(
        after,
        before,
        "{} seqno acks for 3,000 plain writes replicated",
        after - before
    );
    replica.shutdown().await.unwrap();
    active.shutdown().await.unwrap();
}
