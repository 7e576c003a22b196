//! GET_RANDOM_KEY over a real socket: KEY_ENOENT on an empty bucket, then live documents
//! only, with their key, flags and value, spread over the bucket.

use crate::common::kv_peer::Kv;
use sluice_proto::encode::Packet;
use sluice_types::vbucket_of;
use std::collections::{HashMap, HashSet};

const VBS: u16 = 16;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_keys_are_live_documents() {
    let dir = tempfile::tempdir().unwrap();
    let c =
        crate::common::loopback_config(dir.path(), sluice_engine::BucketType::Ephemeral, VBS, 64);
    let node = sluice_manager::start(c).await.unwrap();
    let mut kv = Kv::open(node.kv_addr).await;
    let random = Packet::request(0xb6, 0, 7);
    assert_eq!(kv.call(random).await.status, 0x01, "empty bucket");

    let mut docs = HashMap::new();
    for i in 0..40u32 {
        let key = format!("doc-{i}").into_bytes();
        let value = format!("{{\"i\":{i}}}").into_bytes();
        let mut extras = [0u8; 8];
        extras[..4].copy_from_slice(&(0x0200_0000 + i).to_be_bytes());
        let vb = vbucket_of(&key, VBS).0;
        let set = Packet::request(0x01, vb, 1)
            .key(&key)
            .extras(&extras)
            .value(&value);
        assert_eq!(kv.call(set).await.status, 0);
        docs.insert(key, value);
    }
    // Deleted documents are never picked.
    for i in 0..20u32 {
        let key = format!("doc-{i}").into_bytes();
        let vb = vbucket_of(&key, VBS).0;
        assert_eq!(
            kv.call(Packet::request(0x04, vb, 2).key(&key)).await.status,
            0
        );
        docs.remove(&key);
    }
    let mut seen = HashSet::new();
    for _ in 0..100 {
        let a = kv.call(random).await;
        assert_eq!(a.status, 0);
        assert_eq!(
            docs.get(&a.key),
            Some(&a.value),
            "{:?}",
            String::from_utf8_lossy(&a.key)
        );
        let i: u32 = String::from_utf8_lossy(&a.key[4..]).parse().unwrap();
        assert_eq!(
            a.extras,
            (0x0200_0000 + i).to_be_bytes(),
            "the document's flags"
        );
        seen.insert(a.key);
    }
    assert!(
        seen.len() >= 5,
        "100 picks found only {} documents",
        seen.len()
    );
    node.shutdown().await.unwrap();
}
