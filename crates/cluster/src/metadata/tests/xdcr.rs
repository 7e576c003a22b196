//! Remote cluster references, replications and the cluster uuid.

use super::*;
use crate::metadata::xdcr::{
    replication_id, ReplicationSettings, XdcrTargetAck, FILTER_BYTES_MAX,
    OPTIMISTIC_THRESHOLD_DEFAULT, OPTIMISTIC_THRESHOLD_MAX, REMOTES_MAX,
};

fn remote(name: &str, uuid: &str) -> RemoteCluster {
    RemoteCluster {
        name: name.to_string(),
        uuid: uuid.to_string(),
        hostname: "127.0.0.1:9100".to_string(),
        username: "Administrator".to_string(),
        password: "password".to_string(),
        ca_pem: None,
    }
}

fn replication(remote_uuid: &str, to_cluster: &str) -> ReplicationDef {
    ReplicationDef {
        id: replication_id(remote_uuid, "default", "target"),
        from_bucket: "default".to_string(),
        to_cluster: to_cluster.to_string(),
        to_bucket: "target".to_string(),
        filter_expression: None,
        paused: false,
        restreams: 0,
        settings: ReplicationSettings::default(),
    }
}

fn put(remote: RemoteCluster, create: bool) -> MetaCommand {
    MetaCommand::PutRemoteCluster { remote, create }
}

fn with_remote() -> ClusterState {
    let mut state = cluster(2);
    ok(
        &mut state,
        MetaCommand::SetClusterUuid {
            uuid: "aaaa".into(),
        },
    );
    ok(&mut state, put(remote("east", "bbbb"), true));
    state
}

#[test]
fn the_first_cluster_uuid_stays() {
    let mut state = cluster(1);
    let set = |uuid: &str| MetaCommand::SetClusterUuid { uuid: uuid.into() };
    assert_eq!(
        ok(&mut state, set("c0ffee")),
        Applied::ClusterUuidSet { set: true }
    );
    assert_eq!(
        ok(&mut state, set("beef")),
        Applied::ClusterUuidSet { set: false }
    );
    assert_eq!(state.uuid(), "c0ffee");
    assert!(matches!(
        refused(&mut state, set("")),
        Rejection::BadRemote { .. }
    ));
    assert!(matches!(
        refused(&mut state, set("a/b")),
        Rejection::BadRemote { .. }
    ));
}

#[test]
fn remotes_are_created_once_replaced_and_deleted() {
    let mut state = with_remote();
    let dup = refused(&mut state, put(remote("east", "cccc"), true));
    assert_eq!(
        dup,
        Rejection::RemoteExists {
            name: "east".into()
        }
    );
    let missing = refused(&mut state, put(remote("west", "cccc"), false));
    assert_eq!(
        missing,
        Rejection::NoSuchRemote {
            name: "west".into()
        }
    );
    let mut moved = remote("east", "bbbb");
    moved.hostname = "127.0.0.2:9100".into();
    ok(&mut state, put(moved.clone(), false));
    assert_eq!(state.remotes()["east"], moved);
    let own = refused(&mut state, put(remote("self", "aaaa"), true));
    assert!(matches!(own, Rejection::BadRemote { .. }), "{own}");
    for bad in [remote("", "bbbb"), remote("a/b", "bbbb"), remote("x", "")] {
        assert!(matches!(
            refused(&mut state, put(bad, true)),
            Rejection::BadRemote { .. }
        ));
    }
    ok(
        &mut state,
        MetaCommand::DeleteRemoteCluster {
            name: "east".into(),
        },
    );
    assert!(state.remotes().is_empty());
    let gone = refused(
        &mut state,
        MetaCommand::DeleteRemoteCluster {
            name: "east".into(),
        },
    );
    assert_eq!(
        gone,
        Rejection::NoSuchRemote {
            name: "east".into()
        }
    );
}

#[test]
fn remotes_are_bounded() {
    let mut state = cluster(1);
    for i in 0..REMOTES_MAX {
        ok(
            &mut state,
            put(remote(&format!("r{i}"), &format!("u{i}")), true),
        );
    }
    let full = refused(&mut state, put(remote("more", "u-more"), true));
    assert_eq!(full, Rejection::TooManyRemotes { max: REMOTES_MAX });
}

