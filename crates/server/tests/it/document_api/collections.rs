//! Scopes and collections on the KV port, byte by byte: HELLO collections, LEB128 key
//! prefixes (the same key in two collections is two documents; a client without
//! collections sees the default one), COLLECTIONS_GET_ID / GET_SCOPE_ID /
//! GET_COLLECTIONS_MANIFEST, UNKNOWN_COLLECTION and UNKNOWN_SCOPE with the manifest uid, bad
//! prefixes, a collection's maxTTL, and a drop. Collections are made over the admin port's
//! REST API, as the SDKs' managers make them.

use crate::common::kv_peer::Kv;
use sluice_client::admin_http::{self, Body, Method};
use sluice_client::net::Dial;
use sluice_proto::encode::Packet;
use sluice_types::{vbucket_of, CollectionId};
use std::net::SocketAddr;
use std::time::Duration;

const VBS: u16 = 16;
const COLLECTIONS: u16 = 0x12;
const XERROR: u16 = 0x07;
const JSON: u16 = 0x0b;

/// A scopes/collections REST call on bucket `default` as the administrator; the manifest
/// uid it answers.
pub(crate) async fn rest(
    admin: SocketAddr,
    method: Method,
    path: &str,
    form: &[(&str, &str)],
) -> u64 {
    let who = sluice_client::Credentials::new("Administrator", "password");
    let body = match form.is_empty() {
        true => Body::None,
        false => Body::Form(form),
    };
    let path = format!("/pools/default/buckets/default/scopes{path}");
    let a = admin_http::send(
        &Dial::default(),
        &admin.to_string(),
        &who,
        method,
        &path,
        body,
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert!(a.ok(), "{path}: {} {}", a.status, a.body);
    u64::from_str_radix(a.body["uid"].as_str().unwrap_or("0"), 16).unwrap()
}

/// `logical` in collection `cid` (its LEB128 prefix first).
pub(crate) fn key(cid: u32, logical: &[u8]) -> Vec<u8> {
    let mut k = CollectionId(cid).prefix();
    k.extend_from_slice(logical);
    k
}

/// SET `k` in `vb` with `expiry`; the status.
async fn set(kv: &mut Kv, k: &[u8], vb: u16, value: &[u8], expiry: u32) -> u16 {
    let mut extras = [0u8; 8];
    extras[4..].copy_from_slice(&expiry.to_be_bytes());
    let p = Packet::request(0x01, vb, 1)
        .extras(&extras)
        .key(k)
        .value(value);
    kv.call(p).await.status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collections_on_the_kv_port() {
    let dir = tempfile::tempdir().unwrap();
    let c =
        crate::common::loopback_config(dir.path(), sluice_engine::BucketType::Couchbase, VBS, 64);
    let node = sluice_manager::start(c).await.unwrap();
    rest(node.admin_addr, Method::POST, "", &[("name", "s")]).await;
    rest(
        node.admin_addr,
        Method::POST,
        "/s/collections",
        &[("name", "c")],
    )
    .await;
    let uid = rest(
        node.admin_addr,
        Method::POST,
        "/s/collections",
        &[("name", "t"), ("maxTTL", "100")],
    )
    .await;

    let mut aware = Kv::open_with_features(
        node.kv_addr,
        "Administrator",
        "password",
        &[COLLECTIONS, XERROR, JSON],
    )
    .await;
    let mut plain = Kv::open(node.kv_addr).await;

    // Names → ids, with the manifest uid.
    let get_cid = aware.call(Packet::request(0xbb, 0, 2).value(b"s.c")).await;
    assert_eq!(get_cid.status, 0);
    assert_eq!(get_cid.extras.len(), 12);
    assert_eq!(
        u64::from_be_bytes(get_cid.extras[..8].try_into().unwrap()),
        uid
    );
    let cid = u32::from_be_bytes(get_cid.extras[8..].try_into().unwrap());
    assert!(cid >= 8);
    let default = aware
        .call(Packet::request(0xbb, 0, 2).value(b"_default._default"))
        .await;
    assert_eq!(
        (default.status, &default.extras[8..]),
        (0, &[0u8, 0, 0, 0][..])
    );
    let sid = aware.call(Packet::request(0xbc, 0, 2).value(b"s")).await;
    assert_eq!(sid.status, 0);
    assert_eq!(
        aware
            .call(Packet::request(0xbb, 0, 2).value(b"s.nope"))
            .await
            .status,
        0x88
    );
    let unknown_scope = aware
        .call(Packet::request(0xbb, 0, 2).value(b"nope.c"))
        .await;
    assert_eq!(unknown_scope.status, 0x8c);
    let body: serde_json::Value = serde_json::from_slice(&unknown_scope.value).unwrap();
    assert_eq!(body["manifest_uid"], format!("{uid:x}"));
    assert_eq!(
        aware
            .call(Packet::request(0xbc, 0, 2).value(b"nope"))
            .await
            .status,
        0x8c
    );
    let manifest = aware.call(Packet::request(0xba, 0, 2)).await;
    assert_eq!(manifest.status, 0);
    let m: serde_json::Value = serde_json::from_slice(&manifest.value).unwrap();
    assert_eq!(m["uid"], format!("{uid:x}"));

    // The same key in the default collection and in s.c: two documents.
    let vb = vbucket_of(b"doc", VBS).0;
    let in_c = key(cid, b"doc");
    assert_eq!(set(&mut aware, &in_c, vb, b"in c", 0).await, 0);
    assert_eq!(
        set(&mut aware, &key(0, b"doc"), vb, b"in default", 0).await,
        0
    );
    assert_eq!(aware.get(&in_c, vb).await.value, b"in c");
    assert_eq!(plain.get(b"doc", vb).await.value, b"in default");
    // GETK gives the key back as the client spelled it.
    let getk = aware.call(Packet::request(0x0c, vb, 3).key(&in_c)).await;
    assert_eq!((getk.status, getk.key.as_slice()), (0, in_c.as_slice()));
    let getk = plain.call(Packet::request(0x0c, vb, 3).key(b"doc")).await;
    assert_eq!(getk.key, b"doc");

    // Keys that name no document of the bucket.
    let unknown = aware.get(&key(cid + 100, b"doc"), vb).await;
    assert_eq!(unknown.status, 0x88);
    let body: serde_json::Value = serde_json::from_slice(&unknown.value).unwrap();
    assert_eq!(body["manifest_uid"], format!("{uid:x}"));
    assert_eq!(
        aware.get(b"\x80\x00doc", vb).await.status,
        0x04,
        "a non-canonical prefix"
    );
    assert_eq!(
        aware.get(&key(1, b"doc"), vb).await.status,
        0x88,
        "the system key space"
    );
    assert_eq!(
        plain.get(&[b'k'; 251], 0).await.status,
        0x04,
        "251 bytes without a prefix"
    );
    let long = key(0, &[b'k'; 250]);
    let long_vb = vbucket_of(&[b'k'; 250], VBS).0;
    assert_eq!(set(&mut aware, &long, long_vb, b"v", 0).await, 0);

    // maxTTL 100: a write without expiry, or a longer one, gets 100 s.
    let t = u32::from_be_bytes(
        aware
            .call(Packet::request(0xbb, 0, 2).value(b"s.t"))
            .await
            .extras[8..]
            .try_into()
            .unwrap(),
    );
    // After an edit to maxTTL 10 (PATCH), writes get 10 s; the edit bumps the uid, and the
    // session picks the new manifest up without reconnecting.
    for (max_ttl, edit) in [(100u32, false), (10, true)] {
        if edit {
            let form = [("maxTTL", "10")];
            let edited = rest(node.admin_addr, Method::PATCH, "/s/collections/t", &form).await;
            assert!(edited > uid);
        }
        for asked in [0u32, 5000] {
            let k = key(t, b"ttl");
            assert_eq!(set(&mut aware, &k, vb, b"v", asked).await, 0);
            let meta = aware.call(Packet::request(0xa0, vb, 4).key(&k)).await;
            assert_eq!(meta.status, 0);
            let expiry = u32::from_be_bytes(meta.extras[8..12].try_into().unwrap());
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs() as u32;
            assert!(
                expiry > now + max_ttl - 10 && expiry <= now + max_ttl + 1,
                "expiry {expiry} asked {asked} under maxTTL {max_ttl}"
            );
        }
    }

    // STAT collections: each collection's documents and the memory they take.
    let stats = plain.stats(b"collections").await;
    let scope_id = u32::from_be_bytes(sid.extras[8..].try_into().unwrap());
    let stat = |k: &str| -> u64 {
        stats
            .get(&format!("{scope_id:#x}:{cid:#x}:{k}"))
            .unwrap_or_else(|| panic!("{k} in {stats:?}"))
            .parse()
            .unwrap()
    };
    assert!(stat("items") >= 1, "{stats:?}");
    assert!(stat("mem_used") > 0, "{stats:?}");

    // A drop: the collection's keys are refused at once, the default one's stay.
    rest(node.admin_addr, Method::DELETE, "/s/collections/c", &[]).await;
    assert_eq!(aware.get(&in_c, vb).await.status, 0x88);
    assert_eq!(plain.get(b"doc", vb).await.value, b"in default");
    let handle = node.node.buckets.get("default").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !handle.engine.collection_sweep_done() {
        assert!(std::time::Instant::now() < deadline, "the sweep of c");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let counts = handle.engine.collection_items();
    assert_eq!(counts.get(&CollectionId(cid)), None, "{counts:?}");
    assert_eq!(counts.get(&CollectionId(t)), Some(&1));
}
