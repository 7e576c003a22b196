//! `apply`, command by command: what each changes, and that every refusal changes nothing.
//! The many-bucket cases are in `tests/buckets.rs`, collections in `tests/collections.rs`.

use super::*;
use crate::cluster_map::{BucketKind, Rev};
use crate::failover::fail_over;
use crate::node::{NodeId, NodeInfo};
use crate::placement::place;
use crate::vbmap::{Chain, MapError, VbMap};

mod buckets;
mod collections;
mod index_placement;
mod xdcr;

fn info(id: u32) -> NodeInfo {
    NodeInfo {
        id: NodeId(id),
        host: "127.0.0.1".to_string(),
        kv_port: 11000 + id as u16,
        admin_port: 9000 + id as u16,
        tls: None,
        services: crate::Services::ALL,
    }
}

fn bucket() -> BucketDef {
    BucketDef {
        name: "default".to_string(),
        uuid: "0f1e2d3c".to_string(),
        kind: BucketKind::Couchbase,
        replicas: 1,
        vbuckets: 8,
        quota_bytes: 64 << 20,
        durability_min: None,
        conflict_resolution: Default::default(),
    }
}

/// A failover of `nodes` carrying bucket `default`'s next map, planned from `rev`.
fn failover(nodes: Vec<NodeId>, rev: u64, vbmap: VbMap) -> MetaCommand {
    MetaCommand::FailOver(FailOverCommand {
        nodes,
        maps: vec![BucketVbmap {
            bucket: "default".into(),
            expected_rev: Rev(rev),
            vbmap,
        }],
    })
}

/// Moves node `id` to KV port `port` and admin port `port + 1`: its new info, and what
/// applying the move answered.
fn move_to(state: &mut ClusterState, id: u32, port: u16) -> (NodeInfo, Applied) {
    let mut moved = info(id);
    moved.kv_port = port;
    moved.admin_port = port + 1;
    let applied = ok(
        state,
        MetaCommand::MoveNode {
            info: moved.clone(),
        },
    );
    (moved, applied)
}

/// Applies a command that must succeed.
fn ok(state: &mut ClusterState, cmd: MetaCommand) -> Applied {
    apply(state, &cmd).unwrap_or_else(|e| panic!("{cmd:?} refused: {e}"))
}

/// Applies a command that must be refused, and checks it changed nothing.
fn refused(state: &mut ClusterState, cmd: MetaCommand) -> Rejection {
    let before = state.clone();
    let err = apply(state, &cmd).expect_err("must be refused");
    assert_eq!(*state, before, "{cmd:?} was refused but changed the state");
    err
}

/// A cluster of `n` nodes (ids 0..n), the bucket, and a first map placed on all of them.
fn cluster(n: u32) -> ClusterState {
    let mut state = ClusterState::new();
    for id in 0..n {
        assert_eq!(
            ok(&mut state, MetaCommand::AllocateNodeId),
            Applied::NodeIdAllocated { id: NodeId(id) }
        );
        ok(&mut state, MetaCommand::AddNode { info: info(id) });
    }
    ok(&mut state, MetaCommand::DefineBucket { bucket: bucket() });
    let nodes: Vec<NodeId> = (0..n).map(NodeId).collect();
    let vbmap = place(&nodes, 8, 1).unwrap();
    let set = MetaCommand::SetMap {
        bucket: "default".into(),
        expected_rev: None,
        nodes,
        vbmap,
    };
    assert_eq!(ok(&mut state, set), Applied::MapSet { rev: Rev(1) });
    state
}

