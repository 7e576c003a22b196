//! The cluster map clients route with: a revision, the nodes with their addresses, and the
//! vbucket map; rendered as the CCCP "terse bucket config" (clients.md §1.4 and §5).
//!
//! The JSON is the single-node document `server/src/cluster_map.rs` serves today, generalised
//! to N nodes: same fields, same capabilities in the same order, `rev` and `revEpoch`. Per node:
//! - `nodes[i]` and `nodesExt[i]` describe node `i` of the map's node list, and
//!   `serverList[i]` is its `host:kv_port`;
//! - every `nodesExt` entry carries an explicit `hostname` (SDKs use the bootstrap host for
//!   an entry without one, which is wrong for every node but the one they dialled), and only
//!   the node serving the request says `thisNode: true`;
//! - `vBucketMap[vb]` is `[active, replica 1, ...]` as indices into that list, -1 for an empty
//!   slot, with one entry per configured replica (`numReplicas`), filled or not.
//!
//! Clients ignore a map whose revision is not newer than the one they hold, so every change
//! must go through `next`/`with_vbmap`, which bump it.
//!
//! A `ClusterMap` also serializes (serde) for the replicated metadata: `{rev, nodes, vbmap}`.
//! That form is Sluice's own, not the terse config; deserializing it runs the same checks as
//! `new` and refuses revision 0.

use crate::limits::NODES_MAX;
use crate::node::{NodeId, NodeInfo};
use crate::services::Service;
use crate::vbmap::VbMap;
use serde::{Deserialize, Serialize};
use sluice_types::cccp::{
    service, Ddocs, LegacyNode, LegacyPorts, NodeExt, TerseConfig, VbucketServerMap,
};
use sluice_types::VbId;
use std::collections::{BTreeMap, BTreeSet};

/// A map revision: starts at 1 (SDKs ignore revision 0) and only grows. Serialized as the
/// bare number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Rev(pub u64);

impl Rev {
    pub const FIRST: Rev = Rev(1);

    /// The revision after this one. A u64 of map changes never runs out; overflow is a bug.
    pub fn next(self) -> Rev {
        Rev(self.0.checked_add(1).expect("map revision overflow"))
    }
}

/// The revision epoch. It would change only if the map's history restarted (revisions are
/// compared within one epoch); Sluice's replicated metadata keeps one history, so it is fixed.
pub const REV_EPOCH: u64 = 1;

/// The kind of bucket, as far as the map shows it. Serialized as `"couchbase"` or
/// `"ephemeral"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BucketKind {
    /// Persisted; `bucketType: "membase"`, with the `couchapi` capability.
    Couchbase,
    /// Memory only; `bucketType: "ephemeral"`.
    Ephemeral,
}

/// The bucket a map is rendered for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketInfo<'a> {
    pub name: &'a str,
    pub uuid: &'a str,
    pub kind: BucketKind,
}

/// The node answering the request: its `nodesExt` entry says `thisNode: true`. Matched by
/// host and KV port, as the SDKs match it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServingNode<'a> {
    pub host: &'a str,
    pub kv_port: u16,
    pub admin_port: u16,
    /// What it runs: shown when the map does not list it yet.
    pub services: crate::services::Services,
}

/// A cluster map that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum ClusterMapError {
    #[error("a cluster map needs at least one node")]
    NoNodes,
    #[error("{count} nodes is more than the {max} a map may list")]
    TooManyNodes { count: usize, max: usize },
    #[error("node {0} is listed twice")]
    DuplicateNode(NodeId),
    #[error("{host}:{kv_port} is listed for two nodes; clients could not tell them apart")]
    DuplicateAddress { host: String, kv_port: u16 },
    #[error("{vb} has a copy on {node}, which the map does not list")]
    UnknownNode { vb: VbId, node: NodeId },
    #[error("{vb} has a copy on {node}, which does not run the kv (data) service")]
    NotData { vb: VbId, node: NodeId },
    #[error("revision 0 is not a map revision; they start at 1")]
    ZeroRev,
}

