//! Placement over the whole grid of cluster shapes: valid, balanced, spread, deterministic.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::{assert_balanced, grid, ids, replica_spread};
use sluice_cluster::balance::fillable_replicas;
use sluice_cluster::{place, NodeId};

#[test]
fn every_shape_is_valid_and_balanced() {
    for (n, r, v) in grid() {
        let nodes = ids(0..n);
        let map = place(&nodes, v, r).unwrap();
        let case = format!("{n} nodes, {r} replicas, {v} vbuckets");
        assert_balanced(&map, &nodes, &case);
        assert_eq!(map.num_vbuckets(), v, "{case}");
        assert_eq!(map.replicas(), r, "{case}");
        let fillable = fillable_replicas(nodes.len(), r);
        for (vb, chain) in map.iter() {
            let active = chain.active.expect("every vbucket has an active");
            for (slot, replica) in chain.replicas.iter().enumerate() {
                assert_eq!(replica.is_some(), slot < fillable, "{case} {vb}");
                assert_ne!(*replica, Some(active), "{case} {vb}: replica on its active");
            }
        }
    }
}

#[test]
fn a_nodes_replicas_spread_over_the_others() {
    for (n, r, v) in grid() {
        let nodes = ids(0..n);
        let map = place(&nodes, v, r).unwrap();
        let case = format!("{n} nodes, {r} replicas, {v} vbuckets");
        for slot in (0..fillable_replicas(nodes.len(), r))
            .map(Some)
            .chain([None])
        {
            for (fewest, most) in replica_spread(&map, &nodes, slot) {
                assert!(
                    most - fewest <= 1,
                    "{case}, slot {slot:?}: {fewest}..{most}"
                );
            }
        }
    }
}

#[test]
fn node_order_and_ids_only_rename() {
    // Any ids, in any order: the same shape, with the first listed node in node 0's place.
    let nodes = [NodeId(40), NodeId(7), NodeId(19), NodeId(3), NodeId(11)];
    for r in 0..=3 {
        for v in [1, 16, 1024] {
            let map = place(&nodes, v, r).unwrap();
            assert_balanced(&map, &nodes, "renamed");
            let plain = place(&ids(0..5), v, r).unwrap();
            let rename = |slot: Option<NodeId>| slot.map(|id| nodes[id.0 as usize]);
            for ((_, a), (_, b)) in map.iter().zip(plain.iter()) {
                assert_eq!(a.active, rename(b.active));
                let renamed: Vec<_> = b.replicas.iter().map(|&s| rename(s)).collect();
                assert_eq!(a.replicas, renamed);
            }
            assert_eq!(place(&nodes, v, r), Ok(map), "deterministic");
        }
    }
}
