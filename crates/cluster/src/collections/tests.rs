//! The manifest's rules, table by table: names, ids and their counters, the uid, what a drop
//! takes with it, the queries the data path asks, the JSON the SDKs read, and the invariants
//! a manifest read back must hold.

use super::*;
use ManifestError as E;

/// A manifest with scope `s1` (id 8) holding `c1` (id 8, maxTTL 100) and `c2` (id 9), and an
/// empty scope `s2` (id 9): uid 4.
fn sample() -> Manifest {
    let mut m = Manifest::new();
    m.create_scope("s1").unwrap();
    m.create_collection("s1", "c1", 100).unwrap();
    m.create_collection("s1", "c2", 0).unwrap();
    m.create_scope("s2").unwrap();
    m
}

/// A change to try on a manifest.
type Change = Box<dyn FnOnce(&mut Manifest) -> Result<u64, E>>;

/// Applies a change that must be refused, and checks it changed nothing.
fn refused(m: &mut Manifest, change: impl FnOnce(&mut Manifest) -> Result<u64, E>) -> E {
    let before = m.clone();
    let err = change(m).expect_err("must be refused");
    assert_eq!(*m, before, "refused with {err:?} but changed the manifest");
    err
}

#[test]
fn names_follow_couchbases_rules() {
    let longest = "a".repeat(NAME_BYTES_MAX);
    let too_long = "a".repeat(NAME_BYTES_MAX + 1);
    let table: &[(&str, Result<(), &str>)] = &[
        ("s", Ok(())),
        ("Orders-2024_v%1", Ok(())),
        ("9lives", Ok(())),
        ("-dash-first", Ok(())),
        (longest.as_str(), Ok(())),
        ("_default", Ok(())),
        ("", Err("length")),
        (too_long.as_str(), Err("length")),
        ("a b", Err("chars")),
        ("a.b", Err("chars")),
        ("a/b", Err("chars")),
        ("é", Err("chars")),
        ("_system", Err("start")),
        ("%x", Err("start")),
        ("_", Err("start")),
    ];
    for (name, want) in table {
        let got = check_name(name).map_err(|e| match e {
            E::NameLength { .. } => "length",
            E::NameChars { .. } => "chars",
            E::NameStart { .. } => "start",
            other => panic!("{name:?}: {other:?}"),
        });
        assert_eq!(got, *want, "{name:?}");
    }
}

#[test]
fn a_new_manifest_holds_only_the_default_scope_and_collection() {
    let m = Manifest::new();
    assert_eq!(m, Manifest::default());
    assert_eq!(m.uid(), 0);
    assert_eq!(m.scope_id("_default"), Ok(0));
    assert_eq!(m.collection_id("_default", "_default"), Ok(0));
    assert!(m.has_collection(0));
    assert_eq!((m.next_scope_id(), m.next_collection_id()), (8, 8));
    assert_eq!(
        m.collections().collect::<Vec<_>>(),
        [("_default", 0, "_default", 0)]
    );
    assert_eq!(m.check(), Ok(()));
}

#[test]
fn ids_come_from_two_counters_from_8_and_every_change_adds_1_to_the_uid() {
    let mut m = Manifest::new();
    // (change, uid after, the id it created)
    assert_eq!(m.create_scope("s1"), Ok(1));
    assert_eq!(m.scope_id("s1"), Ok(8));
    assert_eq!(m.create_collection("s1", "c1", 0), Ok(2));
    assert_eq!(m.collection_id("s1", "c1"), Ok(8));
    assert_eq!(m.create_collection("_default", "c2", 0), Ok(3));
    assert_eq!(m.collection_id("_default", "c2"), Ok(9));
    assert_eq!(m.create_scope("s2"), Ok(4));
    assert_eq!(m.scope_id("s2"), Ok(9));
    assert_eq!((m.next_scope_id(), m.next_collection_id()), (10, 10));
    // The same names in another scope are other collections.
    assert_eq!(m.create_collection("s2", "c1", 0), Ok(5));
    assert_eq!(m.collection_id("s2", "c1"), Ok(10));
    assert_eq!(m.check(), Ok(()));
}

