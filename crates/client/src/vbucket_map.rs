//! The terse bucket config (CCCP JSON, `sluice_types::cccp`'s model, which the cluster
//! writes) checked and turned into what routing needs: the map's version,
//! the KV nodes, and each vbucket's chain of copies. No I/O.
//!
//! The fields read (design/clients.md §1.4 and §5):
//! - `rev`, `revEpoch` → [`MapVersion`], compared epoch first, then revision;
//! - `vBucketServerMap.serverList` → the KV nodes, `host:port`, in the order the rows index
//!   them;
//! - `vBucketServerMap.vBucketMap` → one row per vbucket, `[active, replica 1, …]`, `-1` for
//!   an empty slot, exactly `1 + numReplicas` entries;
//! - `nodesExt` (optional) → each server's `mgmt` and `kvSSL` ports and whether it is
//!   `thisNode`. When present it must list every server (same host, `services.kv` = the
//!   server's port).
//!
//! Everything else is ignored. A map that breaks any rule is refused with a [`MapError`]: a
//! client that routed by half a map would send keys to nodes that do not own them.

use sluice_types::cccp::{service, NodeExt, TerseConfig};
use sluice_types::{vbucket_of, VbId};
use std::collections::BTreeSet;

use crate::error::MapError;

use sluice_types::limits::{NODES_MAX, REPLICAS_MAX, VBUCKETS_MAX};

pub use sluice_types::MapVersion;

/// One KV node as the map lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapNode {
    /// `host:port` as listed in `serverList`: what the client dials and keys connections by.
    pub addr: String,
    /// The host without brackets (an IPv6 address is bracketed in `addr`).
    pub host: String,
    pub kv_port: u16,
    /// `nodesExt[].services.mgmt`, if the map has `nodesExt`.
    pub mgmt_port: Option<u16>,
    /// `nodesExt[].services.kvSSL`: where the node serves KV over TLS, if it does.
    pub kv_tls_port: Option<u16>,
    /// The node that served this map says so (`nodesExt[].thisNode`).
    pub this_node: bool,
}

impl MapNode {
    /// `host:port` of the node's KV TLS port (`kvSSL`), an IPv6 host bracketed; `None` if
    /// the map names none.
    pub fn kv_tls_addr(&self) -> Option<String> {
        let port = self.kv_tls_port?;
        Some(match self.host.contains(':') {
            true => format!("[{}]:{port}", self.host),
            false => format!("{}:{port}", self.host),
        })
    }
}

/// Where one vbucket's copies live, as indices into [`ClusterView::nodes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VbChain {
    /// `None`: the active copy is lost (until a failover promotes a replica).
    pub active: Option<usize>,
    /// Exactly `numReplicas` slots; `None` for an empty slot.
    pub replicas: Vec<Option<usize>>,
}

/// `vBucketServerMap`: the replica count and one chain per vbucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VbucketMap {
    replicas: u8,
    chains: Vec<VbChain>,
}

impl VbucketMap {
    pub fn num_vbuckets(&self) -> u16 {
        // Checked at parse time: 1..=VBUCKETS_MAX rows.
        u16::try_from(self.chains.len()).expect("at most VBUCKETS_MAX rows")
    }

    pub fn num_replicas(&self) -> u8 {
        self.replicas
    }

    pub fn chain(&self, vb: VbId) -> Option<&VbChain> {
        self.chains.get(usize::from(vb.0))
    }

    pub fn chains(&self) -> &[VbChain] {
        &self.chains
    }
}

/// One revision of a bucket's cluster map, checked and ready to route with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterView {
    version: MapVersion,
    /// `name`, if the config carries it.
    bucket: Option<String>,
    nodes: Vec<MapNode>,
    vbuckets: VbucketMap,
}

impl ClusterView {
    /// Parses and checks a terse bucket config (GET_CLUSTER_CONFIG, NOT_MY_VBUCKET body).
    pub fn parse(json: &[u8]) -> Result<ClusterView, MapError> {
        let raw: TerseConfig = serde_json::from_slice(json)?;
        build(raw)
    }

