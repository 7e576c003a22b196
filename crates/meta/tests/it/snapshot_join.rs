//! A node that joins after the leader purged its log cannot be sent the log from the start:
//! it receives the leader's snapshot (over the chunked InstallSnapshot RPC) and continues
//! from the log after it.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::*;
use sluice_cluster::metadata::MetaCommand;
use sluice_cluster::NodeId;
use sluice_meta::MetaConfig;
use std::time::Duration;

fn tune(config: &mut MetaConfig) {
    config.snapshot_every_entries = 8;
    config.log_kept_after_snapshot = 0;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_joiner_is_sent_a_snapshot() {
    bounded(async {
        let root = tempfile::tempdir().unwrap();
        let first = TestNode::start_with(NodeId(0), &root.path().join("n0"), 0, tune).await;
        first.node.initialize_single().await.unwrap();
        let mut nodes = vec![first];
        eventually("node 0 leads", Duration::from_secs(5), || {
            nodes[0].node.leader() == Some(NodeId(0))
        })
        .await;
        for id in 0..4 {
            for cmd in register(id) {
                nodes[0].node.propose(cmd).await.unwrap().unwrap();
            }
        }
        for _ in 0..10 {
            let cmd = MetaCommand::AllocateNodeId;
            nodes[0].node.propose(cmd).await.unwrap().unwrap();
        }
        eventually("the leader purges its log", Duration::from_secs(5), || {
            nodes[0].node.log_position().purged.is_some()
        })
        .await;

        let t = TestNode::start_with(NodeId(1), &root.path().join("n1"), 0, tune).await;
        nodes[0]
            .node
            .add_node(t.id, &t.addr.to_string())
            .await
            .unwrap();
        nodes.push(t);
        let state = converged(&nodes.iter().collect::<Vec<_>>()).await;
        assert_eq!(state.nodes().len(), 4);
        // The joiner's log starts after the snapshot it was sent.
        let joined = nodes[1].node.log_position();
        assert!(joined.snapshot.is_some(), "{joined:?}");
        // And it keeps up with new commands.
        nodes[1]
            .node
            .propose(MetaCommand::AllocateNodeId)
            .await
            .unwrap()
            .unwrap();
        converged(&nodes.iter().collect::<Vec<_>>()).await;
        for n in nodes {
            n.stop().await;
        }
    })
    .await;
}
