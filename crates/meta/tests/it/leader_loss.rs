//! The leader of three goes away: the other two elect a leader among themselves, keep what
//! was committed, and commit new proposals.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::*;
use sluice_cluster::metadata::{Applied, MetaCommand};
use sluice_cluster::NodeId;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_of_three_elect_a_leader_and_keep_committing() {
    bounded(async {
        let root = tempfile::tempdir().unwrap();
        let mut nodes = form(root.path(), 3, |_| 0).await;
        for id in 0..2 {
            for cmd in register(id) {
                nodes[1].node.propose(cmd).await.unwrap().unwrap();
            }
        }
        let before = converged(&nodes.iter().collect::<Vec<_>>()).await;
        assert_eq!(before.nodes().len(), 2);

        let old = agreed_leader(&nodes.iter().collect::<Vec<_>>()).await;
        let at = nodes.iter().position(|n| n.id == old).unwrap();
        nodes.remove(at).stop().await;
        let lost = Instant::now();

        let survivors: Vec<&TestNode> = nodes.iter().collect();
        let new = agreed_leader(&survivors).await;
        assert_ne!(new, old);
        eprintln!("new leader {new} after {:?}", lost.elapsed());

        // Committed state is intact on both survivors.
        for n in &survivors {
            assert_eq!(n.state(), before, "{} lost committed state", n.id);
        }
        // And they accept new proposals, through either of them.
        for n in &survivors {
            let answer = n.node.propose(MetaCommand::AllocateNodeId).await.unwrap();
            assert!(matches!(answer, Ok(Applied::NodeIdAllocated { .. })));
        }
        let after = converged(&survivors).await;
        assert_eq!(after.next_node_id(), NodeId(4));
        assert_eq!(after.nodes(), before.nodes());
        eprintln!(
            "two proposals committed {:?} after the loss",
            lost.elapsed()
        );
        assert!(lost.elapsed() < Duration::from_secs(10));
        for n in nodes {
            n.stop().await;
        }
    })
    .await;
}
