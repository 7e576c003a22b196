//! The terse cluster config (CCCP JSON) as it travels: the one model the cluster writes
//! (GET_CLUSTER_CONFIG, NOT_MY_VBUCKET bodies, map pushes, `/pools/default/b/BUCKET`) and the
//! client reads. Fields follow Couchbase's spelling (design/clients.md §1.4 and §5).
//!
//! Every field is optional here, so that a config from another server (older, or without
//! `nodesExt`) still parses; what a reader requires, and the rules a map must keep, are the
//! reader's to check (the client's `ClusterView::parse`). A writer sets what it serves; a
//! field left `None` is not written.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A terse bucket config, or (no bucket fields, no `vBucketServerMap`) the bucketless one a
/// session gets before it selects a bucket.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TerseConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rev: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rev_epoch: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// `membase` (a couchbase bucket) or `ephemeral`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bucket_type: Option<String>,
    /// Always `vbucket` for the buckets this model describes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_locator: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streaming_uri: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bucket_capabilities_ver: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bucket_capabilities: Option<Vec<String>>,
    /// The collections manifest uid the bucket serves, lower-case hex.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collections_manifest_uid: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ddocs: Option<Ddocs>,
    /// The pre-`nodesExt` node list some clients still read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<LegacyNode>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes_ext: Option<Vec<NodeExt>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_capabilities_ver: Option<Vec<u32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_capabilities: Option<BTreeMap<String, Vec<String>>>,
    #[serde(rename = "vBucketServerMap", skip_serializing_if = "Option::is_none")]
    pub vbucket_server_map: Option<VbucketServerMap>,
}

/// `ddocs`: where a bucket's design documents would be listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ddocs {
    pub uri: String,
}

/// One entry of `nodes`, the list that predates `nodesExt`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LegacyNode {
    #[serde(default)]
    pub couch_api_base: String,
    /// `host:admin port`.
    pub hostname: String,
    pub ports: LegacyPorts,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LegacyPorts {
    /// The KV port.
    pub direct: u16,
}

/// One entry of `nodesExt`: a node's host and the port of each service it runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeExt {
    /// Absent (or empty) in a config from a node that means "the host you asked".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// By service name (`kv`, `mgmt`, `kvSSL`, `mgmtSSL`, …). Signed, as read: a reader
    /// checks that each is a port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub services: Option<BTreeMap<String, i64>>,
    /// The node that served this config.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub this_node: bool,
}

/// The service names of `nodesExt[].services` this project writes or reads.
pub mod service {
    pub const KV: &str = "kv";
    pub const MGMT: &str = "mgmt";
    pub const KV_TLS: &str = "kvSSL";
    pub const MGMT_TLS: &str = "mgmtSSL";
    /// The query service (Sluice serves it on the admin port).
    pub const QUERY: &str = "n1ql";
    pub const QUERY_TLS: &str = "n1qlSSL";
}

/// `vBucketServerMap`: the KV nodes and one row of node indices per vbucket.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VbucketServerMap {
    /// Always `CRC`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hash_algorithm: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_replicas: Option<i64>,
    /// `host:kv port` of each node, in the order the rows index them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_list: Option<Vec<String>>,
    /// `[active, replica 1, …]` per vbucket, `-1` for an empty slot.
    #[serde(rename = "vBucketMap", skip_serializing_if = "Option::is_none")]
    pub vbucket_map: Option<Vec<Vec<i64>>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_from_elsewhere_parses_with_what_it_has() {
        let json = br#"{"rev":7,"vBucketServerMap":{"numReplicas":0,"vBucketMap":[[0]],
            "serverList":["h:11210"]},"nodesExt":[{"services":{"kv":11210}}],"extra":1}"#;
        let c: TerseConfig = serde_json::from_slice(json).unwrap();
        assert_eq!(c.rev, Some(7));
        assert_eq!(c.rev_epoch, None);
        let ext = &c.nodes_ext.as_ref().unwrap()[0];
        assert_eq!(ext.hostname, None);
        assert!(!ext.this_node);
        assert_eq!(
            c.vbucket_server_map.unwrap().vbucket_map,
            Some(vec![vec![0]])
        );
    }

    #[test]
    fn only_what_is_set_is_written_in_couchbases_spelling() {
        let c = TerseConfig {
            rev: Some(3),
            rev_epoch: Some(1),
            nodes_ext: Some(vec![NodeExt {
                hostname: Some("h".into()),
                services: Some([(service::KV.to_string(), 11210)].into()),
                this_node: true,
            }]),
            vbucket_server_map: Some(VbucketServerMap {
                vbucket_map: Some(vec![vec![0, -1]]),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"rev":3,"revEpoch":1,"nodesExt":[{"hostname":"h","services":{"kv":11210},"thisNode":true}],"vBucketServerMap":{"vBucketMap":[[0,-1]]}}"#
        );
    }
}
