//! A node that was shut down starts again from its directory: it recovers its vote, log and
//! state (from the log alone, or from its last snapshot plus the log after it), then catches
//! up with what the cluster committed while it was away.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::*;
use sluice_cluster::metadata::MetaCommand;
use sluice_cluster::NodeId;
use sluice_meta::MetaConfig;
use std::time::Duration;

/// Proposes `count` node-id allocations through `node`.
async fn allocate(node: &TestNode, count: usize) {
    for _ in 0..count {
        node.node
            .propose(MetaCommand::AllocateNodeId)
            .await
            .unwrap()
            .unwrap();
    }
}

async fn restart_catches_up(tune: fn(&mut MetaConfig), from_snapshot: bool) {
    let root = tempfile::tempdir().unwrap();
    let first = TestNode::start_with(NodeId(0), &root.path().join("n0"), 0, tune).await;
    first.node.initialize_single().await.unwrap();
    let mut nodes = vec![first];
    eventually("node 0 leads", Duration::from_secs(5), || {
        nodes[0].node.leader() == Some(NodeId(0))
    })
    .await;
    for i in 1..3 {
        let dir = root.path().join(format!("n{i}"));
        let t = TestNode::start_with(NodeId(i), &dir, 0, tune).await;
        nodes[0]
            .node
            .add_node(t.id, &t.addr.to_string())
            .await
            .unwrap();
        nodes.push(t);
    }
    allocate(&nodes[0], 20).await;
    let before = converged(&nodes.iter().collect::<Vec<_>>()).await;

    // Node 2 goes away; the other two commit more.
    let gone = nodes.pop().unwrap();
    let position = gone.node.log_position();
    if from_snapshot {
        // Its log no longer starts at the beginning: recovery must start from its snapshot.
        assert!(
            position.snapshot.is_some() && position.purged.is_some(),
            "{position:?}"
        );
    } else {
        assert_eq!((position.snapshot, position.purged), (None, None));
    }
    let (id, dir, port) = gone.stop().await;
    allocate(&nodes[1], 10).await;
    let committed = converged(&nodes.iter().collect::<Vec<_>>()).await;
    assert_eq!(committed.next_node_id(), NodeId(30));

    // Back from its directory, it holds what it had applied before any peer speaks to it.
    let back = TestNode::start_with(id, &dir, port, tune).await;
    assert_eq!(back.state(), before, "recovered state");
    eventually("it knows its membership", Duration::from_secs(2), || {
        back.node.membership().voters.len() == 3
    })
    .await;
    // Then it catches up, and takes part again.
    nodes.push(back);
    let all: Vec<&TestNode> = nodes.iter().collect();
    assert_eq!(converged(&all).await, committed);
    allocate(&nodes[2], 1).await;
    converged(&nodes.iter().collect::<Vec<_>>()).await;
    for n in nodes {
        n.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_recovers_from_its_log_and_catches_up() {
    bounded(restart_catches_up(|_| {}, false)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_recovers_from_its_snapshot_and_catches_up() {
    // A snapshot every 8 entries, and no log kept behind it.
    fn tune(config: &mut MetaConfig) {
        config.snapshot_every_entries = 8;
        config.log_kept_after_snapshot = 0;
    }
    bounded(restart_catches_up(tune, true)).await;
}
