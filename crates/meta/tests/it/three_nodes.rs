//! Three nodes form a cluster; a proposal made through a follower is applied on all three.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::*;
use sluice_cluster::metadata::{Applied, MetaCommand, NodeStatus, Rejection};
use sluice_cluster::{place, NodeId, Rev};
use std::collections::BTreeSet;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proposal_through_a_follower_is_applied_everywhere() {
    bounded(async {
        let root = tempfile::tempdir().unwrap();
        // Node 2 is added through node 1, a follower: `add_node` is forwarded too.
        let nodes = form(root.path(), 3, |i| if i == 2 { 1 } else { 0 }).await;
        let all: Vec<&TestNode> = nodes.iter().collect();
        let leader = agreed_leader(&all).await;
        assert_eq!(leader, NodeId(0));
        let voters: BTreeSet<NodeId> = (0..3).map(NodeId).collect();
        for n in &nodes {
            let m = n.node.membership();
            assert_eq!(m.voters, voters, "as seen by {}", n.id);
            assert!(m.learners.is_empty());
        }

        // Everything goes through node 2, a follower.
        let follower = &nodes[2].node;
        for id in 0..3 {
            let [allocate, add] = register(id);
            assert_eq!(
                follower.propose(allocate).await.unwrap(),
                Ok(Applied::NodeIdAllocated { id: NodeId(id) })
            );
            assert_eq!(
                follower.propose(add).await.unwrap(),
                Ok(Applied::NodeAdded { id: NodeId(id) })
            );
        }
        let define = MetaCommand::DefineBucket { bucket: bucket() };
        follower.propose(define).await.unwrap().unwrap();
        let ids: Vec<NodeId> = (0..3).map(NodeId).collect();
        let set = MetaCommand::SetMap {
            bucket: "default".into(),
            expected_rev: None,
            nodes: ids.clone(),
            vbmap: place(&ids, 16, 1).unwrap(),
        };
        assert_eq!(
            follower.propose(set.clone()).await.unwrap(),
            Ok(Applied::MapSet { rev: Rev(1) })
        );
        // A refused command comes back as the state machine's answer, not as an error.
        assert_eq!(
            follower.propose(set).await.unwrap(),
            Err(Rejection::StaleRev {
                bucket: "default".into(),
                expected: None,
                actual: Some(Rev(1))
            })
        );

        let state = converged(&all).await;
        assert_eq!(state.rev("default"), Some(Rev(1)));
        assert_eq!(state.nodes_with(NodeStatus::Active), ids);
        assert_eq!(state.bucket("default"), Some(&bucket()));
        for n in nodes {
            n.stop().await;
        }
    })
    .await;
}