#[test]
fn nodes_need_an_allocated_fresh_id_and_address() {
    let mut state = ClusterState::new();
    let add = |id| MetaCommand::AddNode { info: info(id) };
    assert_eq!(
        refused(&mut state, add(0)),
        Rejection::NodeIdNotAllocated { id: NodeId(0) }
    );
    ok(&mut state, MetaCommand::AllocateNodeId);
    ok(&mut state, MetaCommand::AllocateNodeId);
    assert_eq!(ok(&mut state, add(1)), Applied::NodeAdded { id: NodeId(1) });
    assert_eq!(
        refused(&mut state, add(1)),
        Rejection::NodeExists { id: NodeId(1) }
    );
    let mut clash = info(0);
    clash.kv_port = info(1).kv_port;
    assert!(matches!(
        refused(&mut state, MetaCommand::AddNode { info: clash }),
        Rejection::AddressInUse { .. }
    ));
    let mut nameless = info(0);
    nameless.host.clear();
    assert!(matches!(
        refused(&mut state, MetaCommand::AddNode { info: nameless }),
        Rejection::BadHost { .. }
    ));
    assert_eq!(
        state.node(NodeId(1)).map(|n| n.status),
        Some(NodeStatus::Joining)
    );
    // A removed node's id is never valid again.
    ok(&mut state, MetaCommand::RemoveNode { id: NodeId(1) });
    assert_eq!(
        refused(&mut state, add(1)),
        Rejection::NodeIdRetired { id: NodeId(1) }
    );
    assert_eq!(state.next_node_id(), NodeId(2));
}

#[test]
fn the_first_map_activates_its_nodes() {
    let state = cluster(3);
    assert_eq!(state.rev("default"), Some(Rev(1)));
    assert_eq!(state.nodes_with(NodeStatus::Active).len(), 3);
    assert_eq!(state.map("default").unwrap().nodes()[2], info(2));
}

#[test]
fn maps_are_compare_and_set_on_the_revision() {
    let mut state = cluster(2);
    let vbmap = state.map("default").unwrap().vbmap().clone();
    let set = |rev| MetaCommand::SetMap {
        bucket: "default".into(),
        expected_rev: rev,
        nodes: vec![NodeId(0), NodeId(1)],
        vbmap: vbmap.clone(),
    };
    // Two planners both read revision 1: the first publishes 2, the second is refused.
    assert_eq!(
        ok(&mut state, set(Some(Rev(1)))),
        Applied::MapSet { rev: Rev(2) }
    );
    assert_eq!(
        refused(&mut state, set(Some(Rev(1)))),
        Rejection::StaleRev {
            bucket: "default".into(),
            expected: Some(Rev(1)),
            actual: Some(Rev(2))
        }
    );
    assert!(matches!(
        refused(&mut state, set(None)),
        Rejection::StaleRev { .. }
    ));
}

#[test]
fn maps_must_fit_the_bucket_and_the_nodes() {
    let mut state = cluster(2);
    let rev = state.rev("default");
    let small = place(&[NodeId(0)], 4, 1).unwrap();
    assert_eq!(
        refused(
            &mut state,
            MetaCommand::SetMap {
                bucket: "default".into(),
                expected_rev: rev,
                nodes: vec![NodeId(0)],
                vbmap: small
            }
        ),
        Rejection::VbucketCount {
            bucket: "default".into(),
            expected: 8,
            actual: 4
        }
    );
    let on_two = place(&[NodeId(0), NodeId(1)], 8, 1).unwrap();
    // A copy on a node the list leaves out.
    assert!(matches!(
        refused(
            &mut state,
            MetaCommand::SetMap {
                bucket: "default".into(),
                expected_rev: rev,
                nodes: vec![NodeId(0)],
                vbmap: on_two.clone()
            }
        ),
        Rejection::ClusterMap(_)
    ));
    assert_eq!(
        refused(
            &mut state,
            MetaCommand::SetMap {
                bucket: "default".into(),
                expected_rev: rev,
                nodes: vec![NodeId(0), NodeId(7)],
                vbmap: on_two.clone()
            }
        ),
        Rejection::UnknownNode { id: NodeId(7) }
    );
    assert_eq!(
        refused(
            &mut state,
            MetaCommand::SetMap {
                bucket: "default".into(),
                expected_rev: rev,
                nodes: vec![NodeId(0), NodeId(0)],
                vbmap: on_two
            }
        ),
        Rejection::DuplicateNode { id: NodeId(0) }
    );
    let mut fresh = ClusterState::new();
    assert_eq!(
        refused(
            &mut fresh,
            MetaCommand::SetMap {
                bucket: "default".into(),
                expected_rev: None,
                nodes: vec![],
                vbmap: place(&[NodeId(0)], 8, 1).unwrap()
            }
        ),
        Rejection::NoSuchBucket {
            name: "default".into()
        }
    );
}