/// A revision of the nodes and the vbucket map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "ClusterMapRepr", try_from = "ClusterMapRepr")]
pub struct ClusterMap {
    rev: Rev,
    /// In the order clients index them (`serverList`, `vBucketMap`).
    nodes: Vec<NodeInfo>,
    vbmap: VbMap,
}

/// What a bucket of `kind` offers, as the SDKs read it from the bucket's description:
/// - `collections`: the collection managers check for it;
/// - `tombstonedUserXAttrs` (create-as-deleted), `subdoc.ReviveDocument`,
///   `subdoc.AccessDeleted` and `subdoc.ReplaceBodyWithXattr`: transactions stage inserts in
///   tombstones and commit them with these;
/// - `subdoc.ReplicaRead`: sub-document lookups on replicas.
pub fn bucket_capabilities(kind: BucketKind) -> Vec<&'static str> {
    let mut caps = vec!["dcp", "cbhello", "touch", "cccp", "nodesExt", "xattr"];
    if kind == BucketKind::Couchbase {
        caps.push("couchapi");
    }
    caps.extend([
        "durableWrite",
        "collections",
        "tombstonedUserXAttrs",
        "subdoc.ReviveDocument",
        "subdoc.AccessDeleted",
        "subdoc.ReplaceBodyWithXattr",
        "subdoc.ReplicaRead",
    ]);
    caps
}

impl ClusterMap {
    /// The first revision of a cluster's map.
    pub fn new(nodes: Vec<NodeInfo>, vbmap: VbMap) -> Result<ClusterMap, ClusterMapError> {
        check(&nodes, &vbmap)?;
        Ok(ClusterMap {
            rev: Rev::FIRST,
            nodes,
            vbmap,
        })
    }

    /// The next revision, with new nodes and map.
    pub fn next(&self, nodes: Vec<NodeInfo>, vbmap: VbMap) -> Result<ClusterMap, ClusterMapError> {
        check(&nodes, &vbmap)?;
        Ok(ClusterMap {
            rev: self.rev.next(),
            nodes,
            vbmap,
        })
    }

    /// The next revision with the same nodes: a rebalance step or a failover.
    pub fn with_vbmap(&self, vbmap: VbMap) -> Result<ClusterMap, ClusterMapError> {
        self.next(self.nodes.clone(), vbmap)
    }

    pub fn rev(&self) -> Rev {
        self.rev
    }

    pub fn nodes(&self) -> &[NodeInfo] {
        &self.nodes
    }

    /// Configured replicas per vbucket (`numReplicas`), filled or not.
    pub fn replicas(&self) -> u8 {
        self.vbmap.replicas()
    }

    pub fn vbmap(&self) -> &VbMap {
        &self.vbmap
    }

    /// The terse bucket config a client gets from GET_CLUSTER_CONFIG or NOT_MY_VBUCKET, for a
    /// bucket with the default collections manifest (uid 0).
    pub fn terse_bucket_config(
        &self,
        bucket: &BucketInfo<'_>,
        serving: &ServingNode<'_>,
    ) -> TerseConfig {
        self.terse_bucket_config_with_manifest(bucket, serving, 0)
    }

