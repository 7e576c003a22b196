//! Where an index streams each vbucket from: its active copy, as the bucket's cluster map
//! places it. A vbucket with no active copy (lost until a failover or rebalance places it
//! again) is streamed from nowhere; its entries stay as they were until it is placed.

use std::collections::BTreeMap;

use sluice_cluster::{ClusterMap, NodeId, NodeInfo};
use sluice_types::VbId;

/// One member an index streams from, and the vbuckets it is active for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub node: NodeInfo,
    /// Ascending.
    pub vbuckets: Vec<VbId>,
}

/// The sources of `map`, by node id: every vbucket with an active copy appears in exactly
/// one source. A map whose chain names a node it does not list is broken (`ClusterMap`'s
/// own check refuses it); such a vbucket is left out rather than streamed from a guess.
pub fn sources(map: &ClusterMap) -> BTreeMap<NodeId, Source> {
    let mut out: BTreeMap<NodeId, Source> = BTreeMap::new();
    for (vb, chain) in map.vbmap().iter() {
        let Some(active) = chain.active else { continue };
        let Some(info) = map.nodes().iter().find(|n| n.id == active) else {
            debug_assert!(false, "map chain names unlisted node {active}");
            continue;
        };
        out.entry(active)
            .or_insert_with(|| Source {
                node: info.clone(),
                vbuckets: Vec::new(),
            })
            .vbuckets
            .push(vb);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_cluster::{Chain, VbMap};

    fn node(id: u32) -> NodeInfo {
        NodeInfo {
            id: NodeId(id),
            host: "127.0.0.1".into(),
            kv_port: 11210 + id as u16,
            admin_port: 8091 + id as u16,
            tls: None,
            services: sluice_cluster::Services::ALL,
        }
    }

    fn map(chains: Vec<Chain>) -> ClusterMap {
        ClusterMap::new(
            vec![node(1), node(2), node(3)],
            VbMap::new(1, chains).unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn each_placed_vbucket_streams_from_its_active_only() {
        let n = |i| Some(NodeId(i));
        let m = map(vec![
            Chain::new(n(1), vec![n(2)]),
            Chain::new(n(2), vec![n(3)]),
            Chain::new(n(1), vec![n(3)]),
            Chain::new(None, vec![None]),
            Chain::new(n(3), vec![None]),
        ]);
        let s = sources(&m);
        let got: Vec<(u32, Vec<u16>)> = s
            .iter()
            .map(|(id, src)| (id.0, src.vbuckets.iter().map(|v| v.0).collect()))
            .collect();
        assert_eq!(got, vec![(1, vec![0, 2]), (2, vec![1]), (3, vec![4])]);
        assert_eq!(s[&NodeId(2)].node.kv_port, 11212);
    }

    #[test]
    fn a_map_without_active_copies_has_no_source() {
        let m = map(vec![Chain::lost(1); 4]);
        assert!(sources(&m).is_empty());
    }
}