#[test]
fn replications_need_their_remote_and_bucket() {
    let mut state = with_remote();
    let create = |r: ReplicationDef| MetaCommand::CreateReplication { replication: r };
    let nowhere = refused(&mut state, create(replication("bbbb", "west")));
    assert_eq!(
        nowhere,
        Rejection::NoSuchRemote {
            name: "west".into()
        }
    );
    let wrong_id = refused(&mut state, create(replication("cccc", "east")));
    assert!(
        matches!(wrong_id, Rejection::BadReplication { .. }),
        "{wrong_id}"
    );
    let mut no_bucket = replication("bbbb", "east");
    no_bucket.from_bucket = "nope".into();
    no_bucket.id = replication_id("bbbb", "nope", "target");
    let refusal = refused(&mut state, create(no_bucket));
    assert_eq!(
        refusal,
        Rejection::NoSuchBucket {
            name: "nope".into()
        }
    );

    let r = replication("bbbb", "east");
    ok(&mut state, create(r.clone()));
    let again = refused(&mut state, create(r.clone()));
    assert_eq!(again, Rejection::ReplicationExists { id: r.id.clone() });

    // In use: the reference can neither go nor name another cluster; its address can move.
    let in_use = refused(
        &mut state,
        MetaCommand::DeleteRemoteCluster {
            name: "east".into(),
        },
    );
    assert!(matches!(in_use, Rejection::RemoteInUse { .. }), "{in_use}");
    let other = refused(&mut state, put(remote("east", "dddd"), false));
    assert!(matches!(other, Rejection::RemoteInUse { .. }), "{other}");

    let pause = |paused| MetaCommand::SetReplicationPaused {
        id: r.id.clone(),
        paused,
    };
    ok(&mut state, pause(true));
    assert!(state.replications()[&r.id].paused);
    ok(&mut state, pause(false));
    assert!(!state.replications()[&r.id].paused);

    // Settings: replaced whole, bounded, and kept apart from pausing.
    assert_eq!(
        state.replications()[&r.id].settings.optimistic_threshold,
        OPTIMISTIC_THRESHOLD_DEFAULT
    );
    let set = |settings| MetaCommand::SetReplicationSettings {
        id: r.id.clone(),
        settings,
    };
    let wanted = ReplicationSettings {
        filter_deletion: true,
        filter_expiration: false,
        bypass_expiry: true,
        optimistic_threshold: 0,
    };
    ok(&mut state, set(wanted));
    assert_eq!(state.replications()[&r.id].settings, wanted);
    let too_big = refused(
        &mut state,
        set(ReplicationSettings {
            optimistic_threshold: OPTIMISTIC_THRESHOLD_MAX + 1,
            ..wanted
        }),
    );
    assert!(
        matches!(too_big, Rejection::BadReplication { .. }),
        "{too_big}"
    );
    assert_eq!(state.replications()[&r.id].settings, wanted);
    let unknown = refused(
        &mut state,
        MetaCommand::SetReplicationSettings {
            id: "nope".into(),
            settings: wanted,
        },
    );
    assert!(
        matches!(unknown, Rejection::NoSuchReplication { .. }),
        "{unknown}"
    );

    ok(
        &mut state,
        MetaCommand::DeleteReplication { id: r.id.clone() },
    );
    let gone = refused(
        &mut state,
        MetaCommand::DeleteReplication { id: r.id.clone() },
    );
    assert_eq!(gone, Rejection::NoSuchReplication { id: r.id.clone() });
    ok(
        &mut state,
        MetaCommand::DeleteRemoteCluster {
            name: "east".into(),
        },
    );
}

#[test]
fn checkpoints_are_kept_per_vbucket_and_go_with_their_replication() {
    let mut state = with_remote();
    let r = replication("bbbb", "east");
    let cp = |vb, seqno| XdcrCheckpoint {
        vb,
        vb_uuid: 9,
        seqno,
        snap_start: seqno,
        snap_end: seqno,
        targets: vec![XdcrTargetAck {
            vb,
            uuid: 77,
            seqno: seqno + 100,
        }],
    };
    let save = |checkpoints: Vec<XdcrCheckpoint>| MetaCommand::SaveXdcrCheckpoints {
        id: r.id.clone(),
        restreams: 0,
        checkpoints,
    };
    let early = refused(&mut state, save(vec![cp(1, 5)]));
    assert_eq!(early, Rejection::NoSuchReplication { id: r.id.clone() });
    ok(
        &mut state,
        MetaCommand::CreateReplication {
            replication: r.clone(),
        },
    );
    ok(&mut state, save(vec![cp(1, 5), cp(2, 7)]));
    ok(&mut state, save(vec![cp(1, 9)]));
    let saved = state.xdcr_checkpoints(&r.id).unwrap();
    assert_eq!((saved[&1].seqno, saved[&2].seqno), (9, 7));
    assert_eq!(saved[&1].targets[0].seqno, 109);
    // The bucket has 8 vbuckets.
    let beyond = refused(&mut state, save(vec![cp(8, 1)]));
    assert!(
        matches!(beyond, Rejection::BadReplication { .. }),
        "{beyond}"
    );
    // Target acknowledgements are one per target vbucket, in order.
    let mut twice = cp(3, 1);
    twice.targets.push(twice.targets[0]);
    let repeated = refused(&mut state, save(vec![twice]));
    assert!(
        matches!(repeated, Rejection::BadReplication { .. }),
        "{repeated}"
    );
    ok(
        &mut state,
        MetaCommand::DeleteReplication { id: r.id.clone() },
    );
    assert!(state.xdcr_checkpoints(&r.id).is_none());
    ok(
        &mut state,
        MetaCommand::CreateReplication {
            replication: r.clone(),
        },
    );
    ok(&mut state, save(vec![cp(1, 5)]));
    ok(
        &mut state,
        MetaCommand::DeleteBucket {
            name: "default".into(),
        },
    );
    assert!(state.xdcr_checkpoints(&r.id).is_none());
}

