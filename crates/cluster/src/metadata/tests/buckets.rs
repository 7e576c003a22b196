//! `apply` with many buckets: definitions by name, each bucket's own map and revisions,
//! failovers and rebalances over every bucket, and what was written before buckets were
//! named.

use super::*;
use sluice_types::DurabilityLevel;

#[test]
fn buckets_are_defined_once_by_name() {
    let mut state = ClusterState::new();
    let mut bad = bucket();
    bad.replicas = 4;
    assert!(matches!(
        refused(&mut state, MetaCommand::DefineBucket { bucket: bad }),
        Rejection::Bucket(BucketError::Replicas { .. })
    ));
    let define = MetaCommand::DefineBucket { bucket: bucket() };
    assert_eq!(
        ok(&mut state, define.clone()),
        Applied::BucketDefined { created: true }
    );
    // A retried proposal is harmless; another definition under the name is refused.
    assert_eq!(
        ok(&mut state, define),
        Applied::BucketDefined { created: false }
    );
    let mut changed = bucket();
    changed.replicas = 2;
    assert!(matches!(
        refused(&mut state, MetaCommand::DefineBucket { bucket: changed }),
        Rejection::BucketExists { .. }
    ));
    // Other names are other buckets, up to the limit.
    for i in 1..BUCKETS_MAX {
        let created = ok(&mut state, define_named(&format!("b{i}")));
        assert_eq!(created, Applied::BucketDefined { created: true });
    }
    assert_eq!(state.buckets().len(), BUCKETS_MAX);
    assert_eq!(
        refused(&mut state, define_named("one-more")),
        Rejection::TooManyBuckets { max: BUCKETS_MAX }
    );
    assert_eq!(
        ok(&mut state, MetaCommand::DeleteBucket { name: "b1".into() }),
        Applied::BucketDeleted
    );
    assert_eq!(
        refused(&mut state, MetaCommand::DeleteBucket { name: "b1".into() }),
        Rejection::NoSuchBucket { name: "b1".into() }
    );
    ok(&mut state, define_named("one-more"));
}

/// Defines bucket `name`, like `bucket()` but with its own uuid and 2 replicas.
fn define_named(name: &str) -> MetaCommand {
    let mut def = bucket();
    def.name = name.to_string();
    def.uuid = format!(
        "{:x}",
        name.len() * 7919 + name.bytes().map(usize::from).sum::<usize>()
    );
    def.replicas = 2;
    MetaCommand::DefineBucket { bucket: def }
}

/// `cluster(n)` plus bucket `other` (2 replicas) placed on the same nodes.
fn two_buckets(n: u32) -> ClusterState {
    let mut state = cluster(n);
    ok(&mut state, define_named("other"));
    let nodes: Vec<NodeId> = (0..n).map(NodeId).collect();
    let set = MetaCommand::SetMap {
        bucket: "other".into(),
        expected_rev: None,
        vbmap: place(&nodes, 8, 2).unwrap(),
        nodes,
    };
    assert_eq!(ok(&mut state, set), Applied::MapSet { rev: Rev(1) });
    state
}

#[test]
fn a_buckets_quota_is_changed_alone() {
    let mut state = two_buckets(2);
    let before = state.buckets()["other"].clone();
    let set = |name: &str, quota_bytes| MetaCommand::SetBucketQuota {
        name: name.into(),
        quota_bytes,
    };
    assert_eq!(
        ok(&mut state, set("default", 200 << 20)),
        Applied::BucketQuotaSet { changed: true }
    );
    assert_eq!(state.bucket("default").unwrap().quota_bytes, 200 << 20);
    assert_eq!(state.buckets()["other"], before);
    assert_eq!(
        ok(&mut state, set("default", 200 << 20)),
        Applied::BucketQuotaSet { changed: false }
    );
    assert_eq!(
        refused(&mut state, set("default", 0)),
        Rejection::Bucket(BucketError::ZeroQuota)
    );
    assert_eq!(
        refused(&mut state, set("nope", 1)),
        Rejection::NoSuchBucket {
            name: "nope".into()
        }
    );
}

