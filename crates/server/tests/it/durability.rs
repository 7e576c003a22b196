//! Durable writes (SyncWrites) on a replicated vbucket: a prepare that waits for the
//! replica's seqno acknowledgements, invisible to readers until its commit. Once
//! acknowledged, the replica holds the prepare (and, for persist-to-majority, has it on
//! disk) and gets the commit right after; with the replica gone the write is aborted at its
//! timeout and answered as ambiguous, and the old value stays; with the replica back,
//! durable writes succeed again.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::cluster::{keys_active_on, node, placed_pair, VBS};
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
    let (dirs, a, b) = placed_pair().await;

    let keys = keys_active_on(&a, NodeId(0), "dur-", 20);
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
        // Acknowledged: the replica holds the prepare, and the commit follows it there.
        let r = replica_value(&mut cb, k, value.as_bytes()).await;
        assert_eq!(r.cas, m.cas, "the commit keeps the prepare's CAS");
        let vb: VbId = vbucket_of(k.as_bytes(), VBS);
        let seqno = m.token.unwrap().seqno;
        if level != DurabilityLevel::Majority {
            assert!(
                a.node.bucket.engine.persisted_seqno(vb).unwrap() >= seqno,
                "{k}"
            );
        }
        if level == DurabilityLevel::PersistToMajority {
            assert!(
                b.node.bucket.engine.persisted_seqno(vb).unwrap() >= seqno,
                "{k}"
            );
        }
    }

    // The replica goes away: a durable write is prepared here but never acknowledged.
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
    assert_eq!(
        &ca.get(k.as_bytes()).await.unwrap().value[..],
        b"v0",
        "aborted"
    );
    let stats = &a.node.bucket.engine.stats;
    assert_eq!(stats.vb_active_sync_write_accepted_count.get(), 21);
    assert_eq!(stats.vb_active_sync_write_committed_count.get(), 20);
    assert_eq!(stats.vb_active_sync_write_aborted_count.get(), 1);
    // Plain writes go on: the abort freed the key.
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

/// The replica's copy of `k` once it shows `value` (the commit reaches it just after the
/// writer was answered).
async fn replica_value(c: &mut Client, k: &str, value: &[u8]) -> sluice_client::GetResult {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        match c.get_replica(k.as_bytes()).await {
            Ok(r) if &r.value[..] == value => return r,
            _ if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(5)).await
            }
            other => panic!("{k}: the replica never showed the commit: {other:?}"),
        }
    }
}

/// Named scenario of the SyncWrites issue: a reader never sees a pending durable write, a
/// second writer of the key is told to retry, and after the ambiguous timeout the old value
/// is there. (Before SyncWrites, the value was applied at once and stayed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_never_sees_a_pending_durable_write() {
    let (_dirs, a, b) = placed_pair().await;
    let k = keys_active_on(&a, NodeId(0), "dur-", 1).remove(0);
    let mut writer = client(a.kv_addr).await;
    let mut reader = client(a.kv_addr).await;
    writer
        .set(k.as_bytes(), b"old", StoreOptions::default())
        .await
        .unwrap();
    b.shutdown().await.unwrap();

    let key = k.clone();
    let vb = vbucket_of(k.as_bytes(), VBS);
    let pending = tokio::spawn(async move {
        writer
            .set(
                k.as_bytes(),
                b"new",
                durable(DurabilityLevel::Majority, 1500),
            )
            .await
    });
    // The prepare exists (the high seqno moved) before the reader looks.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while a.node.bucket.engine.sync_write_seqnos(vb).unwrap().0 == sluice_types::Seqno::ZERO {
        assert!(tokio::time::Instant::now() < deadline, "no prepare made");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    for _ in 0..20 {
        let got = reader.get(key.as_bytes()).await.unwrap();
        assert_eq!(&got.value[..], b"old", "a pending write is invisible");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let err = reader
        .set(key.as_bytes(), b"other", StoreOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(Status::SyncWriteInProgress), "{err}");

    let err = pending.await.unwrap().unwrap_err();
    assert_eq!(err.status(), Some(Status::SyncWriteAmbiguous), "{err}");
    assert_eq!(
        &reader.get(key.as_bytes()).await.unwrap().value[..],
        b"old",
        "aborted at the timeout: the old value stays"
    );
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

/// A bucket's durability minimum (`durabilityMinLevel`) makes every mutation, even one whose
/// client asked for no durability, a SyncWrite at least that durable; reads are not touched,
/// and the cluster's edit reaches the node without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buckets_durability_minimum_makes_plain_writes_sync_writes() {
    let (_dirs, a, b) = placed_pair().await;
    let keys = keys_active_on(&a, NodeId(0), "dur-", 3);
    let mut ca = client(a.kv_addr).await;
    let prepared = |k: &str| {
        let vb = vbucket_of(k.as_bytes(), VBS);
        a.node.bucket.engine.sync_write_seqnos(vb).unwrap().0
    };
    // No minimum: a plain write is no SyncWrite.
    ca.set(keys[0].as_bytes(), b"plain", StoreOptions::default())
        .await
        .unwrap();
    assert_eq!(prepared(&keys[0]), sluice_types::Seqno::ZERO);

    set_durability_min(&a, Some(DurabilityLevel::PersistToMajority)).await;
    let m = ca
        .set(keys[1].as_bytes(), b"raised", StoreOptions::default())
        .await
        .unwrap();
    let seqno = m.token.unwrap().seqno;
    assert_eq!(prepared(&keys[1]), seqno, "prepared, then committed");
    // Persisted on both before the (plain) client was answered: the minimum's level, not
    // merely some SyncWrite.
    let vb = vbucket_of(keys[1].as_bytes(), VBS);
    for n in [&a, &b] {
        assert!(n.node.bucket.engine.persisted_seqno(vb).unwrap() >= seqno);
    }
    let stats = &a.node.bucket.engine.stats;
    assert_eq!(stats.vb_active_sync_write_accepted_count.get(), 1);
    assert_eq!(stats.vb_active_sync_write_committed_count.get(), 1);
    // A read is no mutation: untouched by the minimum.
    assert_eq!(
        &ca.get(keys[1].as_bytes()).await.unwrap().value[..],
        b"raised"
    );

    // The minimum back to none, and the replica gone: plain writes are plain again, with
    // no replica to wait for.
    set_durability_min(&a, None).await;
    b.shutdown().await.unwrap();
    ca.set(keys[2].as_bytes(), b"plain again", StoreOptions::default())
        .await
        .unwrap();
    assert_eq!(prepared(&keys[2]), sluice_types::Seqno::ZERO);
    a.shutdown().await.unwrap();
}