#[test]
fn set_chains_replaces_only_the_given_chains() {
    let mut state = cluster(2);
    let before = state.map("default").unwrap().vbmap().clone();
    let swapped = Chain::new(Some(NodeId(1)), vec![Some(NodeId(0))]);
    let cmd = MetaCommand::SetChains {
        bucket: "default".into(),
        expected_rev: Rev(1),
        chains: vec![(0, swapped.clone())],
    };
    assert_eq!(ok(&mut state, cmd), Applied::MapSet { rev: Rev(2) });
    let after = state.map("default").unwrap().vbmap();
    assert_eq!(after.chain(sluice_types::VbId(0)), Some(&swapped));
    assert!(after.iter().skip(1).eq(before.iter().skip(1)));
    let outside = MetaCommand::SetChains {
        bucket: "default".into(),
        expected_rev: Rev(2),
        chains: vec![(8, swapped.clone())],
    };
    assert!(matches!(
        refused(&mut state, outside),
        Rejection::Map(MapError::UnknownVbucket { .. })
    ));
    let twice = Chain::new(Some(NodeId(1)), vec![Some(NodeId(1))]);
    let invalid = MetaCommand::SetChains {
        bucket: "default".into(),
        expected_rev: Rev(2),
        chains: vec![(1, twice)],
    };
    assert!(matches!(
        refused(&mut state, invalid),
        Rejection::Map(MapError::DuplicateNode { .. })
    ));
}

#[test]
fn failover_marks_the_node_and_publishes_the_map_in_one_step() {
    let mut state = cluster(3);
    let current = state.map("default").unwrap().vbmap().clone();
    let out = fail_over(&current, &[NodeId(2)]);
    // The map given must not keep copies on the failed node.
    let wrong = failover(vec![NodeId(2)], 1, current);
    assert!(matches!(
        refused(&mut state, wrong),
        Rejection::ClusterMap(_)
    ));
    let missing = MetaCommand::FailOver(FailOverCommand {
        nodes: vec![NodeId(2)],
        maps: vec![],
    });
    assert_eq!(
        refused(&mut state, missing),
        Rejection::MissingBucketMap {
            name: "default".into()
        }
    );
    let cmd = failover(vec![NodeId(2)], 1, out.map.clone());
    assert_eq!(
        ok(&mut state, cmd.clone()),
        Applied::FailedOver {
            revs: vec![("default".into(), Rev(2))],
            rebalance_aborted: false
        }
    );
    assert_eq!(
        state.node(NodeId(2)).map(|n| n.status),
        Some(NodeStatus::FailedOver)
    );
    let listed: Vec<NodeId> = state
        .map("default")
        .unwrap()
        .nodes()
        .iter()
        .map(|n| n.id)
        .collect();
    assert_eq!(listed, vec![NodeId(0), NodeId(1)]);
    assert_eq!(state.map("default").unwrap().vbmap(), &out.map);
    // Failing it over again is refused; so is using it in a map.
    assert!(matches!(
        refused(&mut state, cmd),
        Rejection::NodeFailedOver { .. }
    ));
}