#[test]
fn a_buckets_replica_count_changes_its_definition_not_its_map() {
    let mut state = two_buckets(2);
    let map = state.map("default").unwrap().clone();
    let set = |replicas| MetaCommand::SetBucketReplicas {
        name: "default".into(),
        replicas,
    };
    assert_eq!(
        ok(&mut state, set(2)),
        Applied::BucketReplicasSet { changed: true }
    );
    assert_eq!(state.bucket("default").unwrap().replicas, 2);
    assert_eq!(
        state.map("default"),
        Some(&map),
        "the next rebalance moves copies"
    );
    assert_eq!(
        ok(&mut state, set(2)),
        Applied::BucketReplicasSet { changed: false }
    );
    assert!(matches!(
        refused(&mut state, set(4)),
        Rejection::Bucket(BucketError::Replicas { .. })
    ));
    assert_eq!(state.check(), Ok(()));
}

#[test]
fn a_buckets_durability_minimum_is_edited_and_an_ephemeral_one_cannot_persist() {
    let mut state = two_buckets(2);
    let set = |name: &str, level| MetaCommand::SetBucketDurabilityMin {
        name: name.into(),
        level,
    };
    let persist = Some(DurabilityLevel::PersistToMajority);
    assert_eq!(
        ok(&mut state, set("default", persist)),
        Applied::BucketDurabilityMinSet { changed: true }
    );
    assert_eq!(state.bucket("default").unwrap().durability_min, persist);
    assert_eq!(
        ok(&mut state, set("default", persist)),
        Applied::BucketDurabilityMinSet { changed: false }
    );
    // The level crosses the log under Couchbase's REST name, and reads back.
    let json = serde_json::to_string(&set("default", persist)).unwrap();
    assert!(json.contains("\"persistToMajority\""), "{json}");
    let back: MetaCommand = serde_json::from_str(&json).unwrap();
    assert_eq!(back, set("default", persist));
    // A definition without the field (logged before it existed) has no minimum.
    let mut def = serde_json::to_value(state.bucket("other").unwrap()).unwrap();
    assert!(def.get("durability_min").is_none(), "none is not written");
    def["durability_min"] = serde_json::json!("majorityAndPersistActive");
    let read: BucketDef = serde_json::from_value(def).unwrap();
    assert_eq!(
        read.durability_min,
        Some(DurabilityLevel::MajorityAndPersistOnMaster)
    );

    let mut ephemeral = state.bucket("other").unwrap().clone();
    ephemeral.name = "cache".into();
    ephemeral.kind = BucketKind::Ephemeral;
    ok(&mut state, MetaCommand::DefineBucket { bucket: ephemeral });
    assert_eq!(
        ok(&mut state, set("cache", Some(DurabilityLevel::Majority))),
        Applied::BucketDurabilityMinSet { changed: true }
    );
    let before = state.clone();
    assert!(matches!(
        refused(&mut state, set("cache", persist)),
        Rejection::Bucket(BucketError::EphemeralDurability { .. })
    ));
    assert_eq!(state, before, "a refused edit changes nothing");
    assert_eq!(state.check(), Ok(()));
}