/// Sets the durability minimum of bucket `default` through the metadata, and waits until
/// node `n` applies it.
async fn set_durability_min(n: &Running, level: Option<DurabilityLevel>) {
    let cmd = sluice_cluster::metadata::MetaCommand::SetBucketDurabilityMin {
        name: "default".into(),
        level,
    };
    n.meta.propose(cmd).await.unwrap().unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while n.node.bucket.durability_min() != level {
        assert!(tokio::time::Instant::now() < deadline, "never applied");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A raw KV connection that negotiated `features`, for what the client library does not
/// expose: pipelining, and answers out of order.
async fn raw(addr: std::net::SocketAddr, features: &[u16]) -> tokio::net::TcpStream {
    use sluice_proto::encode::Packet;
    use tokio::io::AsyncWriteExt;
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let f: Vec<u8> = features.iter().flat_map(|c| c.to_be_bytes()).collect();
    let mut hello = Packet::request(0x1f, 0, 1).key(b"t").value(&f).to_vec();
    hello.extend(
        Packet::request(0x21, 0, 2)
            .key(b"PLAIN")
            .value(b"\0Administrator\0password")
            .to_vec(),
    );
    hello.extend(Packet::request(0x89, 0, 3).key(b"default").to_vec());
    s.write_all(&hello).await.unwrap();
    let mut buf = Vec::new();
    for opaque in 1..=3 {
        let (status, got) = next_answer(&mut s, &mut buf).await;
        assert_eq!((status, got), (0, opaque), "login step {opaque}");
    }
    assert!(buf.is_empty());
    s
}

/// The next answer's (status, opaque).
async fn next_answer(s: &mut tokio::net::TcpStream, buf: &mut Vec<u8>) -> (u16, u32) {
    use sluice_proto::{decode_frame, Decoded};
    use tokio::io::AsyncReadExt;
    loop {
        if let Decoded::Frame(f, used) = decode_frame(buf, 1 << 26).unwrap() {
            let out = (f.vbucket_or_status, f.opaque);
            buf.drain(..used);
            return out;
        }
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut chunk))
            .await
            .expect("an answer within 10 s")
            .unwrap();
        assert!(n > 0, "closed");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Named scenario (no head-of-line blocking): with UnorderedExecution, a durable write that
/// waits does not hold back the GET sent after it; without it, answers keep request order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unordered_execution_answers_around_a_waiting_durable_write() {
    use sluice_proto::encode::Packet;
    use tokio::io::AsyncWriteExt;
    let (_dirs, a, b) = placed_pair().await;
    let k = keys_active_on(&a, NodeId(0), "dur-", 1).remove(0);
    let vb = vbucket_of(k.as_bytes(), VBS).0;
    b.shutdown().await.unwrap(); // nobody acknowledges: the durable write waits 800 ms
                                 // Level majority, timeout 800 ms (frame info id 1, length 3).
    let durability = [0x13, 0x01, 0x03, 0x20];
    let extras = [0u8; 8];
    for (features, want_first) in [(&[0x10u16, 0x11, 0x0e][..], 101u32), (&[0x10, 0x11], 100)] {
        let mut s = raw(a.kv_addr, features).await;
        let mut pipelined = Packet::request(0x01, vb, 100)
            .framing_extras(&durability)
            .extras(&extras)
            .key(k.as_bytes())
            .value(b"v")
            .to_vec();
        pipelined.extend(Packet::request(0x00, vb, 101).key(b"absent").to_vec());
        s.write_all(&pipelined).await.unwrap();
        let mut buf = Vec::new();
        let first = next_answer(&mut s, &mut buf).await;
        let second = next_answer(&mut s, &mut buf).await;
        assert_eq!(first.1, want_first, "features {features:x?}");
        let durable = if first.1 == 100 { first } else { second };
        assert_eq!(durable.0, Status::SyncWriteAmbiguous as u16);
        let get = if first.1 == 101 { first } else { second };
        assert_eq!(get.0, Status::KeyEnoent as u16);
    }
    a.shutdown().await.unwrap();
}