    pub fn version(&self) -> MapVersion {
        self.version
    }

    pub fn bucket(&self) -> Option<&str> {
        self.bucket.as_deref()
    }

    pub fn nodes(&self) -> &[MapNode] {
        &self.nodes
    }

    pub fn vbucket_map(&self) -> &VbucketMap {
        &self.vbuckets
    }

    pub fn num_vbuckets(&self) -> u16 {
        self.vbuckets.num_vbuckets()
    }

    pub fn num_replicas(&self) -> u8 {
        self.vbuckets.num_replicas()
    }

    /// The vbucket `key` hashes to under this map.
    pub fn vbucket_of(&self, key: &[u8]) -> VbId {
        vbucket_of(key, self.num_vbuckets())
    }

    /// The node holding `vb`'s active copy, if it has one.
    pub fn active_node(&self, vb: VbId) -> Option<&MapNode> {
        let i = self.vbuckets.chain(vb)?.active?;
        self.nodes.get(i)
    }

    /// The node holding `vb`'s replica `index` (0-based), if that slot is filled.
    pub fn replica_node(&self, vb: VbId, index: u8) -> Option<&MapNode> {
        let chain = self.vbuckets.chain(vb)?;
        let i = (*chain.replicas.get(usize::from(index))?)?;
        self.nodes.get(i)
    }

    /// Whether `addr` is one of this map's KV nodes.
    pub fn lists(&self, addr: &str) -> bool {
        self.nodes.iter().any(|n| n.addr == addr)
    }
}

fn build(raw: TerseConfig) -> Result<ClusterView, MapError> {
    let rev = raw.rev.ok_or(MapError::MissingField("rev"))?;
    let epoch = raw.rev_epoch.unwrap_or(0);
    if rev < 0 || epoch < 0 {
        return Err(MapError::NegativeRevision { epoch, rev });
    }
    if let Some(locator) = raw.node_locator {
        if locator != "vbucket" {
            return Err(MapError::NotVbucketLocator(locator));
        }
    }
    let sm = raw
        .vbucket_server_map
        .ok_or(MapError::MissingField("vBucketServerMap"))?;
    if let Some(hash) = sm.hash_algorithm {
        if hash != "CRC" {
            return Err(MapError::UnsupportedHash(hash));
        }
    }
    let replicas = sm
        .num_replicas
        .ok_or(MapError::MissingField("vBucketServerMap.numReplicas"))?;
    let replicas = u8::try_from(replicas)
        .ok()
        .filter(|r| *r <= REPLICAS_MAX)
        .ok_or(MapError::BadReplicaCount(replicas))?;
    let servers = sm
        .server_list
        .ok_or(MapError::MissingField("vBucketServerMap.serverList"))?;
    let mut nodes = parse_servers(&servers)?;
    if let Some(ext) = &raw.nodes_ext {
        attach_nodes_ext(&mut nodes, ext)?;
    }
    let rows = sm
        .vbucket_map
        .ok_or(MapError::MissingField("vBucketServerMap.vBucketMap"))?;
    let chains = parse_rows(&rows, replicas, nodes.len())?;
    Ok(ClusterView {
        version: MapVersion { epoch, rev },
        bucket: raw.name,
        nodes,
        vbuckets: VbucketMap { replicas, chains },
    })
}

fn parse_servers(servers: &[String]) -> Result<Vec<MapNode>, MapError> {
    if servers.is_empty() {
        return Err(MapError::NoServers);
    }
    if servers.len() > NODES_MAX {
        return Err(MapError::TooManyServers {
            count: servers.len(),
            max: NODES_MAX,
        });
    }
    let mut seen = BTreeSet::new();
    let mut nodes = Vec::with_capacity(servers.len());
    for (index, addr) in servers.iter().enumerate() {
        let (host, kv_port) = split_host_port(addr).ok_or_else(|| MapError::BadServerAddress {
            index,
            addr: addr.clone(),
        })?;
        if !seen.insert(addr.as_str()) {
            return Err(MapError::DuplicateServer(addr.clone()));
        }
        nodes.push(MapNode {
            addr: addr.clone(),
            host: host.to_string(),
            kv_port,
            mgmt_port: None,
            kv_tls_port: None,
            this_node: false,
        });
    }
    Ok(nodes)
}