#[test]
fn each_bucket_has_its_own_map_and_revisions() {
    let mut state = two_buckets(3);
    assert_eq!(state.map("other").unwrap().vbmap().replicas(), 2);
    assert_eq!(state.map("default").unwrap().vbmap().replicas(), 1);
    // A move in one bucket does not make the other's plan stale.
    let swapped = Chain::new(Some(NodeId(1)), vec![Some(NodeId(0))]);
    let chains = |bucket: &str, rev| MetaCommand::SetChains {
        bucket: bucket.into(),
        expected_rev: Rev(rev),
        chains: vec![(0, swapped.clone())],
    };
    assert_eq!(
        ok(&mut state, chains("default", 1)),
        Applied::MapSet { rev: Rev(2) }
    );
    assert_eq!(state.rev("other"), Some(Rev(1)));
    // `other` has 2 replicas: a chain of one replica does not fit it.
    assert!(matches!(
        refused(&mut state, chains("other", 1)),
        Rejection::Map(_)
    ));
    assert_eq!(
        refused(&mut state, chains("nope", 1)),
        Rejection::NoSuchBucket {
            name: "nope".into()
        }
    );
    // A moved node is moved in every map that lists it.
    let (moved, applied) = move_to(&mut state, 2, 15000);
    assert_eq!(
        applied,
        Applied::NodeMoved {
            id: NodeId(2),
            revs: vec![("default".into(), Rev(3)), ("other".into(), Rev(2))]
        }
    );
    assert!(state.maps().all(|(_, m)| m.nodes().contains(&moved)));
    // Deleting one bucket leaves the other as it was.
    let other = state.buckets()["other"].clone();
    ok(
        &mut state,
        MetaCommand::DeleteBucket {
            name: "default".into(),
        },
    );
    assert_eq!(state.buckets().len(), 1);
    assert_eq!(state.buckets()["other"], other);
    assert_eq!(state.check(), Ok(()));
}

#[test]
fn a_failover_publishes_every_buckets_next_map_at_once() {
    let mut state = two_buckets(3);
    let next = |bucket: &str| BucketVbmap {
        bucket: bucket.into(),
        expected_rev: Rev(1),
        vbmap: fail_over(state.map(bucket).unwrap().vbmap(), &[NodeId(2)]).map,
    };
    let (default, other) = (next("default"), next("other"));
    let cmd = |maps| {
        MetaCommand::FailOver(FailOverCommand {
            nodes: vec![NodeId(2)],
            maps,
        })
    };
    assert_eq!(
        refused(&mut state, cmd(vec![default.clone()])),
        Rejection::MissingBucketMap {
            name: "other".into()
        }
    );
    assert_eq!(
        refused(&mut state, cmd(vec![default.clone(), default.clone()])),
        Rejection::DuplicateBucket {
            name: "default".into()
        }
    );
    let mut stale = other.clone();
    stale.expected_rev = Rev(7);
    assert!(matches!(
        refused(&mut state, cmd(vec![default.clone(), stale])),
        Rejection::StaleRev { .. }
    ));
    assert_eq!(
        ok(&mut state, cmd(vec![other, default])),
        Applied::FailedOver {
            revs: vec![("default".into(), Rev(2)), ("other".into(), Rev(2))],
            rebalance_aborted: false
        }
    );
    for (_, map) in state.maps() {
        assert!(map.nodes().iter().all(|n| n.id != NodeId(2)));
    }
}

#[test]
fn a_rebalance_finishes_only_once_every_bucket_left_the_ejected_nodes() {
    let mut state = two_buckets(3);
    let target = vec![NodeId(0), NodeId(1)];
    ok(
        &mut state,
        MetaCommand::StartRebalance {
            target: target.clone(),
        },
    );
    // Buckets cannot come or go meanwhile: the rebalance would miss them.
    assert_eq!(
        refused(&mut state, define_named("late")),
        Rejection::RebalanceRunning
    );
    assert_eq!(
        refused(
            &mut state,
            MetaCommand::DeleteBucket {
                name: "other".into()
            }
        ),
        Rejection::RebalanceRunning
    );
    let move_out = |state: &mut ClusterState, bucket: &str, replicas| {
        let vbmap = place(&target, 8, replicas).unwrap();
        let set = MetaCommand::SetMap {
            bucket: bucket.into(),
            expected_rev: state.rev(bucket),
            nodes: target.clone(),
            vbmap,
        };
        ok(state, set);
    };
    move_out(&mut state, "default", 1);
    assert_eq!(
        refused(&mut state, MetaCommand::FinishRebalance {}),
        Rejection::RebalanceIncomplete {
            bucket: "other".into(),
            id: NodeId(2)
        }
    );
    move_out(&mut state, "other", 1);
    assert_eq!(
        ok(&mut state, MetaCommand::FinishRebalance {}),
        Applied::RebalanceFinished {
            ejected: vec![NodeId(2)]
        }
    );
}