    /// The terse bucket config of a bucket whose collections manifest is at `manifest_uid`
    /// (`collectionsManifestUid`, lower-case hex as Couchbase writes it). The SDKs compare it
    /// with the manifest they hold; a map revision is what makes them read the config again.
    pub fn terse_bucket_config_with_manifest(
        &self,
        bucket: &BucketInfo<'_>,
        serving: &ServingNode<'_>,
        manifest_uid: u64,
    ) -> TerseConfig {
        let name = bucket.name;
        let uuid = bucket.uuid;
        let nodes = self
            .data_nodes()
            .map(|n| LegacyNode {
                couch_api_base: format!("http://{}:{}/{name}", n.host, n.admin_port),
                hostname: format!("{}:{}", n.host, n.admin_port),
                ports: LegacyPorts { direct: n.kv_port },
            })
            .collect();
        let server_list = self
            .data_nodes()
            .map(|n| format!("{}:{}", n.host, n.kv_port))
            .collect();
        let kind = match bucket.kind {
            BucketKind::Couchbase => "membase",
            BucketKind::Ephemeral => "ephemeral",
        };
        TerseConfig {
            name: Some(name.to_string()),
            uuid: Some(uuid.to_string()),
            bucket_type: Some(kind.to_string()),
            node_locator: Some("vbucket".to_string()),
            uri: Some(format!("/pools/default/buckets/{name}?bucket_uuid={uuid}")),
            streaming_uri: Some(format!(
                "/pools/default/bucketsStreaming/{name}?bucket_uuid={uuid}"
            )),
            bucket_capabilities_ver: Some(String::new()),
            bucket_capabilities: Some(
                bucket_capabilities(bucket.kind)
                    .into_iter()
                    .map(String::from)
                    .collect(),
            ),
            collections_manifest_uid: Some(format!("{manifest_uid:x}")),
            ddocs: Some(Ddocs {
                uri: format!("/pools/default/buckets/{name}/ddocs"),
            }),
            nodes: Some(nodes),
            vbucket_server_map: Some(VbucketServerMap {
                hash_algorithm: Some("CRC".to_string()),
                num_replicas: Some(i64::from(self.replicas())),
                server_list: Some(server_list),
                vbucket_map: Some(self.vbucket_rows()),
            }),
            ..self.terse_global_config(serving)
        }
    }

    /// The terse config for a session with no bucket selected.
    pub fn terse_global_config(&self, serving: &ServingNode<'_>) -> TerseConfig {
        let rev = i64::try_from(self.rev.0).expect("a map revision fits an i64");
        TerseConfig {
            rev: Some(rev),
            rev_epoch: Some(i64::try_from(REV_EPOCH).expect("the epoch fits an i64")),
            nodes_ext: Some(self.nodes_ext(serving)),
            cluster_capabilities_ver: Some(vec![1, 0]),
            // The query service keeps prepared statements by name and runs PREPARE with
            // `auto_execute`: the SDKs then prepare in one round trip (`adhoc = false`).
            cluster_capabilities: Some(
                [(
                    service::QUERY.to_string(),
                    vec!["enhancedPreparedStatements".to_string()],
                )]
                .into(),
            ),
            ..TerseConfig::default()
        }
    }

    /// The nodes running the data service, in map order: what `serverList` lists and
    /// `vBucketMap` indexes.
    fn data_nodes(&self) -> impl Iterator<Item = &NodeInfo> {
        self.nodes.iter().filter(|n| n.runs(Service::Kv))
    }

    fn nodes_ext(&self, serving: &ServingNode<'_>) -> Vec<NodeExt> {
        // Each node lists the services it runs, at the ports it serves them on: the query
        // service answers on the admin port, and a query node without a copy of an index
        // scans a holder's. Data nodes come first, in `serverList`'s order (some clients
        // index both lists alike), then the others.
        let entry = |n: &NodeInfo| {
            let tls = n.tls;
            let mut services = BTreeMap::new();
            if n.runs(Service::Kv) {
                services.insert(service::KV.to_string(), i64::from(n.kv_port));
                if let Some(t) = tls {
                    services.insert(service::KV_TLS.to_string(), i64::from(t.kv));
                }
            }
            services.insert(service::MGMT.to_string(), i64::from(n.admin_port));
            if let Some(t) = tls {
                services.insert(service::MGMT_TLS.to_string(), i64::from(t.admin));
            }
            if n.runs(Service::Query) {
                services.insert(service::QUERY.to_string(), i64::from(n.admin_port));
                if let Some(t) = tls {
                    services.insert(service::QUERY_TLS.to_string(), i64::from(t.admin));
                }
            }
            NodeExt {
                hostname: Some(n.host.clone()),
                services: Some(services),
                this_node: n.host == serving.host && n.kv_port == serving.kv_port,
            }
        };
        let others = self.nodes.iter().filter(|n| !n.runs(Service::Kv));
        let mut nodes: Vec<NodeExt> = self.data_nodes().chain(others).map(entry).collect();
        // A node the map does not list yet (joined, not rebalanced in) still answers for
        // the bucket: it lists itself, serving no vbucket. SDKs look for the entry marked
        // `thisNode` in every config they are sent (the C++ SDK aborts without one).
        if !nodes.iter().any(|n| n.this_node) {
            let me = NodeInfo {
                id: NodeId(u32::MAX),
                host: serving.host.to_string(),
                kv_port: serving.kv_port,
                admin_port: serving.admin_port,
                tls: None,
                services: serving.services,
            };
            nodes.push(entry(&me));
        }
        nodes
    }

