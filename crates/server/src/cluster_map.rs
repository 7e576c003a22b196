//! The cluster map (CCCP "terse bucket config") SDKs bootstrap and route with.
//!
//! What the three SDK parsers need (see design/clients.md §5): `rev` ≥ 1, the literal
//! `"nodeLocator":"vbucket"`, a `nodes` entry per KV node, `nodesExt[].services` with `kv`
//! and `mgmt`, and a non-empty `vBucketMap` whose length defines the number of vbuckets.
//! A single node holds every vbucket as active, with no replicas.

use crate::node::Node;
use serde_json::json;
use sluice_engine::BucketType;

/// Map revision. A single node's map never changes while it runs.
pub const REV: i64 = 1;
pub const REV_EPOCH: i64 = 1;

fn node_ext(node: &Node) -> serde_json::Value {
    json!({
        "services": {"kv": node.kv_port(), "mgmt": node.admin_port()},
        "thisNode": true,
        "hostname": node.config.advertise_host,
    })
}

pub fn bucket_config(node: &Node) -> Vec<u8> {
    let cfg = &node.config;
    let host = &cfg.advertise_host;
    let durable = cfg.bucket_type == BucketType::Couchbase;
    let mut caps = vec!["dcp", "cbhello", "touch", "cccp", "nodesExt", "xattr"];
    if durable {
        caps.push("couchapi");
    }
    caps.push("durableWrite");
    let vbmap: Vec<[i32; 1]> = vec![[0]; usize::from(cfg.vbuckets)];
    let doc = json!({
        "rev": REV,
        "revEpoch": REV_EPOCH,
        "name": cfg.bucket,
        "uuid": node.bucket_uuid,
        "bucketType": if durable { "membase" } else { "ephemeral" },
        "nodeLocator": "vbucket",
        "uri": format!("/pools/default/buckets/{}?bucket_uuid={}", cfg.bucket, node.bucket_uuid),
        "streamingUri": format!("/pools/default/bucketsStreaming/{}?bucket_uuid={}", cfg.bucket, node.bucket_uuid),
        "bucketCapabilitiesVer": "",
        "bucketCapabilities": caps,
        "collectionsManifestUid": "0",
        "ddocs": {"uri": format!("/pools/default/buckets/{}/ddocs", cfg.bucket)},
        "nodes": [{
            "couchApiBase": format!("http://{host}:{}/{}", node.admin_port(), cfg.bucket),
            "hostname": format!("{host}:{}", node.admin_port()),
            "ports": {"direct": node.kv_port()},
        }],
        "nodesExt": [node_ext(node)],
        "clusterCapabilitiesVer": [1, 0],
        "clusterCapabilities": {},
        "vBucketServerMap": {
            "hashAlgorithm": "CRC",
            "numReplicas": 0,
            "serverList": [format!("{host}:{}", node.kv_port())],
            "vBucketMap": vbmap,
        },
    });
    serde_json::to_vec(&doc).expect("a JSON value serialises")
}

pub fn global_config(node: &Node) -> Vec<u8> {
    let doc = json!({
        "rev": REV,
        "revEpoch": REV_EPOCH,
        "nodesExt": [node_ext(node)],
        "clusterCapabilitiesVer": [1, 0],
        "clusterCapabilities": {},
    });
    serde_json::to_vec(&doc).expect("a JSON value serialises")
}