#[test]
fn deleting_a_bucket_deletes_its_replications() {
    let mut state = with_remote();
    let r = replication("bbbb", "east");
    ok(
        &mut state,
        MetaCommand::CreateReplication { replication: r },
    );
    ok(
        &mut state,
        MetaCommand::DeleteBucket {
            name: "default".into(),
        },
    );
    assert!(state.replications().is_empty());
    assert_eq!(state.check(), Ok(()));
}

#[test]
fn a_state_with_replications_round_trips_and_older_states_read_without() {
    let mut state = with_remote();
    ok(
        &mut state,
        MetaCommand::CreateReplication {
            replication: replication("bbbb", "east"),
        },
    );
    let json = serde_json::to_string(&state).unwrap();
    let back: ClusterState = serde_json::from_str(&json).unwrap();
    assert_eq!(back, state);
    let plain = serde_json::to_string(&cluster(1)).unwrap();
    assert!(
        !plain.contains("remotes") && !plain.contains("uuid\":\"\""),
        "{plain}"
    );
    let back: ClusterState = serde_json::from_str(&plain).unwrap();
    assert_eq!(back.uuid(), "");
    assert!(back.remotes().is_empty());
}

#[test]
fn definitions_stored_before_settings_existed_read_with_couchbase_defaults() {
    let old = r#"{"id":"bbbb/default/target","from_bucket":"default","to_cluster":"east",
                  "to_bucket":"target","filter_expression":"^k","paused":true}"#;
    let def: ReplicationDef = serde_json::from_str(old).unwrap();
    assert_eq!(def.settings, ReplicationSettings::default());
    assert!(def.paused);
    let again: ReplicationDef =
        serde_json::from_str(&serde_json::to_string(&def).unwrap()).unwrap();
    assert_eq!(again, def);
}

#[test]
fn a_filter_change_restreams_unless_told_not_to_and_voids_older_reports() {
    let mut state = with_remote();
    let r = replication("bbbb", "east");
    ok(
        &mut state,
        MetaCommand::CreateReplication {
            replication: r.clone(),
        },
    );
    let save = |restreams: u64, seqno: u64| MetaCommand::SaveXdcrCheckpoints {
        id: r.id.clone(),
        restreams,
        checkpoints: vec![XdcrCheckpoint {
            vb: 1,
            vb_uuid: 9,
            seqno,
            snap_start: seqno,
            snap_end: seqno,
            targets: Vec::new(),
        }],
    };
    let filter = |filter: Option<&str>, restream: bool| MetaCommand::SetReplicationFilter {
        id: r.id.clone(),
        filter: filter.map(String::from),
        restream,
    };
    ok(&mut state, save(0, 40));
    // Skipping the re-stream keeps the checkpoints: later changes meet the new filter.
    ok(&mut state, filter(Some("type = \"a\""), false));
    let def = &state.replications()[&r.id];
    assert_eq!(
        (def.filter_expression.as_deref(), def.restreams),
        (Some("type = \"a\""), 0)
    );
    assert_eq!(state.xdcr_checkpoints(&r.id).unwrap()[&1].seqno, 40);
    // A re-stream voids them, here and in any report made before it.
    ok(&mut state, filter(None, true));
    let def = &state.replications()[&r.id];
    assert_eq!((def.filter_expression.as_deref(), def.restreams), (None, 1));
    assert!(state.xdcr_checkpoints(&r.id).is_none());
    let stale = refused(&mut state, save(0, 41));
    assert!(matches!(stale, Rejection::BadReplication { .. }), "{stale}");
    assert!(state.xdcr_checkpoints(&r.id).is_none());
    ok(&mut state, save(1, 3));
    assert_eq!(state.xdcr_checkpoints(&r.id).unwrap()[&1].seqno, 3);
    // Refusals: too long a filter, an unknown replication.
    let long = "x".repeat(FILTER_BYTES_MAX + 1);
    let too_long = refused(&mut state, filter(Some(&long), true));
    assert!(
        matches!(too_long, Rejection::BadReplication { .. }),
        "{too_long}"
    );
    assert_eq!(state.replications()[&r.id].restreams, 1);
    let unknown = refused(
        &mut state,
        MetaCommand::SetReplicationFilter {
            id: "nope".into(),
            filter: None,
            restream: true,
        },
    );
    assert_eq!(unknown, Rejection::NoSuchReplication { id: "nope".into() });
}