#[test]
fn a_rebalance_in_runs_from_start_to_finish() {
    let mut state = cluster(2);
    ok(&mut state, MetaCommand::AllocateNodeId);
    ok(&mut state, MetaCommand::AddNode { info: info(2) });
    let target = vec![NodeId(0), NodeId(1), NodeId(2)];
    let start = MetaCommand::StartRebalance {
        target: target.clone(),
    };
    assert_eq!(ok(&mut state, start.clone()), Applied::RebalanceStarted);
    assert_eq!(refused(&mut state, start), Rejection::RebalanceRunning);
    // The target node cannot be removed meanwhile.
    assert_eq!(
        refused(&mut state, MetaCommand::RemoveNode { id: NodeId(2) }),
        Rejection::NodeInRebalance { id: NodeId(2) }
    );
    let plan = crate::rebalance::plan_rebalance(state.map("default").unwrap().vbmap(), &target, 1)
        .unwrap();
    let set = MetaCommand::SetMap {
        bucket: "default".into(),
        expected_rev: Some(Rev(1)),
        nodes: target.clone(),
        vbmap: plan.target().clone(),
    };
    ok(&mut state, set);
    // Mid-rebalance maps do not activate the newcomer; finishing does.
    assert_eq!(
        state.node(NodeId(2)).map(|n| n.status),
        Some(NodeStatus::Joining)
    );
    let finish = MetaCommand::FinishRebalance {};
    assert_eq!(
        ok(&mut state, finish),
        Applied::RebalanceFinished { ejected: vec![] }
    );
    assert_eq!(state.nodes_with(NodeStatus::Active), target);
    assert_eq!(state.rebalance(), None);
}

#[test]
fn a_rebalance_out_ejects_the_nodes_left_out() {
    let mut state = cluster(3);
    let target = vec![NodeId(0), NodeId(1)];
    let start = MetaCommand::StartRebalance {
        target: target.clone(),
    };
    ok(&mut state, start);
    let finish = MetaCommand::FinishRebalance {};
    // Node 2 still holds copies: the rebalance is not done.
    assert_eq!(
        refused(&mut state, finish),
        Rejection::RebalanceIncomplete {
            bucket: "default".into(),
            id: NodeId(2)
        }
    );
    let plan = crate::rebalance::plan_rebalance(state.map("default").unwrap().vbmap(), &target, 1)
        .unwrap();
    for (i, mv) in plan.moves().iter().enumerate() {
        let cmd = MetaCommand::SetChains {
            bucket: "default".into(),
            expected_rev: Rev(1 + i as u64),
            chains: vec![(mv.vb().0, mv.new_chain().clone())],
        };
        ok(&mut state, cmd);
    }
    let rev = state.rev("default").unwrap();
    // The list still names node 2 until a map without it is published.
    let set = MetaCommand::SetMap {
        bucket: "default".into(),
        expected_rev: Some(rev),
        nodes: target.clone(),
        vbmap: state.map("default").unwrap().vbmap().clone(),
    };
    ok(&mut state, set);
    let finish = MetaCommand::FinishRebalance {};
    assert_eq!(
        ok(&mut state, finish),
        Applied::RebalanceFinished {
            ejected: vec![NodeId(2)]
        }
    );
    assert!(state.node(NodeId(2)).is_none());
    assert!(state.retired().contains(&NodeId(2)));
}

#[test]
fn a_failover_aborts_a_running_rebalance() {
    let mut state = cluster(3);
    ok(
        &mut state,
        MetaCommand::StartRebalance {
            target: vec![NodeId(0), NodeId(1), NodeId(2)],
        },
    );
    let out = fail_over(state.map("default").unwrap().vbmap(), &[NodeId(1)]);
    let cmd = failover(vec![NodeId(1)], 1, out.map);
    assert_eq!(
        ok(&mut state, cmd),
        Applied::FailedOver {
            revs: vec![("default".into(), Rev(2))],
            rebalance_aborted: true
        }
    );
    assert_eq!(
        refused(&mut state, MetaCommand::AbortRebalance),
        Rejection::NoRebalance
    );
}