#[test]
fn refusals_change_nothing_and_say_what_the_sdks_look_for() {
    let mut m = sample();
    let table: Vec<(Change, E, &str)> = vec![
        (
            Box::new(|m| m.create_scope("s1")),
            E::ScopeExists { scope: "s1".into() },
            r#"Scope with name "s1" already exists"#,
        ),
        (
            Box::new(|m| m.create_scope("_default")),
            E::ScopeExists {
                scope: "_default".into(),
            },
            r#"Scope with name "_default" already exists"#,
        ),
        (
            Box::new(|m| m.drop_scope("nope")),
            E::ScopeNotFound {
                scope: "nope".into(),
            },
            r#"Scope with name "nope" is not found"#,
        ),
        (
            Box::new(|m| m.create_collection("s1", "c1", 0)),
            E::CollectionExists {
                scope: "s1".into(),
                collection: "c1".into(),
            },
            r#"Collection with name "c1" already exists"#,
        ),
        (
            Box::new(|m| m.drop_collection("s1", "c9")),
            E::CollectionNotFound {
                scope: "s1".into(),
                collection: "c9".into(),
            },
            r#"Collection with name "c9" is not found"#,
        ),
        // A missing scope is the scope's error, for creates and drops alike.
        (
            Box::new(|m| m.create_collection("nope", "c1", 0)),
            E::ScopeNotFound {
                scope: "nope".into(),
            },
            r#"Scope with name "nope" is not found"#,
        ),
        (
            Box::new(|m| m.drop_collection("nope", "c1")),
            E::ScopeNotFound {
                scope: "nope".into(),
            },
            r#"Scope with name "nope" is not found"#,
        ),
        (
            Box::new(|m| m.drop_scope("_default")),
            E::DropDefaultScope,
            "Deleting the _default scope is not allowed",
        ),
        (
            Box::new(|m| m.drop_collection("_default", "_default")),
            E::DropDefaultCollection,
            "the _default collection of the _default scope cannot be dropped",
        ),
        // `_default` is there from the start, in the `_default` scope only.
        (
            Box::new(|m| m.create_collection("s2", "_default", 0)),
            E::NameStart {
                name: "_default".into(),
            },
            "the first character must not be _ or %",
        ),
        (
            Box::new(|m| m.create_collection("_default", "_default", 0)),
            E::CollectionExists {
                scope: "_default".into(),
                collection: "_default".into(),
            },
            r#"Collection with name "_default" already exists"#,
        ),
        (
            Box::new(|m| m.create_scope("bad name")),
            E::NameChars {
                name: "bad name".into(),
            },
            "can only contain characters A-Z, a-z, 0-9",
        ),
        (
            Box::new(|m| m.create_collection("s1", "c3", MAX_TTL_S_MAX + 1)),
            E::MaxTtl {
                max_ttl_s: MAX_TTL_S_MAX + 1,
                max: MAX_TTL_S_MAX,
            },
            "maxTTL 2147483648 s",
        ),
    ];
    for (change, want, text) in table {
        let err = refused(&mut m, change);
        assert_eq!(err, want);
        let message = err.to_string();
        assert!(message.contains(text), "{message:?} lacks {text:?}");
        assert_eq!(err.is_not_found(), message.contains("is not found"));
    }
    assert_eq!(m.uid(), 4);
}

#[test]
fn messages_never_confuse_the_java_sdks_scope_match() {
    // Java matches `.*Scope.+not found.*` (and `already exists`) before the collection
    // patterns: a collection's message must not contain "Scope".
    let collection = [
        E::CollectionExists {
            scope: "s".into(),
            collection: "c".into(),
        },
        E::CollectionNotFound {
            scope: "s".into(),
            collection: "c".into(),
        },
    ];
    for e in collection {
        assert!(!e.to_string().contains("Scope"), "{e}");
    }
}

#[test]
fn dropping_a_scope_drops_its_collections_and_ids_are_never_reused() {
    let mut m = sample();
    let c1 = m.collection_id("s1", "c1").unwrap();
    let c2 = m.collection_id("s1", "c2").unwrap();
    let s1 = m.scope_id("s1").unwrap();
    assert_eq!(m.collection_ids_of_scope(s1), [c1, c2]);
    assert_eq!(m.drop_scope("s1"), Ok(5));
    assert_eq!(m.scope_id("s1"), Err(Lookup::UnknownScope));
    for cid in [c1, c2] {
        assert!(!m.has_collection(cid));
        assert!(m.is_dropped_collection(cid));
        assert_eq!((m.scope_of(cid), m.max_ttl_s(cid)), (None, None));
    }
    assert_eq!(m.collection_ids_of_scope(s1), Vec::<u32>::new());
    // Created again under the same names: new ids.
    m.create_scope("s1").unwrap();
    m.create_collection("s1", "c1", 0).unwrap();
    assert_eq!(m.scope_id("s1"), Ok(10));
    assert_eq!(m.collection_id("s1", "c1"), Ok(10));
    assert!(m.is_dropped_collection(c1), "the old id stays dropped");
    assert_eq!(m.drop_collection("s1", "c1"), Ok(8));
    assert_eq!(m.collection_id("s1", "c1"), Err(Lookup::UnknownCollection));
    assert!(m.is_dropped_collection(10));
    assert_eq!(m.check(), Ok(()));
}