/// `host:port` or `[v6]:port`, with a non-empty host and a port in 1..=65535.
fn split_host_port(addr: &str) -> Option<(&str, u16)> {
    let (host, port) = addr.rsplit_once(':')?;
    let host = match host.strip_prefix('[') {
        Some(inner) => inner.strip_suffix(']')?,
        None if host.contains(':') => return None, // unbracketed IPv6
        None => host,
    };
    let port: u16 = port.parse().ok()?;
    (!host.is_empty() && port != 0).then_some((host, port))
}

/// Matches each server to its `nodesExt` entry (same host, or no hostname given, and
/// `services.kv` equal to its port) and takes the management port and `thisNode` from it.
fn attach_nodes_ext(nodes: &mut [MapNode], ext: &[NodeExt]) -> Result<(), MapError> {
    if ext.len() > NODES_MAX {
        return Err(MapError::TooManyServers {
            count: ext.len(),
            max: NODES_MAX,
        });
    }
    let mut parsed = Vec::with_capacity(ext.len());
    for (index, e) in ext.iter().enumerate() {
        let services = e
            .services
            .as_ref()
            .ok_or(MapError::NodesExtWithoutServices { index })?;
        let port = |name: &'static str| -> Result<Option<u16>, MapError> {
            match services.get(name) {
                None => Ok(None),
                Some(p) => match u16::try_from(*p) {
                    Ok(p) if p != 0 => Ok(Some(p)),
                    _ => Err(MapError::BadPort {
                        index,
                        service: name,
                        port: *p,
                    }),
                },
            }
        };
        parsed.push((
            e.hostname.as_deref(),
            port(service::KV)?,
            port(service::MGMT)?,
            port(service::KV_TLS)?,
            e.this_node,
        ));
    }
    for node in nodes.iter_mut() {
        let found = parsed.iter().find(|(host, kv, _, _, _)| {
            *kv == Some(node.kv_port) && host.is_none_or(|h| h.is_empty() || h == node.host)
        });
        let Some((_, _, mgmt, kv_tls, this)) = found else {
            return Err(MapError::ServerNotInNodesExt(node.addr.clone()));
        };
        node.mgmt_port = *mgmt;
        node.kv_tls_port = *kv_tls;
        node.this_node = *this;
    }
    Ok(())
}

