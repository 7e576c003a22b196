//! The voter policy in a live group: all nodes vote below 3, three vote at 3 or 4 nodes,
//! five at 5 or more; the others are learners. Removing a node re-applies the policy.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::*;
use sluice_cluster::NodeId;
use sluice_meta::Membership;
use std::collections::BTreeSet;
use std::time::Duration;

fn ids(range: std::ops::Range<u32>) -> BTreeSet<NodeId> {
    range.map(NodeId).collect()
}

/// Waits until every node in `nodes` sees `voters` and `learners`, in a settled
/// (non-joint) membership.
async fn membership_is(nodes: &[TestNode], voters: BTreeSet<NodeId>, learners: BTreeSet<NodeId>) {
    let want = Membership {
        voters,
        learners,
        joint: false,
    };
    eventually(
        "every node sees the membership",
        Duration::from_secs(5),
        || nodes.iter().all(|n| n.node.membership() == want),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn voters_follow_the_group_size() {
    bounded(async {
        let root = tempfile::tempdir().unwrap();
        let mut nodes = form(root.path(), 1, |_| 0).await;
        membership_is(&nodes, ids(0..1), ids(0..0)).await;
        for i in 1..5 {
            let t = TestNode::start(NodeId(i), &root.path().join(format!("n{i}")), 0).await;
            // Added through the newest member, so most additions are forwarded.
            let via = nodes.len() - 1;
            nodes[via]
                .node
                .add_node(t.id, &t.addr.to_string())
                .await
                .unwrap();
            nodes.push(t);
            match i + 1 {
                2 => membership_is(&nodes, ids(0..2), ids(0..0)).await,
                3 => membership_is(&nodes, ids(0..3), ids(0..0)).await,
                // Four nodes: three voters and one learner.
                4 => membership_is(&nodes, ids(0..3), ids(3..4)).await,
                // Five nodes: all five vote.
                _ => membership_is(&nodes, ids(0..5), ids(0..0)).await,
            }
        }
        // Adding a member again changes nothing.
        let addr = nodes[4].addr.to_string();
        nodes[0].node.add_node(NodeId(4), &addr).await.unwrap();
        membership_is(&nodes, ids(0..5), ids(0..0)).await;

        // Back to four: three of the remaining voters keep their seat, one becomes a learner.
        nodes[2].node.remove_node(NodeId(1)).await.unwrap();
        let gone = nodes.remove(1);
        let want_voters: BTreeSet<NodeId> = [0, 2, 3].into_iter().map(NodeId).collect();
        membership_is(&nodes, want_voters, ids(4..5)).await;
        gone.stop().await;
        for n in nodes {
            n.stop().await;
        }
    })
    .await;
}

/// Two nodes admitted at once (as `sluice cluster up` starts them): Raft takes one
/// membership change at a time, and the second waits for the first instead of failing with
/// "already undergoing a configuration change".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_admissions_both_succeed() {
    bounded(async {
        let root = tempfile::tempdir().unwrap();
        let mut nodes = form(root.path(), 1, |_| 0).await;
        let mut joiners = Vec::new();
        for i in 1..4 {
            joiners.push(TestNode::start(NodeId(i), &root.path().join(format!("n{i}")), 0).await);
        }
        let leader = &nodes[0].node;
        let addrs: Vec<String> = joiners.iter().map(|t| t.addr.to_string()).collect();
        let (a, b, c) = tokio::join!(
            leader.add_node(joiners[0].id, &addrs[0]),
            leader.add_node(joiners[1].id, &addrs[1]),
            leader.add_node(joiners[2].id, &addrs[2]),
        );
        for added in [a, b, c] {
            added.unwrap();
        }
        nodes.extend(joiners);
        // Four nodes: three voters and one learner, whichever order the changes took.
        eventually("four members", Duration::from_secs(5), || {
            nodes.iter().all(|n| {
                let m = n.node.membership();
                m.voters.len() == 3 && m.learners.len() == 1 && !m.joint
            })
        })
        .await;
        for n in nodes {
            n.stop().await;
        }
    })
    .await;
}
