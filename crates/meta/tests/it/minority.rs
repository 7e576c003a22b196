//! A proposal on the minority side does not commit: it ends with `MetaError::Timeout` after
//! the request time, and nothing is applied.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::*;
use sluice_cluster::metadata::MetaCommand;
use sluice_cluster::NodeId;
use sluice_meta::MetaError;
use std::time::{Duration, Instant};

/// Forms `n` nodes, commits one command, stops the nodes in `stop`, then proposes through
/// each survivor and expects a timeout with the state unchanged.
async fn minority_cannot_commit(n: u32, stop: &[u32]) {
    let root = tempfile::tempdir().unwrap();
    let nodes = form(root.path(), n, |_| 0).await;
    assert_eq!(
        nodes[0].node.membership().voters.len(),
        n.min(5) as usize,
        "every node votes"
    );
    nodes[0]
        .node
        .propose(MetaCommand::AllocateNodeId)
        .await
        .unwrap()
        .unwrap();
    let before = converged(&nodes.iter().collect::<Vec<_>>()).await;

    let (down, up): (Vec<TestNode>, Vec<TestNode>) =
        nodes.into_iter().partition(|t| stop.contains(&t.id.0));
    for t in down {
        t.stop().await;
    }
    for t in &up {
        let started = Instant::now();
        let answer = t.node.propose(MetaCommand::AllocateNodeId).await;
        let waited = started.elapsed();
        assert!(
            matches!(answer, Err(MetaError::Timeout { .. })),
            "{}: {answer:?}",
            t.id
        );
        // The request time is 3 s; the answer comes then, not much later.
        assert!(
            waited >= Duration::from_secs(3) && waited < Duration::from_secs(5),
            "{waited:?}"
        );
        assert_eq!(t.state(), before, "{} applied something", t.id);
    }
    for t in up {
        t.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_of_three_voters_cannot_commit() {
    bounded(minority_cannot_commit(3, &[0, 1])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_of_five_voters_cannot_commit() {
    // The leader (node 0) is among the three lost; node 3 and node 4 are left.
    bounded(minority_cannot_commit(5, &[0, 1, 2])).await;
}

#[test]
fn survivors_are_the_nodes_not_stopped() {
    let stop = [0, 1];
    let kept: Vec<u32> = (0..3).filter(|i| !stop.contains(i)).collect();
    assert_eq!(kept, vec![2]);
    assert_eq!(NodeId(2).0, 2);
}
