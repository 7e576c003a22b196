//! Typed operations against a real memcached over the plain binary protocol (no HELLO, no
//! auth, vbucket 0).
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::memcached::Memcached;
use sluice_client::{Client, ConnectOptions, Opcode, Packet, Status, StoreOptions};
use sluice_types::{Cas, VbId};

async fn connect(mc: &Memcached) -> Client {
    let client = Client::connect(mc.addr, ConnectOptions::plain())
        .await
        .unwrap();
    assert_eq!(client.num_vbuckets(), None);
    assert_eq!(client.vbucket_of(b"anything"), VbId(0));
    client
}

#[tokio::test]
async fn set_get_delete_roundtrip() {
    let mc = Memcached::start();
    let mut c = connect(&mc).await;
    let opts = StoreOptions {
        flags: 0xdead_beef,
        ..StoreOptions::default()
    };
    let stored = c.set(b"k1", b"hello", opts).await.unwrap();
    assert_ne!(stored.cas, Cas::ZERO);
    assert_eq!(stored.token, None, "memcached sends no mutation tokens");
    let got = c.get(b"k1").await.unwrap();
    assert_eq!(
        (&got.value[..], got.flags, got.cas),
        (&b"hello"[..], 0xdead_beef, stored.cas)
    );
    c.delete(b"k1", Cas::ZERO).await.unwrap();
    let miss = c.get(b"k1").await.unwrap_err();
    assert!(miss.is_not_found(), "{miss}");
}

#[tokio::test]
async fn add_replace_and_cas_follow_memcached_rules() {
    let mc = Memcached::start();
    let mut c = connect(&mc).await;
    let none = StoreOptions::default();
    let missing = c.replace(b"k", b"v", none).await.unwrap_err();
    assert_eq!(missing.status(), Some(Status::KeyEnoent));
    let first = c.add(b"k", b"v1", none).await.unwrap();
    let again = c.add(b"k", b"v2", none).await.unwrap_err();
    assert!(matches!(
        again.status(),
        Some(Status::KeyEexists) | Some(Status::NotStored)
    ));
    let stale = StoreOptions {
        cas: Cas(first.cas.0 + 1),
        ..none
    };
    let mismatch = c.set(b"k", b"v3", stale).await.unwrap_err();
    assert_eq!(mismatch.status(), Some(Status::KeyEexists));
    let exact = StoreOptions {
        cas: first.cas,
        ..none
    };
    c.replace(b"k", b"v4", exact).await.unwrap();
    assert_eq!(&c.get(b"k").await.unwrap().value[..], b"v4");
}

#[tokio::test]
async fn counters_create_increment_and_stop_at_zero() {
    let mc = Memcached::start();
    let mut c = connect(&mc).await;
    let no_create = c.incr(b"ctr", 1, None, 0).await.unwrap_err();
    assert!(no_create.is_not_found(), "{no_create}");
    assert_eq!(c.incr(b"ctr", 5, Some(10), 0).await.unwrap().0, 10);
    assert_eq!(c.incr(b"ctr", 5, Some(10), 0).await.unwrap().0, 15);
    assert_eq!(c.decr(b"ctr", 100, None, 0).await.unwrap().0, 0);
}

#[tokio::test]
async fn noop_stats_and_pipelined_requests() {
    let mc = Memcached::start();
    let mut c = connect(&mc).await;
    c.noop().await.unwrap();
    let stats = c.stats("").await.unwrap();
    assert!(stats.iter().any(|(k, _)| k == "pid"), "{stats:?}");

    // 32 sets in flight on one connection, answered in order.
    let extras = [0u8; 8];
    let mut opaques = Vec::new();
    for i in 0..32u32 {
        let key = format!("p{i}");
        let req = Packet::request(Opcode::Set.byte(), 0, 0)
            .extras(&extras)
            .key(key.as_bytes())
            .value(b"x");
        opaques.push(c.queue_request(req));
    }
    c.flush().await.unwrap();
    assert_eq!(c.in_flight(), 32);
    for opaque in opaques {
        let resp = c.read_response().await.unwrap();
        assert_eq!(
            (resp.opaque, resp.status().unwrap()),
            (opaque, Status::Success)
        );
    }
    assert_eq!(c.in_flight(), 0);
    assert_eq!(&c.get(b"p31").await.unwrap().value[..], b"x");
}