#[test]
fn nodes_in_the_map_are_not_removed() {
    let mut state = cluster(2);
    assert_eq!(
        refused(&mut state, MetaCommand::RemoveNode { id: NodeId(1) }),
        Rejection::NodeInMap { id: NodeId(1) }
    );
    assert_eq!(
        refused(&mut state, MetaCommand::RemoveNode { id: NodeId(9) }),
        Rejection::UnknownNode { id: NodeId(9) }
    );
}

#[test]
fn states_serialize_and_read_back_checked() {
    let mut state = cluster(3);
    ok(
        &mut state,
        MetaCommand::StartRebalance {
            target: vec![NodeId(0), NodeId(1)],
        },
    );
    let json = serde_json::to_string(&state).unwrap();
    let back: ClusterState = serde_json::from_str(&json).unwrap();
    assert_eq!(back, state);
    assert_eq!(back.check(), Ok(()));
    // A state whose node table and map disagree is caught by `check`.
    let mut doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    doc["nodes"]["1"]["status"] = serde_json::json!("failed_over");
    let bad: ClusterState = serde_json::from_value(doc).unwrap();
    assert!(matches!(bad.check(), Err(StateError::MapNode { .. })));
}

#[test]
fn commands_and_responses_round_trip_through_json() {
    let cmds = vec![
        MetaCommand::AllocateNodeId,
        MetaCommand::AddNode { info: info(3) },
        MetaCommand::DefineBucket { bucket: bucket() },
        MetaCommand::SetChains {
            bucket: "default".into(),
            expected_rev: Rev(4),
            chains: vec![(3, Chain::new(Some(NodeId(1)), vec![None]))],
        },
        failover(
            vec![NodeId(1)],
            2,
            VbMap::new(0, vec![Chain::lost(0)]).unwrap(),
        ),
        MetaCommand::DeleteBucket {
            name: "default".into(),
        },
        MetaCommand::StartRebalance {
            target: vec![NodeId(0)],
        },
        MetaCommand::FinishRebalance {},
    ];
    for cmd in cmds {
        let json = serde_json::to_string(&cmd).unwrap();
        assert_eq!(serde_json::from_str::<MetaCommand>(&json).unwrap(), cmd);
    }
    let responses: Vec<MetaResponse> = vec![
        Ok(Applied::MapSet { rev: Rev(3) }),
        Err(Rejection::StaleRev {
            bucket: "default".into(),
            expected: None,
            actual: Some(Rev(2)),
        }),
        Err(Rejection::Map(MapError::NoVbuckets)),
    ];
    for r in responses {
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<MetaResponse>(&json).unwrap(), r);
    }
}

#[test]
fn node_ids_run_out_without_wrapping() {
    let mut state = ClusterState::new();
    state.next_node_id = u32::MAX - 1;
    assert_eq!(
        refused(&mut state, MetaCommand::AllocateNodeId),
        Rejection::NodeIdsExhausted
    );
}

#[test]
fn a_moved_node_gets_its_new_address_in_the_table_and_the_next_map() {
    let mut state = cluster(3);
    let rev = state.map("default").unwrap().rev();
    let (moved, applied) = move_to(&mut state, 1, 15000);
    assert_eq!(
        applied,
        Applied::NodeMoved {
            id: NodeId(1),
            revs: vec![("default".into(), Rev(rev.0 + 1))],
        }
    );
    assert_eq!(state.node(NodeId(1)).unwrap().info, moved);
    let map = state.map("default").unwrap();
    assert!(map.nodes().contains(&moved));
    assert_eq!(map.vbmap().num_vbuckets(), 8, "same chains");
    // The same address again changes nothing.
    let again = ok(&mut state, MetaCommand::MoveNode { info: moved });
    assert_eq!(
        again,
        Applied::NodeMoved {
            id: NodeId(1),
            revs: vec![]
        }
    );
    // Another node's address, or an unknown node, is refused.
    let mut clash = info(2);
    clash.kv_port = 15000;
    assert!(matches!(
        refused(&mut state, MetaCommand::MoveNode { info: clash }),
        Rejection::AddressInUse { .. }
    ));
    assert!(matches!(
        refused(&mut state, MetaCommand::MoveNode { info: info(7) }),
        Rejection::UnknownNode { .. }
    ));
}

