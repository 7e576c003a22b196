//! `apply` on a bucket's collections: scopes and collections created and dropped through
//! the replicated metadata, refusals that change nothing, each bucket's manifest its own,
//! and states saved before there were collections.

use super::*;
use crate::collections::{Lookup, Manifest, ManifestError};

fn create_scope(bucket: &str, name: &str) -> MetaCommand {
    MetaCommand::CreateScope {
        bucket: bucket.into(),
        name: name.into(),
    }
}

fn create_collection(bucket: &str, scope: &str, name: &str, max_ttl_s: u32) -> MetaCommand {
    MetaCommand::CreateCollection {
        bucket: bucket.into(),
        scope: scope.into(),
        name: name.into(),
        max_ttl_s,
    }
}

fn manifest<'a>(state: &'a ClusterState, bucket: &str) -> &'a Manifest {
    &state.buckets()[bucket].manifest
}

#[test]
fn scopes_and_collections_change_the_buckets_manifest_and_its_uid() {
    let mut state = cluster(2);
    let changed = |uid| Applied::ManifestChanged { uid };
    assert_eq!(ok(&mut state, create_scope("default", "s1")), changed(1));
    let create = create_collection("default", "s1", "c1", 60);
    assert_eq!(ok(&mut state, create), changed(2));
    let m = manifest(&state, "default");
    assert_eq!(m.collection_id("s1", "c1"), Ok(8));
    assert_eq!(m.max_ttl_s(8), Some(60));
    let drop = MetaCommand::DropCollection {
        bucket: "default".into(),
        scope: "s1".into(),
        name: "c1".into(),
    };
    assert_eq!(ok(&mut state, drop), changed(3));
    assert!(manifest(&state, "default").is_dropped_collection(8));
    ok(&mut state, create_collection("default", "s1", "c2", 0));
    let drop = MetaCommand::DropScope {
        bucket: "default".into(),
        name: "s1".into(),
    };
    assert_eq!(ok(&mut state, drop), changed(5));
    let m = manifest(&state, "default");
    assert_eq!(m.scope_id("s1"), Err(Lookup::UnknownScope));
    assert!(!m.has_collection(9));
    assert_eq!(state.check(), Ok(()));
}

#[test]
fn a_collections_max_ttl_is_changed_in_place() {
    let mut state = cluster(1);
    ok(&mut state, create_scope("default", "s1"));
    ok(&mut state, create_collection("default", "s1", "c1", 60));
    let set = |name: &str, max_ttl_s| MetaCommand::SetCollectionMaxTtl {
        bucket: "default".into(),
        scope: "s1".into(),
        name: name.into(),
        max_ttl_s,
    };
    assert_eq!(
        ok(&mut state, set("c1", 3600)),
        Applied::ManifestChanged { uid: 3 }
    );
    let m = manifest(&state, "default");
    assert_eq!(
        (m.collection_id("s1", "c1"), m.max_ttl_s(8)),
        (Ok(8), Some(3600))
    );
    ok(&mut state, set("c1", 0));
    assert_eq!(manifest(&state, "default").max_ttl_s(8), Some(0));
    // Refused: an unknown collection, a maxTTL past the limit; nothing changes.
    let before = manifest(&state, "default").clone();
    for cmd in [set("nope", 10), set("c1", u32::MAX)] {
        assert!(apply(&mut state, &cmd).is_err(), "{cmd:?}");
    }
    assert_eq!(manifest(&state, "default"), &before);
}