fn parse_rows(rows: &[Vec<i64>], replicas: u8, servers: usize) -> Result<Vec<VbChain>, MapError> {
    if rows.is_empty() {
        return Err(MapError::NoVbuckets);
    }
    if rows.len() > usize::from(VBUCKETS_MAX) {
        return Err(MapError::TooManyVbuckets {
            count: rows.len(),
            max: usize::from(VBUCKETS_MAX),
        });
    }
    let expected = 1 + usize::from(replicas);
    let mut chains = Vec::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        let vb = VbId(u16::try_from(i).expect("at most VBUCKETS_MAX rows"));
        if row.len() != expected {
            return Err(MapError::BadRowLength {
                vb,
                len: row.len(),
                expected,
            });
        }
        let mut slots = Vec::with_capacity(expected);
        for &entry in row {
            let slot = match entry {
                -1 => None,
                n => match usize::try_from(n) {
                    Ok(n) if n < servers => Some(n),
                    _ => return Err(MapError::BadNodeIndex { vb, index: entry }),
                },
            };
            if slot.is_some() && slots.contains(&slot) {
                return Err(MapError::DuplicateCopy { vb, index: entry });
            }
            slots.push(slot);
        }
        let active = slots.remove(0);
        chains.push(VbChain {
            active,
            replicas: slots,
        });
    }
    Ok(chains)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// Two nodes, 4 vbuckets, 1 replica, as a Sluice node renders it.
    fn good() -> Value {
        json!({
            "rev": 7, "revEpoch": 1, "name": "default", "nodeLocator": "vbucket",
            "nodes": [],
            "nodesExt": [
                {"services": {"kv": 12000, "mgmt": 8091, "kvSSL": 12007}, "hostname": "127.0.0.1", "thisNode": true},
                {"services": {"kv": 12002, "mgmt": 8093}, "hostname": "127.0.0.1"},
            ],
            "vBucketServerMap": {
                "hashAlgorithm": "CRC", "numReplicas": 1,
                "serverList": ["127.0.0.1:12000", "127.0.0.1:12002"],
                "vBucketMap": [[0, 1], [1, 0], [0, -1], [-1, 1]],
            },
        })
    }

    fn parse(v: &Value) -> Result<ClusterView, MapError> {
        ClusterView::parse(&serde_json::to_vec(v).unwrap())
    }

    /// `v` is refused with `want` (compared by message, which names every field).
    fn fails(v: &Value, want: MapError) {
        match parse(v) {
            Ok(_) => panic!("accepted {v}"),
            Err(got) => assert_eq!(got.to_string(), want.to_string(), "{v}"),
        }
    }

    fn with(path: &str, value: Value) -> Value {
        let mut v = good();
        *v.pointer_mut(path).unwrap() = value;
        v
    }

    fn without(path: &str) -> Value {
        let mut v = good();
        let (parent, field) = path.rsplit_once('/').unwrap();
        let parent = if parent.is_empty() {
            &mut v
        } else {
            v.pointer_mut(parent).unwrap()
        };
        parent.as_object_mut().unwrap().remove(field);
        v
    }

    #[test]
    fn parses_a_two_node_map() {
        let m = parse(&good()).unwrap();
        assert_eq!(m.version(), MapVersion { epoch: 1, rev: 7 });
        assert_eq!(m.bucket(), Some("default"));
        assert_eq!((m.num_vbuckets(), m.num_replicas()), (4, 1));
        let addrs: Vec<&str> = m.nodes().iter().map(|n| n.addr.as_str()).collect();
        assert_eq!(addrs, ["127.0.0.1:12000", "127.0.0.1:12002"]);
        assert_eq!(m.nodes()[1].mgmt_port, Some(8093));
        assert_eq!(m.nodes()[0].kv_tls_port, Some(12007));
        assert_eq!(m.nodes()[1].kv_tls_port, None);
        assert_eq!(
            m.nodes()[0].kv_tls_addr().as_deref(),
            Some("127.0.0.1:12007")
        );
        assert_eq!(m.nodes()[1].kv_tls_addr(), None);
        assert!(m.nodes()[0].this_node && !m.nodes()[1].this_node);
        assert_eq!(m.active_node(VbId(1)).unwrap().kv_port, 12002);
        assert_eq!(m.replica_node(VbId(1), 0).unwrap().kv_port, 12000);
        assert_eq!(m.replica_node(VbId(2), 0), None, "empty slot");
        assert_eq!(m.replica_node(VbId(1), 1), None, "no second replica");
        assert_eq!(m.active_node(VbId(3)), None, "lost active");
        assert_eq!(m.active_node(VbId(4)), None, "no such vbucket");
        assert!(m.lists("127.0.0.1:12002") && !m.lists("127.0.0.1:1"));
    }

    #[test]
    fn routes_keys_with_the_sdk_hash() {
        let m = parse(&good()).unwrap();
        for key in [&b"a"[..], b"doc42", b""] {
            assert_eq!(m.vbucket_of(key), vbucket_of(key, 4));
        }
    }

    #[test]
    fn versions_order_by_epoch_then_rev() {
        let v = |epoch, rev| MapVersion { epoch, rev };
        assert!(v(1, 2) > v(1, 1));
        assert!(v(2, 1) > v(1, 900));
        assert!(v(0, 5) < v(1, 0));
        let old = parse(&without("/revEpoch")).unwrap();
        assert_eq!(old.version(), v(0, 7), "no epoch is epoch 0");
    }

    #[test]
    fn nodes_ext_is_optional_and_may_omit_hostnames() {
        let m = parse(&without("/nodesExt")).unwrap();
        assert_eq!(m.nodes()[0].mgmt_port, None);
        let mut v = good();
        v["nodesExt"][0].as_object_mut().unwrap().remove("hostname");
        assert_eq!(parse(&v).unwrap().nodes()[0].mgmt_port, Some(8091));
    }

    #[test]
    fn accepts_ipv6_servers() {
        let v = with(
            "/vBucketServerMap/serverList",
            json!(["[::1]:12000", "[::1]:12002"]),
        );
        let v = {
            let mut v = v;
            v["nodesExt"][0]["hostname"] = json!("::1");
            v["nodesExt"][1]["hostname"] = json!("::1");
            v
        };
        let m = parse(&v).unwrap();
        assert_eq!(
            (m.nodes()[0].host.as_str(), m.nodes()[0].kv_port),
            ("::1", 12000)
        );
    }

    #[test]
    fn rejects_what_is_not_json_or_not_shaped_like_a_map() {
        for bad in [&b""[..], b"not json", b"[1,2]", b"{\"rev\":", b"null"] {
            let got = ClusterView::parse(bad);
            assert!(matches!(got, Err(MapError::Json(_))), "{bad:?}");
        }
        // Wrong types inside are JSON errors too: serde names the field.
        for v in [
            with("/rev", json!("7")),
            with("/rev", json!(7.5)),
            with("/vBucketServerMap/vBucketMap", json!([[0, "1"]])),
            with("/vBucketServerMap/vBucketMap", json!({})),
            with("/vBucketServerMap/serverList", json!([12000])),
            with("/nodesExt", json!([{"services": {"kv": "x"}}])),
        ] {
            assert!(matches!(parse(&v), Err(MapError::Json(_))), "{v}");
        }
    }

    #[test]
    fn rejects_missing_fields() {
        for (path, field) in [
            ("/rev", "rev"),
            ("/vBucketServerMap", "vBucketServerMap"),
            (
                "/vBucketServerMap/numReplicas",
                "vBucketServerMap.numReplicas",
            ),
            (
                "/vBucketServerMap/serverList",
                "vBucketServerMap.serverList",
            ),
            (
                "/vBucketServerMap/vBucketMap",
                "vBucketServerMap.vBucketMap",
            ),
        ] {
            fails(&without(path), MapError::MissingField(field));
        }
    }

    #[test]
    fn rejects_bad_header_fields() {
        fails(
            &with("/rev", json!(-1)),
            MapError::NegativeRevision { epoch: 1, rev: -1 },
        );
        assert!(matches!(
            parse(&with("/revEpoch", json!(-3))),
            Err(MapError::NegativeRevision { .. })
        ));
        fails(
            &with("/nodeLocator", json!("ketama")),
            MapError::NotVbucketLocator("ketama".into()),
        );
        fails(
            &with("/vBucketServerMap/hashAlgorithm", json!("MD5")),
            MapError::UnsupportedHash("MD5".into()),
        );
        for r in [-1, 4, 300] {
            fails(
                &with("/vBucketServerMap/numReplicas", json!(r)),
                MapError::BadReplicaCount(r),
            );
        }
    }

    #[test]
    fn rejects_bad_server_lists() {
        fails(
            &with("/vBucketServerMap/serverList", json!([])),
            MapError::NoServers,
        );
        for bad in [
            "127.0.0.1",
            "127.0.0.1:",
            ":12000",
            "h:0",
            "h:70000",
            "::1:5",
            "[::1:5",
        ] {
            let v = with(
                "/vBucketServerMap/serverList",
                json!([bad, "127.0.0.1:12002"]),
            );
            assert!(
                matches!(parse(&v), Err(MapError::BadServerAddress { index: 0, .. })),
                "{bad}"
            );
        }
        let dup = with(
            "/vBucketServerMap/serverList",
            json!(["127.0.0.1:12000", "127.0.0.1:12000"]),
        );
        fails(&dup, MapError::DuplicateServer("127.0.0.1:12000".into()));
        let many: Vec<String> = (1..=200).map(|p| format!("h:{p}")).collect();
        assert!(matches!(
            parse(&with("/vBucketServerMap/serverList", json!(many))),
            Err(MapError::TooManyServers { count: 200, .. })
        ));
    }

    #[test]
    fn rejects_nodes_ext_that_disagrees_with_the_server_list() {
        let v = with("/nodesExt/1/services/kv", json!(12004));
        fails(&v, MapError::ServerNotInNodesExt("127.0.0.1:12002".into()));
        let v = with("/nodesExt/1/hostname", json!("10.0.0.9"));
        assert!(matches!(parse(&v), Err(MapError::ServerNotInNodesExt(_))));
        let v = with("/nodesExt/0/services/mgmt", json!(0));
        assert!(matches!(
            parse(&v),
            Err(MapError::BadPort {
                index: 0,
                service: "mgmt",
                port: 0
            })
        ));
        let v = with("/nodesExt/1/services/kv", json!(65536));
        assert!(matches!(parse(&v), Err(MapError::BadPort { index: 1, .. })));
        let mut v = good();
        v["nodesExt"][1].as_object_mut().unwrap().remove("services");
        fails(&v, MapError::NodesExtWithoutServices { index: 1 });
    }

    #[test]
    fn rejects_bad_vbucket_rows() {
        let rows = |r: Value| with("/vBucketServerMap/vBucketMap", r);
        fails(&rows(json!([])), MapError::NoVbuckets);
        fails(
            &rows(json!([[0, 1], [0]])),
            MapError::BadRowLength {
                vb: VbId(1),
                len: 1,
                expected: 2,
            },
        );
        fails(
            &rows(json!([[0, 1, -1]])),
            MapError::BadRowLength {
                vb: VbId(0),
                len: 3,
                expected: 2,
            },
        );
        fails(
            &rows(json!([[0, 2]])),
            MapError::BadNodeIndex {
                vb: VbId(0),
                index: 2,
            },
        );
        fails(
            &rows(json!([[1, 0], [-2, 0]])),
            MapError::BadNodeIndex {
                vb: VbId(1),
                index: -2,
            },
        );
        fails(
            &rows(json!([[1, 1]])),
            MapError::DuplicateCopy {
                vb: VbId(0),
                index: 1,
            },
        );
        // Two empty slots are not duplicates.
        assert!(parse(&rows(json!([[-1, -1]]))).is_ok());
        let huge = vec![json!([0, 1]); usize::from(VBUCKETS_MAX) + 1];
        assert!(matches!(
            parse(&rows(json!(huge))),
            Err(MapError::TooManyVbuckets { count: 1025, .. })
        ));
    }

    #[test]
    fn reads_what_the_single_node_server_sends() {
        // clients.md §5, shortened to 4 vbuckets.
        let text = br#"{"rev":1,"revEpoch":1,"name":"default","uuid":"0f1e","bucketType":"membase",
 "nodeLocator":"vbucket","bucketCapabilitiesVer":"",
 "bucketCapabilities":["couchapi","dcp","cbhello","touch","cccp","xattr","nodesExt"],
 "nodes":[{"hostname":"127.0.0.1:8091","ports":{"direct":12000},"couchApiBase":"http://127.0.0.1:8092/default"}],
 "nodesExt":[{"services":{"kv":12000,"mgmt":8091},"thisNode":true,"hostname":"127.0.0.1"}],
 "vBucketServerMap":{"hashAlgorithm":"CRC","numReplicas":0,"serverList":["127.0.0.1:12000"],
                     "vBucketMap":[[0],[0],[0],[0]]}}"#;
        let m = ClusterView::parse(text).unwrap();
        assert_eq!(
            (m.num_vbuckets(), m.num_replicas(), m.nodes().len()),
            (4, 0, 1)
        );
        assert_eq!(m.replica_node(VbId(0), 0), None);
    }
}