    fn vbucket_rows(&self) -> Vec<Vec<i64>> {
        let index = |slot: Option<NodeId>| -> i64 {
            slot.map_or(-1, |id| {
                let i = self
                    .data_nodes()
                    .position(|n| n.id == id)
                    .expect("checked: every node of the vbucket map is listed");
                i64::try_from(i).expect("at most NODES_MAX nodes")
            })
        };
        self.vbmap
            .iter()
            .map(|(_, c)| {
                std::iter::once(c.active)
                    .chain(c.replicas.iter().copied())
                    .map(index)
                    .collect()
            })
            .collect()
    }
}

/// `ClusterMap` as serialized: the same fields, unchecked until `try_from` checks them.
#[derive(Serialize, Deserialize)]
struct ClusterMapRepr {
    rev: Rev,
    nodes: Vec<NodeInfo>,
    vbmap: VbMap,
}

impl From<ClusterMap> for ClusterMapRepr {
    fn from(map: ClusterMap) -> Self {
        ClusterMapRepr {
            rev: map.rev,
            nodes: map.nodes,
            vbmap: map.vbmap,
        }
    }
}

impl TryFrom<ClusterMapRepr> for ClusterMap {
    type Error = ClusterMapError;

    fn try_from(repr: ClusterMapRepr) -> Result<ClusterMap, ClusterMapError> {
        if repr.rev.0 == 0 {
            return Err(ClusterMapError::ZeroRev);
        }
        check(&repr.nodes, &repr.vbmap)?;
        Ok(ClusterMap {
            rev: repr.rev,
            nodes: repr.nodes,
            vbmap: repr.vbmap,
        })
    }
}