#[test]
fn states_and_commands_from_before_named_buckets_still_read() {
    // A state as it was saved with one `bucket` and one `map`.
    let state = cluster(2);
    let mut doc = serde_json::to_value(&state).unwrap();
    let entry = doc["buckets"]["default"].take();
    doc.as_object_mut().unwrap().remove("buckets");
    doc["bucket"] = entry["def"].clone();
    doc["map"] = entry["map"].clone();
    let old: ClusterState = serde_json::from_value(doc.clone()).unwrap();
    assert_eq!(old, state);
    // A map without a bucket is caught by `check`, not dropped.
    doc["bucket"] = serde_json::Value::Null;
    let orphan: ClusterState = serde_json::from_value(doc).unwrap();
    assert!(matches!(orphan.check(), Err(StateError::BadBucket { .. })));
    // Commands as they were logged: no bucket named (the only bucket), a failover's one
    // map at the top, revisions on the rebalance's start and finish.
    let vbmap = state.map("default").unwrap().vbmap().clone();
    let set = serde_json::json!({"SetMap": {
        "expected_rev": 1, "nodes": [0, 1], "vbmap": vbmap}});
    let set: MetaCommand = serde_json::from_value(set).unwrap();
    let mut replayed = state.clone();
    assert_eq!(ok(&mut replayed, set), Applied::MapSet { rev: Rev(2) });
    let out = fail_over(&vbmap, &[NodeId(1)]);
    let fo = serde_json::json!({"FailOver": {
        "nodes": [1], "expected_rev": 2, "vbmap": out.map}});
    let fo: MetaCommand = serde_json::from_value(fo).unwrap();
    assert_eq!(
        fo,
        failover(vec![NodeId(1)], 2, out.map).with_bucket_unnamed()
    );
    assert!(matches!(ok(&mut replayed, fo), Applied::FailedOver { .. }));
    let start = serde_json::json!({"StartRebalance": {"target": [0], "expected_rev": 3}});
    let start: MetaCommand = serde_json::from_value(start).unwrap();
    assert_eq!(
        start,
        MetaCommand::StartRebalance {
            target: vec![NodeId(0)]
        }
    );
    let finish = serde_json::json!({"FinishRebalance": {"expected_rev": 3}});
    let finish: MetaCommand = serde_json::from_value(finish).unwrap();
    assert_eq!(finish, MetaCommand::FinishRebalance {});
    // With two buckets, an unnamed bucket names none of them.
    let mut two = two_buckets(2);
    let set = MetaCommand::SetMap {
        bucket: String::new(),
        expected_rev: Some(Rev(1)),
        nodes: vec![NodeId(0), NodeId(1)],
        vbmap,
    };
    assert_eq!(
        refused(&mut two, set),
        Rejection::NoSuchBucket {
            name: String::new()
        }
    );
}

impl MetaCommand {
    /// The same failover, its maps' buckets unnamed as in commands logged before buckets
    /// were named.
    fn with_bucket_unnamed(mut self) -> MetaCommand {
        if let MetaCommand::FailOver(cmd) = &mut self {
            for m in &mut cmd.maps {
                m.bucket.clear();
            }
        }
        self
    }
}

#[test]
fn bucket_definitions_are_validated() {
    let check = |f: fn(&mut BucketDef)| {
        let mut b = bucket();
        f(&mut b);
        b.validate()
    };
    assert_eq!(check(|_| {}), Ok(()));
    assert!(matches!(
        check(|b| b.name.clear()),
        Err(BucketError::NameLength { .. })
    ));
    assert_eq!(check(|b| b.name = ".x".into()), Err(BucketError::NameChars));
    assert_eq!(
        check(|b| b.name = "a b".into()),
        Err(BucketError::NameChars)
    );
    assert!(matches!(
        check(|b| b.uuid = "x/y".into()),
        Err(BucketError::Uuid { .. })
    ));
    assert!(matches!(
        check(|b| b.vbuckets = 0),
        Err(BucketError::Vbuckets { .. })
    ));
    assert_eq!(check(|b| b.quota_bytes = 0), Err(BucketError::ZeroQuota));
}
