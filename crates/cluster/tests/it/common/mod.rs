//! Shared by the property tests: the grid of cluster shapes and the checks every planned map
//! must pass.
#![allow(dead_code)]

use sluice_cluster::{check_balance, NodeId, VbMap};

pub const NODES: std::ops::RangeInclusive<u32> = 1..=8;
pub const REPLICAS: std::ops::RangeInclusive<u8> = 0..=3;
pub const VBUCKETS: [u16; 5] = [1, 4, 16, 64, 1024];

/// Every (nodes, replicas, vbuckets) of the grid.
pub fn grid() -> impl Iterator<Item = (u32, u8, u16)> {
    NODES.flat_map(|n| REPLICAS.flat_map(move |r| VBUCKETS.into_iter().map(move |v| (n, r, v))))
}

pub fn ids(range: std::ops::Range<u32>) -> Vec<NodeId> {
    range.map(NodeId).collect()
}

/// The map is valid and meets every balance rule over `nodes`.
pub fn assert_balanced(map: &VbMap, nodes: &[NodeId], case: &str) {
    assert_eq!(map.check(), Ok(()), "{case}");
    assert_eq!(check_balance(map, nodes), Ok(()), "{case}");
}

/// For each active node: how its replicas in `slot` (None: any slot) spread over the other
/// nodes, as (fewest, most).
pub fn replica_spread(map: &VbMap, nodes: &[NodeId], slot: Option<usize>) -> Vec<(usize, usize)> {
    nodes
        .iter()
        .filter(|&&a| map.iter().any(|(_, c)| c.active == Some(a)))
        .map(|&a| {
            let counts: Vec<usize> = nodes
                .iter()
                .filter(|&&b| b != a)
                .map(|&b| {
                    map.iter()
                        .filter(|(_, c)| c.active == Some(a))
                        .map(|(_, c)| {
                            c.replicas
                                .iter()
                                .enumerate()
                                .filter(|&(i, r)| *r == Some(b) && slot.is_none_or(|s| s == i))
                                .count()
                        })
                        .sum()
                })
                .collect();
            let fewest = counts.iter().copied().min().unwrap_or(0);
            let most = counts.iter().copied().max().unwrap_or(0);
            (fewest, most)
        })
        .collect()
}