fn check(nodes: &[NodeInfo], vbmap: &VbMap) -> Result<(), ClusterMapError> {
    if nodes.is_empty() {
        return Err(ClusterMapError::NoNodes);
    }
    if nodes.len() > NODES_MAX {
        return Err(ClusterMapError::TooManyNodes {
            count: nodes.len(),
            max: NODES_MAX,
        });
    }
    let mut ids = BTreeMap::new();
    let mut addresses = BTreeSet::new();
    for n in nodes {
        if ids.insert(n.id, n).is_some() {
            return Err(ClusterMapError::DuplicateNode(n.id));
        }
        if !addresses.insert((n.host.as_str(), n.kv_port)) {
            return Err(ClusterMapError::DuplicateAddress {
                host: n.host.clone(),
                kv_port: n.kv_port,
            });
        }
    }
    for (vb, chain) in vbmap.iter() {
        for node in chain.nodes() {
            match ids.get(&node) {
                None => return Err(ClusterMapError::UnknownNode { vb, node }),
                Some(n) if !n.runs(Service::Kv) => {
                    return Err(ClusterMapError::NotData { vb, node })
                }
                Some(_) => {}
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vbmap::Chain;
    use serde_json::{json, Value};

    /// The config as its JSON document, to compare with what clients are sent.
    fn to_json(config: TerseConfig) -> Value {
        serde_json::to_value(config).unwrap()
    }

    fn node(id: u32, host: &str, kv_port: u16, admin_port: u16) -> NodeInfo {
        NodeInfo {
            id: NodeId(id),
            host: host.to_string(),
            kv_port,
            admin_port,
            tls: None,
            services: crate::Services::ALL,
        }
    }

    fn one_node_map(vbuckets: usize) -> ClusterMap {
        let vbmap = VbMap::new(0, vec![Chain::new(Some(NodeId(0)), vec![]); vbuckets]).unwrap();
        ClusterMap::new(vec![node(0, "127.0.0.1", 12000, 8091)], vbmap).unwrap()
    }

    /// What `server/src/cluster_map.rs` renders for one node today, written out by hand.
    #[test]
    fn one_node_renders_as_the_server_does_today() {
        let map = one_node_map(4);
        let bucket = BucketInfo {
            name: "default",
            uuid: "0f1e",
            kind: BucketKind::Couchbase,
        };
        let serving = ServingNode {
            host: "127.0.0.1",
            kv_port: 12000,
            admin_port: 8091,
            services: crate::Services::ALL,
        };
        let expected = json!({
            "rev": 1,
            "revEpoch": 1,
            "name": "default",
            "uuid": "0f1e",
            "bucketType": "membase",
            "nodeLocator": "vbucket",
            "uri": "/pools/default/buckets/default?bucket_uuid=0f1e",
            "streamingUri": "/pools/default/bucketsStreaming/default?bucket_uuid=0f1e",
            "bucketCapabilitiesVer": "",
            "bucketCapabilities": ["dcp", "cbhello", "touch", "cccp", "nodesExt", "xattr", "couchapi", "durableWrite", "collections", "tombstonedUserXAttrs", "subdoc.ReviveDocument", "subdoc.AccessDeleted", "subdoc.ReplaceBodyWithXattr", "subdoc.ReplicaRead"],
            "collectionsManifestUid": "0",
            "ddocs": {"uri": "/pools/default/buckets/default/ddocs"},
            "nodes": [{
                "couchApiBase": "http://127.0.0.1:8091/default",
                "hostname": "127.0.0.1:8091",
                "ports": {"direct": 12000},
            }],
            "nodesExt": [{
                "services": {"kv": 12000, "mgmt": 8091, "n1ql": 8091},
                "thisNode": true,
                "hostname": "127.0.0.1",
            }],
            "clusterCapabilitiesVer": [1, 0],
            "clusterCapabilities": {"n1ql": ["enhancedPreparedStatements"]},
            "vBucketServerMap": {
                "hashAlgorithm": "CRC",
                "numReplicas": 0,
                "serverList": ["127.0.0.1:12000"],
                "vBucketMap": [[0], [0], [0], [0]],
            },
        });
        assert_eq!(
            to_json(map.terse_bucket_config(&bucket, &serving)),
            expected
        );
        let global = json!({
            "rev": 1,
            "revEpoch": 1,
            "nodesExt": expected["nodesExt"],
            "clusterCapabilitiesVer": [1, 0],
            "clusterCapabilities": {"n1ql": ["enhancedPreparedStatements"]},
        });
        assert_eq!(to_json(map.terse_global_config(&serving)), global);
    }

    #[test]
    fn the_collections_manifest_uid_is_lower_case_hex() {
        let map = one_node_map(1);
        let bucket = BucketInfo {
            name: "b",
            uuid: "u",
            kind: BucketKind::Couchbase,
        };
        let serving = ServingNode {
            host: "127.0.0.1",
            kv_port: 12000,
            admin_port: 8091,
            services: crate::Services::ALL,
        };
        let uid = |doc: Value| doc["collectionsManifestUid"].clone();
        assert_eq!(
            uid(to_json(map.terse_bucket_config(&bucket, &serving))),
            "0"
        );
        let with = |m| to_json(map.terse_bucket_config_with_manifest(&bucket, &serving, m));
        assert_eq!(uid(with(0x1f)), "1f");
        assert_eq!(uid(with(u64::MAX)), "ffffffffffffffff");
    }

    #[test]
    fn ephemeral_buckets_drop_couchapi() {
        let map = one_node_map(1);
        let bucket = BucketInfo {
            name: "e",
            uuid: "u",
            kind: BucketKind::Ephemeral,
        };
        let serving = ServingNode {
            host: "elsewhere",
            kv_port: 1,
            admin_port: 8091,
            services: crate::Services::ALL,
        };
        let doc = to_json(map.terse_bucket_config(&bucket, &serving));
        assert_eq!(doc["bucketType"], "ephemeral");
        assert_eq!(
            doc["bucketCapabilities"],
            json!([
                "dcp",
                "cbhello",
                "touch",
                "cccp",
                "nodesExt",
                "xattr",
                "durableWrite",
                "collections",
                "tombstonedUserXAttrs",
                "subdoc.ReviveDocument",
                "subdoc.AccessDeleted",
                "subdoc.ReplaceBodyWithXattr",
                "subdoc.ReplicaRead"
            ])
        );
        // The serving node is not in the map: it lists itself after the map's nodes.
        assert!(doc["nodesExt"][0].get("thisNode").is_none());
        assert_eq!(
            doc["nodesExt"][1],
            json!({"services": {"kv": 1, "mgmt": 8091, "n1ql": 8091}, "hostname": "elsewhere", "thisNode": true})
        );
    }

    #[test]
    fn tls_ports_are_listed_as_kv_ssl_and_mgmt_ssl() {
        let vbmap = VbMap::new(0, vec![Chain::new(Some(NodeId(0)), vec![])]).unwrap();
        let mut tls = node(0, "a", 11210, 8091);
        tls.tls = Some(crate::TlsPorts {
            kv: 11207,
            admin: 18091,
        });
        let map = ClusterMap::new(vec![tls, node(1, "b", 11210, 8091)], vbmap).unwrap();
        let bucket = BucketInfo {
            name: "b",
            uuid: "u",
            kind: BucketKind::Couchbase,
        };
        let serving = ServingNode {
            host: "a",
            kv_port: 11210,
            admin_port: 8091,
            services: crate::Services::ALL,
        };
        let doc = to_json(map.terse_bucket_config(&bucket, &serving));
        assert_eq!(
            doc["nodesExt"][0]["services"],
            json!({"kv": 11210, "mgmt": 8091, "kvSSL": 11207, "mgmtSSL": 18091,
                "n1ql": 8091, "n1qlSSL": 18091})
        );
        // A node without TLS lists only its cleartext ports. Every node lists the query
        // service.
        assert_eq!(
            doc["nodesExt"][1]["services"],
            json!({"kv": 11210, "mgmt": 8091, "n1ql": 8091})
        );
    }

    #[test]
    fn nodes_list_only_the_services_they_run() {
        // Node 5 runs the query service only and is listed first; node 2 runs kv only.
        let mut query = node(5, "q", 11210, 8091);
        query.services = crate::Services::parse("query").unwrap();
        query.tls = Some(crate::TlsPorts {
            kv: 11207,
            admin: 18091,
        });
        let mut data = node(2, "d", 11210, 8091);
        data.services = crate::Services::parse("kv").unwrap();
        let vbmap = VbMap::new(
            1,
            vec![
                Chain::new(Some(NodeId(2)), vec![Some(NodeId(9))]),
                Chain::new(Some(NodeId(9)), vec![None]),
            ],
        )
        .unwrap();
        let nodes = vec![query, data, node(9, "all", 11210, 8091)];
        let map = ClusterMap::new(nodes.clone(), vbmap).unwrap();
        let bucket = BucketInfo {
            name: "b",
            uuid: "u",
            kind: BucketKind::Couchbase,
        };
        let serving = ServingNode {
            host: "q",
            kv_port: 11210,
            admin_port: 8091,
            services: crate::Services::parse("query").unwrap(),
        };
        let doc = to_json(map.terse_bucket_config(&bucket, &serving));
        // Only data nodes hold vbuckets: the rows index them alone.
        assert_eq!(
            doc["vBucketServerMap"]["serverList"],
            json!(["d:11210", "all:11210"])
        );
        assert_eq!(
            doc["vBucketServerMap"]["vBucketMap"],
            json!([[0, 1], [1, -1]])
        );
        assert_eq!(doc["nodes"].as_array().unwrap().len(), 2);
        // Every node in `nodesExt`, data nodes first in the same order.
        assert_eq!(
            doc["nodesExt"],
            json!([
                {"services": {"kv": 11210, "mgmt": 8091}, "hostname": "d"},
                {"services": {"kv": 11210, "mgmt": 8091, "n1ql": 8091}, "hostname": "all"},
                {"services": {"mgmt": 8091, "mgmtSSL": 18091, "n1ql": 8091, "n1qlSSL": 18091},
                    "hostname": "q", "thisNode": true},
            ])
        );
        // A chain on the query node is no map.
        let onto_query = VbMap::new(0, vec![Chain::new(Some(NodeId(5)), vec![])]).unwrap();
        assert_eq!(
            ClusterMap::new(nodes, onto_query),
            Err(ClusterMapError::NotData {
                vb: VbId(0),
                node: NodeId(5)
            })
        );
    }

    #[test]
    fn empty_slots_render_as_minus_one() {
        let vbmap = VbMap::new(
            2,
            vec![
                Chain::new(Some(NodeId(7)), vec![Some(NodeId(3)), None]),
                Chain::lost(2),
            ],
        )
        .unwrap();
        let nodes = vec![node(3, "a", 1, 2), node(7, "b", 1, 2)];
        let map = ClusterMap::new(nodes, vbmap).unwrap();
        let bucket = BucketInfo {
            name: "b",
            uuid: "u",
            kind: BucketKind::Couchbase,
        };
        let serving = ServingNode {
            host: "b",
            kv_port: 1,
            admin_port: 8091,
            services: crate::Services::ALL,
        };
        let doc = to_json(map.terse_bucket_config(&bucket, &serving));
        let server_map = &doc["vBucketServerMap"];
        assert_eq!(server_map["numReplicas"], 2);
        assert_eq!(server_map["serverList"], json!(["a:1", "b:1"]));
        assert_eq!(server_map["vBucketMap"], json!([[1, 0, -1], [-1, -1, -1]]));
        assert_eq!(doc["nodesExt"][1]["thisNode"], true);
    }

    #[test]
    fn every_change_bumps_the_revision() {
        let map = one_node_map(2);
        let next = map.with_vbmap(map.vbmap().clone()).unwrap();
        assert_eq!(next.rev(), Rev(2));
        let after = next
            .next(
                vec![node(0, "h", 1, 2), node(1, "h", 3, 4)],
                map.vbmap().clone(),
            )
            .unwrap();
        assert_eq!(after.rev(), Rev(3));
        assert_eq!(after.replicas(), 0);
    }

    #[test]
    fn inconsistent_maps_are_refused() {
        let vbmap = VbMap::new(0, vec![Chain::new(Some(NodeId(5)), vec![])]).unwrap();
        assert_eq!(
            ClusterMap::new(vec![node(0, "h", 1, 2)], vbmap.clone()),
            Err(ClusterMapError::UnknownNode {
                vb: VbId(0),
                node: NodeId(5)
            })
        );
        assert_eq!(
            ClusterMap::new(vec![], vbmap.clone()),
            Err(ClusterMapError::NoNodes)
        );
        assert_eq!(
            ClusterMap::new(vec![node(5, "h", 1, 2), node(5, "g", 1, 2)], vbmap.clone()),
            Err(ClusterMapError::DuplicateNode(NodeId(5)))
        );
        assert!(matches!(
            ClusterMap::new(vec![node(5, "h", 1, 2), node(6, "h", 1, 3)], vbmap),
            Err(ClusterMapError::DuplicateAddress { .. })
        ));
    }

    #[test]
    fn serde_keeps_the_map_and_checks_it() {
        let map = one_node_map(2)
            .with_vbmap(one_node_map(2).vbmap().clone())
            .unwrap();
        let json = serde_json::to_value(&map).unwrap();
        assert_eq!(json["rev"], 2);
        assert_eq!(json["nodes"][0]["kv_port"], 12000);
        assert_eq!(
            serde_json::from_value::<ClusterMap>(json.clone()).unwrap(),
            map
        );
        let mut zero = json.clone();
        zero["rev"] = json!(0);
        assert!(serde_json::from_value::<ClusterMap>(zero).is_err());
        let mut foreign = json;
        foreign["vbmap"]["chains"][0] = json!([9]);
        assert!(serde_json::from_value::<ClusterMap>(foreign).is_err());
        assert_eq!(
            serde_json::to_value(BucketKind::Ephemeral).unwrap(),
            json!("ephemeral")
        );
    }
}