#[test]
fn the_data_paths_queries() {
    let m = sample();
    let c1 = m.collection_id("s1", "c1").unwrap();
    assert_eq!(c1, 8);
    assert_eq!(
        m.collection_id("s1", "nope"),
        Err(Lookup::UnknownCollection)
    );
    assert_eq!(m.collection_id("nope", "c1"), Err(Lookup::UnknownScope));
    assert_eq!(m.scope_id("nope"), Err(Lookup::UnknownScope));
    // (cid, live, dropped, scope, maxTTL)
    let table = [
        (0, true, false, Some(0), Some(0)),
        (1, false, false, None, None),
        (7, false, false, None, None),
        (8, true, false, Some(8), Some(100)),
        (9, true, false, Some(8), Some(0)),
        (10, false, false, None, None),
        (u32::MAX, false, false, None, None),
    ];
    for (cid, live, dropped, scope, ttl) in table {
        assert_eq!(m.has_collection(cid), live, "{cid}");
        assert_eq!(m.is_dropped_collection(cid), dropped, "{cid}");
        assert_eq!(m.scope_of(cid), scope, "{cid}");
        assert_eq!(m.max_ttl_s(cid), ttl, "{cid}");
    }
    assert_eq!(m.collection_ids_of_scope(0), [0]);
    assert_eq!(m.collection_ids_of_scope(9), Vec::<u32>::new());
    assert_eq!(
        m.collections().collect::<Vec<_>>(),
        [
            ("_default", 0, "_default", 0),
            ("s1", 8, "c1", 8),
            ("s1", 8, "c2", 9)
        ]
    );
}

#[test]
fn the_json_is_couchbases() {
    let mut m = sample();
    for i in 0..8 {
        m.create_collection("s2", &format!("x{i}"), 0).unwrap();
    }
    m.drop_scope("s2").unwrap();
    m.create_collection("_default", "big", 3600).unwrap();
    // uid 4 + 8 + 2 = 14 = "e"; `big` is collection 18 = "12".
    let want = concat!(
        r#"{"scopes":["#,
        r#"{"collections":[{"name":"_default","uid":"0"},{"maxTTL":3600,"name":"big","uid":"12"}],"#,
        r#""name":"_default","uid":"0"},"#,
        r#"{"collections":[{"maxTTL":100,"name":"c1","uid":"8"},{"name":"c2","uid":"9"}],"#,
        r#""name":"s1","uid":"8"}"#,
        r#"],"uid":"e"}"#
    );
    assert_eq!(m.to_json().to_string(), want);
    assert_eq!(m.uid_hex(), "e");
}

#[test]
fn limits_hold() {
    let mut m = Manifest::new();
    for i in 1..SCOPES_PER_BUCKET_MAX {
        m.create_scope(&format!("s{i}")).unwrap();
    }
    let max = SCOPES_PER_BUCKET_MAX;
    assert_eq!(
        refused(&mut m, |m| m.create_scope("one-more")),
        E::TooManyScopes { max }
    );
    for i in 1..COLLECTIONS_PER_BUCKET_MAX {
        m.create_collection(&format!("s{}", i % 7 + 1), &format!("c{i}"), 0)
            .unwrap();
    }
    let max = COLLECTIONS_PER_BUCKET_MAX;
    assert_eq!(
        refused(&mut m, |m| m.create_collection("_default", "one-more", 0)),
        E::TooManyCollections { max }
    );
    assert_eq!(m.check(), Ok(()));
    m.drop_collection("s1", "c7").unwrap();
    m.create_collection("_default", "one-more", 0).unwrap();
}

#[test]
fn ids_run_out_without_wrapping() {
    let mut m = Manifest::new();
    m.next_collection_id = u32::MAX - 1;
    let err = refused(&mut m, |m| m.create_collection("_default", "c", 0));
    assert!(matches!(err, E::IdsExhausted { .. }), "{err:?}");
    m.next_scope_id = u32::MAX - 1;
    let err = refused(&mut m, |m| m.create_scope("s"));
    assert!(matches!(err, E::IdsExhausted { .. }), "{err:?}");
}

#[test]
fn a_manifest_round_trips_through_json_and_is_checked() {
    let m = sample();
    let stored = serde_json::to_value(&m).unwrap();
    let back: Manifest = serde_json::from_value(stored.clone()).unwrap();
    assert_eq!(back, m);
    assert!(back.has_collection(9), "the index is rebuilt");
    assert_eq!(back.check(), Ok(()));
    // (what is broken, the invariant that catches it)
    type Break = fn(&mut serde_json::Value);
    let table: [(Break, &str); 7] = [
        (|v| v["scopes"][0]["name"] = "x".into(), "NoDefault"),
        (|v| v["next_scope_id"] = 3.into(), "Counters"),
        (|v| v["scopes"][1]["id"] = 9.into(), "DuplicateId"),
        (|v| v["scopes"][1]["id"] = 12.into(), "Unallocated"),
        (|v| v["scopes"][2]["name"] = "s1".into(), "DuplicateName"),
        (
            |v| v["scopes"][1]["collections"][1]["name"] = "_x".into(),
            "BadName",
        ),
        (
            |v| v["scopes"][1]["collections"][1]["max_ttl_s"] = u32::MAX.into(),
            "MaxTtl",
        ),
    ];
    for (f, want) in table {
        let mut doc = stored.clone();
        f(&mut doc);
        let bad: Manifest = serde_json::from_value(doc).unwrap();
        let err = bad.check().expect_err(want);
        assert!(format!("{err:?}").starts_with(want), "{want}: {err:?}");
    }
}
