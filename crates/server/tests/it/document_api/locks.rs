//! GET_LOCKED and UNLOCK_KEY over a real socket: what a lock lets through and what it
//! refuses, how readers see it, how it ends (unlock, a write by its holder, its timeout), and
//! the statuses older clients get instead.

use crate::common::kv_peer::{Answer, Kv};
use sluice_proto::encode::Packet;
use sluice_types::vbucket_of;
use std::time::Duration;

const VBS: u16 = 16;
const LOCKED: u16 = 0x09;
const NOT_LOCKED: u16 = 0x0e;

fn vb(key: &[u8]) -> u16 {
    vbucket_of(key, VBS).0
}

/// A connection with HELLO XERROR when `xerror` (the new statuses), without it otherwise.
async fn open(addr: std::net::SocketAddr, xerror: bool) -> Kv {
    let mut kv = Kv::open(addr).await;
    if xerror {
        let h = kv
            .call(Packet::request(0x1f, 0, 1).key(b"t").value(&[0, 0x07]))
            .await;
        assert_eq!((h.status, h.value.as_slice()), (0, &[0u8, 0x07][..]));
    }
    kv
}

async fn set(kv: &mut Kv, key: &[u8], value: &[u8], cas: u64) -> Answer {
    kv.call(
        Packet::request(0x01, vb(key), 2)
            .key(key)
            .extras(&[0; 8])
            .value(value)
            .cas(cas),
    )
    .await
}

async fn lock(kv: &mut Kv, key: &[u8], seconds: u32) -> Answer {
    kv.call(
        Packet::request(0x94, vb(key), 3)
            .key(key)
            .extras(&seconds.to_be_bytes()),
    )
    .await
}

async fn unlock(kv: &mut Kv, key: &[u8], cas: u64) -> u16 {
    kv.call(Packet::request(0x95, vb(key), 4).key(key).cas(cas))
        .await
        .status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_lets_only_its_holder_write() {
    let dir = tempfile::tempdir().unwrap();
    let c =
        crate::common::loopback_config(dir.path(), sluice_engine::BucketType::Couchbase, VBS, 64);
    let node = sluice_manager::start(c).await.unwrap();
    let mut kv = open(node.kv_addr, true).await;
    let k = b"locked-doc".as_slice();
    let stored = set(&mut kv, k, b"{\"v\":1}", 0).await;
    assert_eq!(stored.status, 0);

    let l = lock(&mut kv, k, 10).await;
    assert_eq!((l.status, l.value.as_slice()), (0, &b"{\"v\":1}"[..]));
    assert!(l.cas != stored.cas && l.cas != u64::MAX);
    // Readers see the document, with the CAS hidden.
    let g = kv.get(k, vb(k)).await;
    assert_eq!(
        (g.status, g.cas, g.value.as_slice()),
        (0, u64::MAX, &b"{\"v\":1}"[..])
    );
    // Everyone else is refused: a second lock, writes without or with another CAS, a
    // touch, a delete, an append, a sub-document mutation.
    assert_eq!(lock(&mut kv, k, 10).await.status, LOCKED);
    assert_eq!(set(&mut kv, k, b"x", 0).await.status, LOCKED);
    assert_eq!(set(&mut kv, k, b"x", stored.cas).await.status, LOCKED);
    let touch = Packet::request(0x1c, vb(k), 5)
        .key(k)
        .extras(&[0, 0, 0, 60]);
    assert_eq!(kv.call(touch).await.status, LOCKED);
    let del = Packet::request(0x04, vb(k), 6).key(k);
    assert_eq!(kv.call(del).await.status, LOCKED);
    let app = Packet::request(0x0e, vb(k), 7).key(k).value(b"!");
    assert_eq!(kv.call(app).await.status, LOCKED);
    let mut sd = b"v".to_vec();
    sd.extend_from_slice(b"2");
    let subdoc = Packet::request(0xc8, vb(k), 8)
        .key(k)
        .extras(&[0, 1, 0])
        .value(&sd);
    assert_eq!(kv.call(subdoc).await.status, LOCKED);
    // Unlock: a wrong CAS is LOCKED, the lock's CAS releases it, a second unlock NOT_LOCKED.
    assert_eq!(unlock(&mut kv, k, stored.cas).await, LOCKED);
    assert_eq!(unlock(&mut kv, k, l.cas).await, 0);
    assert_eq!(unlock(&mut kv, k, l.cas).await, NOT_LOCKED);
    assert_eq!(kv.get(k, vb(k)).await.cas, stored.cas);

    // The holder writes with the lock's CAS (a sub-document mutation here), which ends it.
    let l2 = lock(&mut kv, k, 10).await;
    let subdoc = Packet::request(0xc8, vb(k), 9)
        .key(k)
        .extras(&[0, 1, 0])
        .value(&sd)
        .cas(l2.cas);
    let w = kv.call(subdoc).await;
    assert_eq!(w.status, 0);
    let g = kv.get(k, vb(k)).await;
    assert_eq!((g.cas, g.value.as_slice()), (w.cas, &b"{\"v\":2}"[..]));
    assert_eq!(unlock(&mut kv, k, l2.cas).await, NOT_LOCKED);
    assert_eq!(set(&mut kv, k, b"free", 0).await.status, 0);

    // A lock ends by itself: 1 s (second granularity: gone within 2 s).
    let l3 = lock(&mut kv, k, 1).await;
    assert_eq!(l3.status, 0);
    assert_eq!(set(&mut kv, k, b"x", 0).await.status, LOCKED);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(set(&mut kv, k, b"after", 0).await.status, 0);

    // Missing documents; a lock without a CAS to unlock with is malformed.
    assert_eq!(lock(&mut kv, b"nope", 5).await.status, 0x01);
    assert_eq!(unlock(&mut kv, b"nope", 5).await, 0x01);
    assert_eq!(unlock(&mut kv, k, 0).await, 0x04);

    // Without XERROR: KEY_EEXISTS for LOCKED, TMPFAIL for NOT_LOCKED.
    let mut old = open(node.kv_addr, false).await;
    let l4 = lock(&mut old, k, 10).await;
    assert_eq!(set(&mut old, k, b"x", 0).await.status, 0x02);
    assert_eq!(unlock(&mut old, k, l4.cas).await, 0);
    assert_eq!(unlock(&mut old, k, l4.cas).await, 0x86);
    node.shutdown().await.unwrap();
}
