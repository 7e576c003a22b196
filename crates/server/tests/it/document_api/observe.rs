//! OBSERVE (legacy) over a real socket: each key's state and CAS, in memory then persisted,
//! deleted then the deletion persisted, missing, and a vbucket this node does not hold.

use crate::common::kv_peer::Kv;
use sluice_engine::BucketType;
use sluice_proto::encode::Packet;
use sluice_types::vbucket_of;
use std::time::{Duration, Instant};

const VBS: u16 = 16;

fn vb(key: &[u8]) -> u16 {
    vbucket_of(key, VBS).0
}

fn request(keys: &[(u16, &[u8])]) -> Vec<u8> {
    let mut v = Vec::new();
    for (vb, k) in keys {
        v.extend_from_slice(&vb.to_be_bytes());
        v.extend_from_slice(&(k.len() as u16).to_be_bytes());
        v.extend_from_slice(k);
    }
    v
}

/// (key, state, cas) per key of the answer.
fn parse(mut b: &[u8]) -> Vec<(Vec<u8>, u8, u64)> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let len = u16::from_be_bytes([b[2], b[3]]) as usize;
        let key = b[4..4 + len].to_vec();
        let state = b[4 + len];
        let cas = u64::from_be_bytes(b[5 + len..13 + len].try_into().unwrap());
        out.push((key, state, cas));
        b = &b[13 + len..];
    }
    out
}

async fn observe(kv: &mut Kv, key: &[u8]) -> (u8, u64) {
    let body = request(&[(vb(key), key)]);
    let a = kv.call(Packet::request(0x92, 0, 5).value(&body)).await;
    assert_eq!(a.status, 0);
    let got = parse(&a.value);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, key);
    (got[0].1, got[0].2)
}

/// Observes until the state is `want` (the flusher runs on its own schedule).
async fn until_state(kv: &mut Kv, key: &[u8], want: u8) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (state, cas) = observe(kv, key).await;
        if state == want {
            return cas;
        }
        assert!(
            Instant::now() < deadline,
            "state {state:#x}, never {want:#x}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn start(t: BucketType) -> (sluice_manager::Running, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let c = crate::common::loopback_config(dir.path(), t, VBS, 64);
    (sluice_manager::start(c).await.unwrap(), dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_follows_persistence() {
    let (node, _dir) = start(BucketType::Couchbase).await;
    let mut kv = Kv::open(node.kv_addr).await;
    let k = b"observed".as_slice();
    assert_eq!(observe(&mut kv, k).await, (0x80, 0), "missing");
    let set = kv.set(k, b"v", vb(k)).await;
    let (state, cas) = observe(&mut kv, k).await;
    assert!(state == 0x00 || state == 0x01, "{state:#x}");
    assert_eq!(cas, set.cas);
    assert_eq!(until_state(&mut kv, k, 0x01).await, set.cas);
    let del = kv.call(Packet::request(0x04, vb(k), 6).key(k)).await;
    assert_eq!(del.status, 0);
    let (state, _) = observe(&mut kv, k).await;
    assert!(state == 0x81 || state == 0x80, "{state:#x}");
    until_state(&mut kv, k, 0x80).await;

    // Several keys at once, in order; a vbucket this node does not hold fails the request.
    kv.set(b"a", b"1", vb(b"a")).await;
    let body = request(&[(vb(b"a"), b"a"), (vb(b"zz"), b"zz")]);
    let a = kv.call(Packet::request(0x92, 0, 7).value(&body)).await;
    let got = parse(&a.value);
    assert_eq!(
        (got[0].0.as_slice(), got[1].0.as_slice(), got[1].1),
        (&b"a"[..], &b"zz"[..], 0x80)
    );
    let body = request(&[(VBS + 3, b"a")]);
    assert_eq!(
        kv.call(Packet::request(0x92, 0, 8).value(&body))
            .await
            .status,
        0x07
    );
    assert_eq!(
        kv.call(Packet::request(0x92, 0, 9)).await.status,
        0x04,
        "no keys"
    );
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ephemeral_bucket_never_says_persisted() {
    let (node, _dir) = start(BucketType::Ephemeral).await;
    let mut kv = Kv::open(node.kv_addr).await;
    let set = kv.set(b"e", b"v", vb(b"e")).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(observe(&mut kv, b"e").await, (0x00, set.cas));
    node.shutdown().await.unwrap();
}
