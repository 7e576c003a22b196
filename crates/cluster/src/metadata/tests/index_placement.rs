//! Where index copies go: `num_replica` + 1 nodes, the least loaded first, and how a
//! failover, a rebalance and old records change that.

use super::*;
use crate::metadata::indexes::IndexRecord;

fn create(name: &str, replicas: u8) -> MetaCommand {
    MetaCommand::CreateIndex {
        bucket: "default".into(),
        name: name.into(),
        index: IndexRecord {
            definition: format!("{{\"name\":\"{name}\"}}"),
            deferred: false,
            replicas,
            // Whatever a command says here, the metadata chooses.
            nodes: Some(vec![NodeId(7)]),
        },
        on: None,
    }
}

fn nodes_of(state: &ClusterState, name: &str) -> Vec<u32> {
    let record = &state.buckets()["default"].indexes[name];
    record
        .nodes
        .as_ref()
        .expect("placed")
        .iter()
        .map(|n| n.0)
        .collect()
}

fn fail(state: &mut ClusterState, id: u32) {
    let current = state.map("default").unwrap().vbmap().clone();
    let out = fail_over(&current, &[NodeId(id)]);
    let rev = state.rev("default").unwrap().0;
    ok(state, failover(vec![NodeId(id)], rev, out.map));
}

#[test]
fn copies_go_to_the_least_loaded_nodes_each_on_its_own() {
    let mut state = cluster(3);
    ok(&mut state, create("a", 0));
    ok(&mut state, create("b", 0));
    ok(&mut state, create("c", 1));
    ok(&mut state, create("d", 2));
    ok(&mut state, create("e", 0));
    assert_eq!(nodes_of(&state, "a"), [0]);
    assert_eq!(nodes_of(&state, "b"), [1]);
    // Node 2 holds none yet, then node 0 (one copy, the lowest id of the two with one).
    assert_eq!(nodes_of(&state, "c"), [2, 0]);
    assert_eq!(nodes_of(&state, "d"), [1, 2, 0]);
    // Loads are now 3, 2, 2: node 1 wins the tie.
    assert_eq!(nodes_of(&state, "e"), [1]);
    let record = &state.buckets()["default"].indexes["c"];
    assert!(record.held_by(NodeId(0), &state) && !record.held_by(NodeId(1), &state));
}

#[test]
fn more_replicas_than_nodes_is_refused() {
    let mut state = cluster(2);
    assert_eq!(
        refused(&mut state, create("a", 2)),
        Rejection::IndexReplicas {
            replicas: 2,
            nodes: 2
        }
    );
    // A failed-over node may hold no copy.
    fail(&mut state, 1);
    assert_eq!(
        refused(&mut state, create("a", 1)),
        Rejection::IndexReplicas {
            replicas: 1,
            nodes: 1
        }
    );
    ok(&mut state, create("a", 0));
    assert_eq!(nodes_of(&state, "a"), [0]);
}

#[test]
fn a_failover_re_places_the_lost_copies_on_nodes_without_one() {
    let mut state = cluster(3);
    ok(&mut state, create("one", 0)); // node 0
    ok(&mut state, create("two", 1)); // nodes 1, 2
    ok(&mut state, create("all", 2)); // nodes 0, 1, 2
    fail(&mut state, 1);
    // `one` lost nothing. `two` lost its copy on node 1 and gets one on node 0, the only
    // node without one. `all` asks for 3 copies and 2 nodes remain.
    assert_eq!(nodes_of(&state, "one"), [0]);
    assert_eq!(nodes_of(&state, "two"), [2, 0]);
    assert_eq!(nodes_of(&state, "all"), [0, 2]);
    // An index whose only copy was lost is rebuilt elsewhere.
    fail(&mut state, 0);
    assert_eq!(nodes_of(&state, "one"), [2]);
    assert_eq!(nodes_of(&state, "two"), [2]);
    assert_eq!(nodes_of(&state, "all"), [2]);
}

#[test]
fn a_rebalance_tops_indexes_up_and_moves_copies_off_ejected_nodes() {
    let mut state = cluster(2);
    ok(&mut state, create("pair", 1)); // nodes 0, 1
    ok(&mut state, create("solo", 0)); // node 0
    fail(&mut state, 1);
    assert_eq!(nodes_of(&state, "pair"), [0]);
    // Node 2 joins and a rebalance takes it in (and ejects failed-over node 1).
    ok(&mut state, MetaCommand::AllocateNodeId);
    ok(&mut state, MetaCommand::AddNode { info: info(2) });
    let target = vec![NodeId(0), NodeId(2)];
    ok(
        &mut state,
        MetaCommand::StartRebalance {
            target: target.clone(),
        },
    );
    let rev = state.rev("default").unwrap();
    let set = MetaCommand::SetMap {
        bucket: "default".into(),
        expected_rev: Some(rev),
        nodes: target.clone(),
        vbmap: place(&target, 8, 1).unwrap(),
    };
    ok(&mut state, set);
    ok(&mut state, MetaCommand::FinishRebalance {});
    assert_eq!(nodes_of(&state, "pair"), [0, 2]);
    assert_eq!(nodes_of(&state, "solo"), [0]);
}