#[test]
fn refused_collection_changes_change_nothing() {
    let mut state = cluster(1);
    ok(&mut state, create_scope("default", "s1"));
    let table = [
        (
            create_scope("default", "s1"),
            Rejection::Collections(ManifestError::ScopeExists { scope: "s1".into() }),
        ),
        (
            create_collection("default", "nope", "c", 0),
            Rejection::Collections(ManifestError::ScopeNotFound {
                scope: "nope".into(),
            }),
        ),
        (
            MetaCommand::DropCollection {
                bucket: "default".into(),
                scope: "_default".into(),
                name: "_default".into(),
            },
            Rejection::Collections(ManifestError::DropDefaultCollection),
        ),
        (
            MetaCommand::DropScope {
                bucket: "default".into(),
                name: "_default".into(),
            },
            Rejection::Collections(ManifestError::DropDefaultScope),
        ),
        (
            create_scope("nope", "s2"),
            Rejection::NoSuchBucket {
                name: "nope".into(),
            },
        ),
    ];
    for (cmd, want) in table {
        assert_eq!(refused(&mut state, cmd), want);
    }
    // The SDKs read the manifest's own words through the rejection.
    let exists = refused(&mut state, create_scope("default", "s1"));
    assert_eq!(exists.to_string(), r#"Scope with name "s1" already exists"#);
}

#[test]
fn each_bucket_has_its_own_manifest() {
    let mut state = cluster(1);
    let mut other = bucket();
    other.name = "other".into();
    other.uuid = "1a2b".into();
    ok(&mut state, MetaCommand::DefineBucket { bucket: other });
    ok(&mut state, create_scope("default", "s1"));
    assert_eq!(manifest(&state, "other"), &Manifest::new());
    // The same name in another bucket is another scope, with the ids that bucket hands out.
    ok(&mut state, create_scope("other", "s1"));
    assert_eq!(manifest(&state, "other").scope_id("s1"), Ok(8));
    assert_eq!(manifest(&state, "other").uid(), 1);
    // A bucket deleted and defined again starts over.
    ok(
        &mut state,
        MetaCommand::DeleteBucket {
            name: "other".into(),
        },
    );
    let mut again = bucket();
    again.name = "other".into();
    again.uuid = "3c4d".into();
    ok(&mut state, MetaCommand::DefineBucket { bucket: again });
    assert_eq!(manifest(&state, "other"), &Manifest::new());
}

#[test]
fn manifests_are_saved_with_the_state_and_old_states_read_the_default() {
    let mut state = cluster(2);
    ok(&mut state, create_scope("default", "s1"));
    ok(&mut state, create_collection("default", "s1", "c1", 5));
    let json = serde_json::to_string(&state).unwrap();
    let back: ClusterState = serde_json::from_str(&json).unwrap();
    assert_eq!(back, state);
    assert_eq!(back.check(), Ok(()));
    assert!(manifest(&back, "default").has_collection(8));
    // A state saved before collections: no manifest, read as the default one.
    let mut doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    doc["buckets"]["default"]
        .as_object_mut()
        .unwrap()
        .remove("manifest");
    let old: ClusterState = serde_json::from_value(doc.clone()).unwrap();
    assert_eq!(manifest(&old, "default"), &Manifest::new());
    assert_eq!(old.check(), Ok(()));
    // A broken manifest is caught by `check`.
    doc["buckets"]["default"]["manifest"] = serde_json::to_value(Manifest::new()).unwrap();
    doc["buckets"]["default"]["manifest"]["scopes"][0]["collections"] = serde_json::json!([]);
    let broken: ClusterState = serde_json::from_value(doc).unwrap();
    assert!(matches!(
        broken.check(),
        Err(StateError::BadManifest { .. })
    ));
}

#[test]
fn collection_commands_and_answers_round_trip_through_json() {
    let cmds = [
        create_scope("default", "s1"),
        MetaCommand::DropScope {
            bucket: "default".into(),
            name: "s1".into(),
        },
        create_collection("default", "s1", "c1", 7),
        MetaCommand::DropCollection {
            bucket: "default".into(),
            scope: "s1".into(),
            name: "c1".into(),
        },
    ];
    for cmd in cmds {
        let json = serde_json::to_string(&cmd).unwrap();
        assert_eq!(serde_json::from_str::<MetaCommand>(&json).unwrap(), cmd);
    }
    let responses: [MetaResponse; 2] = [
        Ok(Applied::ManifestChanged { uid: 9 }),
        Err(Rejection::Collections(ManifestError::CollectionNotFound {
            scope: "s1".into(),
            collection: "c1".into(),
        })),
    ];
    for r in responses {
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<MetaResponse>(&json).unwrap(), r);
    }
}
