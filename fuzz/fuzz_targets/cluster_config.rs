//! The client's cluster-map parser (`ClusterView::parse`) on arbitrary bytes: the terse
//! config a server sends with GET_CLUSTER_CONFIG, NOT_MY_VBUCKET and map pushes. Checks:
//! never a panic; a map it accepts is whole: 1..=1024 vbuckets, each chain an active slot
//! and exactly `numReplicas` replica slots, every filled slot naming a listed node, and
//! every key routed to a vbucket of the map.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_client::ClusterView;

fuzz_target!(|data: &[u8]| {
    let Ok(view) = ClusterView::parse(data) else {
        return;
    };
    let nodes = view.nodes().len();
    assert!(nodes >= 1, "a map lists its servers");
    let vbuckets = view.num_vbuckets();
    assert!((1..=1024).contains(&vbuckets));
    let chains = view.vbucket_map().chains();
    assert_eq!(chains.len(), usize::from(vbuckets));
    for chain in chains {
        assert_eq!(chain.replicas.len(), usize::from(view.num_replicas()));
        for slot in std::iter::once(chain.active).chain(chain.replicas.iter().copied()) {
            if let Some(i) = slot {
                assert!(i < nodes, "slot {i} of {nodes} servers");
            }
        }
    }
    let vb = view.vbucket_of(data);
    assert!(vb.0 < vbuckets);
    let _ = view.active_node(vb);
    assert!(view.version().rev >= 0 && view.version().epoch >= 0);
});