#[test]
fn records_stored_before_placement_stay_on_every_node() {
    let mut state = cluster(2);
    ok(&mut state, create("new", 0));
    let mut json = serde_json::to_value(&state).unwrap();
    let old = &mut json["buckets"]["default"]["indexes"]["new"];
    let fields = old.as_object_mut().unwrap();
    fields.remove("nodes");
    fields.remove("replicas");
    let mut back: ClusterState = serde_json::from_value(json).unwrap();
    let record = &back.buckets()["default"].indexes["new"];
    assert_eq!((record.nodes.as_ref(), record.replicas), (None, 0));
    assert!(record.held_by(NodeId(0), &back) && record.held_by(NodeId(1), &back));
    // A failover leaves such a record as it is; the node failed over holds it no more.
    fail(&mut back, 1);
    let record = &back.buckets()["default"].indexes["new"];
    assert_eq!(record.nodes, None);
    assert_eq!(record.holders(&back), [NodeId(0)]);
}

#[test]
fn a_copy_on_a_node_that_left_breaks_the_invariants() {
    let mut state = cluster(2);
    ok(&mut state, create("a", 0));
    let with_nodes = |nodes: serde_json::Value| {
        let mut json = serde_json::to_value(&state).unwrap();
        json["buckets"]["default"]["indexes"]["a"]["nodes"] = nodes;
        serde_json::from_value::<ClusterState>(json)
            .unwrap()
            .check()
    };
    assert_eq!(with_nodes(serde_json::json!([1, 0])), Ok(()));
    for (nodes, problem) in [
        (serde_json::json!([9]), "not a node of the cluster"),
        (serde_json::json!([0, 0]), "listed twice"),
    ] {
        assert!(
            matches!(with_nodes(nodes), Err(StateError::IndexNode { problem: p, .. }) if p == problem),
            "{problem}"
        );
    }
}

/// Adds node `id` running `services` (an allocated id, `Joining`).
fn add_with(state: &mut ClusterState, id: u32, services: &str) {
    assert_eq!(
        ok(state, MetaCommand::AllocateNodeId),
        Applied::NodeIdAllocated { id: NodeId(id) }
    );
    let mut info = info(id);
    info.services = crate::Services::parse(services).unwrap();
    ok(state, MetaCommand::AddNode { info });
}

#[test]
fn only_nodes_running_the_index_service_hold_copies() {
    let mut state = cluster(2);
    add_with(&mut state, 2, "kv,query");
    add_with(&mut state, 3, "index");
    for name in ["a", "b", "c", "d"] {
        ok(&mut state, create(name, 0));
    }
    ok(&mut state, create("e", 2));
    for name in ["a", "b", "c", "d", "e"] {
        assert!(!nodes_of(&state, name).contains(&2), "{name}: {state:?}");
    }
    // One each over 0, 1, 3, then 0 again; then the least loaded first.
    assert_eq!(nodes_of(&state, "c"), [3]);
    assert_eq!(nodes_of(&state, "d"), [0]);
    assert_eq!(nodes_of(&state, "e"), [1, 3, 0]);
    // Four nodes, three of them index nodes.
    assert_eq!(
        refused(&mut state, create("f", 3)),
        Rejection::IndexReplicas {
            replicas: 3,
            nodes: 3
        }
    );
    // A record stored before placement is held by the index nodes only.
    let mut json = serde_json::to_value(&state).unwrap();
    json["buckets"]["default"]["indexes"]["a"]
        .as_object_mut()
        .unwrap()
        .remove("nodes");
    let back: ClusterState = serde_json::from_value(json).unwrap();
    let record = &back.buckets()["default"].indexes["a"];
    assert_eq!(record.holders(&back), [NodeId(0), NodeId(1), NodeId(3)]);
    assert!(!record.held_by(NodeId(2), &back));
}

#[test]
fn a_failed_over_index_node_s_copies_go_to_other_index_nodes_only() {
    let mut state = cluster(2);
    add_with(&mut state, 2, "kv");
    add_with(&mut state, 3, "index,query");
    ok(&mut state, create("a", 1));
    assert_eq!(nodes_of(&state, "a"), [0, 1]);
    fail(&mut state, 0);
    // Node 3 is the only index node without a copy left; node 2 never takes one.
    assert_eq!(nodes_of(&state, "a"), [1, 3]);
}

fn create_on(name: &str, replicas: u8, on: &[u32]) -> MetaCommand {
    match create(name, replicas) {
        MetaCommand::CreateIndex {
            bucket,
            name,
            index,
            ..
        } => MetaCommand::CreateIndex {
            bucket,
            name,
            index,
            on: Some(on.iter().copied().map(NodeId).collect()),
        },
        _ => unreachable!("create makes a CreateIndex"),
    }
}

#[test]
fn nodes_asked_for_are_taken_if_they_can_hold_a_copy() {
    let mut state = cluster(3);
    add_with(&mut state, 3, "kv");
    // Not the least loaded choice (node 0 would be first): the nodes asked for.
    ok(&mut state, create_on("a", 1, &[2, 1]));
    assert_eq!(nodes_of(&state, "a"), [2, 1]);
    let refusals = [
        (create_on("b", 1, &[2]), "1 node(s) named for 2 copies"),
        (create_on("b", 1, &[2, 2]), "node n2 is named twice"),
        (
            create_on("b", 0, &[3]),
            "node n3 does not run the index service",
        ),
        (create_on("b", 0, &[9]), "node n9 is not in the cluster"),
    ];
    for (cmd, why) in refusals {
        let refusal = refused(&mut state, cmd);
        assert_eq!(
            refusal,
            Rejection::IndexNodes {
                reason: why.to_string()
            }
        );
    }
    fail(&mut state, 0);
    assert_eq!(
        refused(&mut state, create_on("b", 0, &[0])),
        Rejection::IndexNodes {
            reason: "node n0 is failed over".into()
        }
    );
    // What the catalog chooses is unchanged by the option existing.
    ok(&mut state, create("c", 0));
    assert_eq!(nodes_of(&state, "c").len(), 1);
}