#[test]
fn users_are_put_replaced_and_deleted_and_bad_ones_refused() {
    use crate::metadata::{CredentialRecord, UserRecord};
    let user = |roles: &str| UserRecord {
        roles: crate::rbac::parse_roles(roles).unwrap_or_default(),
        credentials: CredentialRecord {
            scram: vec![],
            plain_salt: "00".into(),
            plain_digest: "11".into(),
        },
    };
    let mut s = ClusterState::default();
    let put = |name: &str, u: UserRecord| MetaCommand::PutUser {
        name: name.into(),
        user: u,
    };
    assert_eq!(
        apply(&mut s, &put("alice", user("data_reader[default]"))),
        Ok(Applied::UserPut { created: true })
    );
    assert_eq!(
        apply(&mut s, &put("alice", user("ro_admin"))),
        Ok(Applied::UserPut { created: false })
    );
    assert_eq!(s.users()["alice"].roles, vec![crate::rbac::Role::RoAdmin]);
    let before = s.clone();
    for bad in ["", "@cluster", "a:b", "a,b", &"x".repeat(129)] {
        let refused = apply(&mut s, &put(bad, user("ro_admin")));
        assert!(
            matches!(refused, Err(Rejection::BadUserName { .. })),
            "{bad:?}"
        );
    }
    assert_eq!(
        apply(&mut s, &put("bob", user(""))),
        Err(Rejection::NoRoles)
    );
    assert_eq!(s, before, "refusals change nothing");
    let delete = |name: &str| MetaCommand::DeleteUser { name: name.into() };
    assert_eq!(apply(&mut s, &delete("alice")), Ok(Applied::UserDeleted));
    assert_eq!(
        apply(&mut s, &delete("alice")),
        Err(Rejection::NoSuchUser {
            name: "alice".into()
        })
    );
    assert!(s.users().is_empty());
}

#[test]
fn a_node_s_services_are_fixed_for_its_life() {
    let mut state = cluster(2);
    let mut changed = info(1);
    changed.services = crate::Services::parse("index,query").unwrap();
    assert_eq!(
        refused(&mut state, MetaCommand::MoveNode { info: changed }),
        Rejection::ServicesChanged {
            id: NodeId(1),
            had: crate::Services::ALL,
            asked: crate::Services::parse("index,query").unwrap(),
        }
    );
    // Moving to other ports with the same services is fine.
    move_to(&mut state, 1, 15000);
}

#[test]
fn vbuckets_go_on_data_nodes_only() {
    let mut state = cluster(2);
    ok(&mut state, MetaCommand::AllocateNodeId);
    let mut query = info(2);
    query.services = crate::Services::parse("query").unwrap();
    ok(&mut state, MetaCommand::AddNode { info: query });
    let rev = state.rev("default").unwrap().0;
    let all = [NodeId(0), NodeId(1), NodeId(2)];
    let onto_query_node = MetaCommand::SetMap {
        bucket: "default".into(),
        expected_rev: Some(Rev(rev)),
        nodes: all.to_vec(),
        vbmap: place(&all, 8, 1).unwrap(),
    };
    let err = refused(&mut state, onto_query_node);
    assert!(
        matches!(
            err,
            Rejection::ClusterMap(crate::ClusterMapError::NotData {
                node: NodeId(2),
                ..
            })
        ),
        "{err}"
    );
    // Listed without a copy, it is in the map (and `nodesExt`) and becomes active.
    let listed = MetaCommand::SetMap {
        bucket: "default".into(),
        expected_rev: Some(Rev(rev)),
        nodes: all.to_vec(),
        vbmap: place(&all[..2], 8, 1).unwrap(),
    };
    ok(&mut state, listed);
    assert_eq!(state.node(NodeId(2)).unwrap().status, NodeStatus::Active);
}
