#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use std::collections::BTreeMap;

use serde_json::json;
use sluice_query::ast::IndexKey;
use sluice_query::index_key::{encode_key, prefix_range};
use sluice_query::{DocMeta, Value};
use sluice_types::{Seqno, VbId, VbUuid};

use super::*;
use crate::entry::{entry_of, Doc};

fn def(name: &str, keys: &[&str]) -> IndexDef {
    IndexDef {
        id: IndexId(0),
        name: name.into(),
        bucket: "default".into(),
        scope: "_default".into(),
        collection: "_default".into(),
        collection_id: sluice_types::CollectionId::DEFAULT,
        keys: keys
            .iter()
            .map(|k| IndexKey {
                expr: sluice_query::parse_expression(k).unwrap(),
                descending: false,
                include_missing: false,
            })
            .collect(),
        condition: None,
        primary: keys.is_empty(),
        state: IndexState::Building,
    }
}

fn doc<'a>(key: &'a [u8], body: &'a serde_json::Value) -> Change<'a> {
    Change::Upsert(Doc {
        key,
        body: Some(body),
        meta: DocMeta {
            is_json: true,
            ..DocMeta::default()
        },
    })
}

fn at(seqno: u64) -> VbPosition {
    VbPosition {
        vb_uuid: VbUuid(77),
        seqno: Seqno(seqno),
        snap_start: Seqno(seqno),
        snap_end: Seqno(seqno),
    }
}

/// Every entry of the index, paging `page` entries at a time.
fn scan_all(store: &IndexStore, id: IndexId, page: usize) -> Vec<ScanEntry> {
    let (mut start, end) = (vec![0u8], vec![0xFFu8; 2]);
    let mut out = Vec::new();
    loop {
        let p = store.scan(id, &start, &end, page).unwrap();
        out.extend(p.entries);
        match p.resume {
            Some(next) => start = next,
            None => return out,
        }
    }
}

/// Every (values as JSON, doc key) of the index.
fn all(store: &IndexStore, id: IndexId, page: usize) -> Vec<(Vec<serde_json::Value>, Vec<u8>)> {
    scan_all(store, id, page)
        .into_iter()
        .map(|e| {
            let vals = e.values.into_iter().map(Value::into_json_or_null).collect();
            (vals, e.doc_key)
        })
        .collect()
}

#[test]
fn updates_move_entries_deletes_remove_them_and_scans_see_key_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = IndexStore::open(dir.path(), 1 << 20).unwrap();
    let id = store.create(def("by_status", &["status"])).unwrap().id;
    let (a, b, c) = (
        json!({"status": "open"}),
        json!({"status": "closed"}),
        json!({"x": 1}),
    );
    let vb = VbId(3);
    store
        .apply(
            id,
            vb,
            &[doc(b"k1", &a), doc(b"k2", &a), doc(b"k3", &b)],
            at(3),
        )
        .unwrap();
    assert_eq!(
        all(&store, id, 2),
        vec![
            (vec![json!("closed")], b"k3".to_vec()),
            (vec![json!("open")], b"k1".to_vec()),
            (vec![json!("open")], b"k2".to_vec()),
        ]
    );
    // k1 moves, k2 loses its leading key (no entry), k3 is deleted.
    let applied = store
        .apply(
            id,
            vb,
            &[
                doc(b"k1", &b),
                doc(b"k2", &c),
                Change::Delete { key: b"k3" },
            ],
            at(6),
        )
        .unwrap();
    assert_eq!((applied.entries_added, applied.entries_removed), (1, 3));
    assert_eq!(
        all(&store, id, 10),
        vec![(vec![json!("closed")], b"k1".to_vec())]
    );
    let (start, end) = prefix_range(&[Value::Json(json!("open"))]).unwrap();
    assert!(store.scan(id, &start, &end, 10).unwrap().entries.is_empty());
    assert_eq!(store.positions(id).unwrap()[&vb], at(6));
}

#[test]
fn a_document_changed_twice_in_one_batch_is_written_as_its_last_change_leaves_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = IndexStore::open(dir.path(), 1 << 20).unwrap();
    let id = store.create(def("i", &["v"])).unwrap().id;
    let (one, two) = (json!({"v": 1}), json!({"v": 2}));
    store.apply(id, VbId(0), &[doc(b"k", &one)], at(1)).unwrap();
    // 1 → 2 → 1 → deleted → 2: one removal of 1 and one insertion of 2, nothing else.
    let changes = [
        doc(b"k", &two),
        doc(b"k", &one),
        Change::Delete { key: b"k" },
        doc(b"k", &two),
    ];
    store.apply(id, VbId(0), &changes, at(5)).unwrap();
    assert_eq!(all(&store, id, 10), vec![(vec![json!(2)], b"k".to_vec())]);
    // Back to where it was: nothing to write but the position.
    let applied = store
        .apply(id, VbId(0), &[doc(b"k", &one), doc(b"k", &two)], at(7))
        .unwrap();
    assert_eq!(applied, Applied::default());
}

#[test]
fn names_are_unique_per_keyspace_and_ids_are_never_reused() {
    let dir = tempfile::tempdir().unwrap();
    let store = IndexStore::open(dir.path(), 1 << 20).unwrap();
    let first = store.create(def("i", &["a"])).unwrap().id;
    assert!(matches!(
        store.create(def("i", &["b"])),
        Err(IndexError::Exists { .. })
    ));
    let mut other = def("i", &["a"]);
    other.bucket = "travel".into();
    let second = store.create(other).unwrap().id;
    store.drop_index(first).unwrap();
    assert!(matches!(
        store.positions(first),
        Err(IndexError::NoSuchIndex(_))
    ));
    let third = store.create(def("i", &["a"])).unwrap().id;
    assert!(first < second && second < third);
    assert!(
        all(&store, third, 10).is_empty(),
        "a new index starts empty"
    );
}

#[test]
fn entries_positions_and_definitions_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let v = json!({"a": "x"});
    let (id, primary) = {
        let store = IndexStore::open(dir.path(), 1 << 20).unwrap();
        let id = store.create(def("i", &["a"])).unwrap().id;
        let primary = store.create(def("#primary", &[])).unwrap().id;
        store.set_state(id, IndexState::Online).unwrap();
        for ix in [id, primary] {
            store.apply(ix, VbId(1), &[doc(b"d1", &v)], at(1)).unwrap();
            store.apply(ix, VbId(2), &[doc(b"d2", &v)], at(9)).unwrap();
        }
        (id, primary)
    };
    let store = IndexStore::open(dir.path(), 1 << 20).unwrap();
    assert_eq!(store.definition(id).unwrap().state, IndexState::Online);
    assert!(store.definition(primary).unwrap().primary);
    let want: BTreeMap<VbId, VbPosition> = [(VbId(1), at(1)), (VbId(2), at(9))].into();
    assert_eq!(store.positions(id).unwrap(), want);
    assert_eq!(all(&store, id, 1).len(), 2);
    assert_eq!(
        all(&store, primary, 10),
        vec![(vec![], b"d1".to_vec()), (vec![], b"d2".to_vec())]
    );
}

#[test]
fn clearing_a_vbucket_leaves_the_others_alone_and_an_interrupted_clear_finishes_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let v = json!({"a": 1});
    let keys: Vec<Vec<u8>> = (0..5000).map(|i| format!("key{i}").into_bytes()).collect();
    let id = {
        let store = IndexStore::open(dir.path(), 1 << 20).unwrap();
        let id = store.create(def("i", &["a"])).unwrap().id;
        for (n, chunk) in keys.chunks(1000).enumerate() {
            let vb = VbId(n as u16 % 2);
            let changes: Vec<_> = chunk.iter().map(|k| doc(k, &v)).collect();
            store.apply(id, vb, &changes, at(n as u64 + 1)).unwrap();
        }
        // vb 0 holds chunks 0, 2, 4 (3,000 docs), more than one clear batch.
        assert_eq!(store.clear_vb(id, VbId(0)).unwrap(), 3000);
        assert!(!store.positions(id).unwrap().contains_key(&VbId(0)));
        assert_eq!(all(&store, id, 700).len(), 2000);
        // A crash in the middle of clearing vb 1: the mark is written, nothing removed.
        let mut batch = store.db.batch();
        batch.insert(&store.meta, keys::clearing(id, VbId(1)), []);
        batch.remove(&store.meta, keys::position(id, VbId(1)));
        batch.commit().unwrap();
        id
    };
    let store = IndexStore::open(dir.path(), 1 << 20).unwrap();
    assert!(
        all(&store, id, 100).is_empty(),
        "the clear finished on open"
    );
    assert!(store.positions(id).unwrap().is_empty());
    assert!(store
        .meta
        .prefix(keys::clearing_prefix(id))
        .next()
        .is_none());
}

/// splitmix64: small, seeded, good enough to pick test cases.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn random_body(rng: &mut Rng) -> serde_json::Value {
    let v = |rng: &mut Rng| match rng.below(7) {
        0 => json!(null),
        1 => json!(rng.below(2) == 0),
        2 => json!(rng.below(20) as i64 - 10),
        3 => json!((rng.below(100) as f64) / 8.0),
        4 => json!(format!("s{}", rng.below(10))),
        5 => json!([rng.below(3), "x"]),
        _ => json!({"n": rng.below(3)}),
    };
    let mut m = serde_json::Map::new();
    for f in ["a", "b"] {
        if rng.below(5) != 0 {
            m.insert(f.into(), v(rng));
        }
    }
    serde_json::Value::Object(m)
}

/// Random writes and deletes over 4 vbuckets in random batches, with clears and reopens in
/// between: the index always holds exactly the entries the live documents give.
#[test]
fn the_index_always_holds_what_the_live_documents_give() {
    let seed = std::env::var("INDEX_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_1dea);
    println!("seed {seed} (INDEX_SEED={seed} replays it)");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut store = IndexStore::open(dir.path(), 1 << 20).unwrap();
    let d = store.create(def("ab", &["a", "b"])).unwrap();
    let mut live: BTreeMap<Vec<u8>, (VbId, serde_json::Value)> = BTreeMap::new();
    let mut seqno = 0;
    for round in 0..300 {
        let vb = VbId(rng.below(4) as u16);
        let n = 1 + rng.below(20) as usize;
        let keys: Vec<Vec<u8>> = (0..n)
            .map(|_| format!("v{}-k{}", vb.0, rng.below(30)).into_bytes())
            .collect();
        let bodies: Vec<Option<serde_json::Value>> = (0..n)
            .map(|_| (rng.below(4) != 0).then(|| random_body(&mut rng)))
            .collect();
        let changes: Vec<Change> = keys
            .iter()
            .zip(&bodies)
            .map(|(k, b)| match b {
                Some(body) => doc(k, body),
                None => Change::Delete { key: k },
            })
            .collect();
        seqno += n as u64;
        store.apply(d.id, vb, &changes, at(seqno)).unwrap();
        for (k, b) in keys.iter().zip(bodies) {
            match b {
                Some(body) => live.insert(k.clone(), (vb, body)),
                None => live.remove(k),
            };
        }
        match rng.below(40) {
            0 => {
                let vb = VbId(rng.below(4) as u16);
                store.clear_vb(d.id, vb).unwrap();
                live.retain(|_, (v, _)| *v != vb);
            }
            1 => {
                drop(store);
                store = IndexStore::open(dir.path(), 1 << 20).unwrap();
            }
            _ => {}
        }
        let mut want: Vec<Vec<u8>> = live
            .iter()
            .filter_map(|(k, (_, body))| {
                let c = doc(k, body);
                let Change::Upsert(doc) = c else {
                    unreachable!()
                };
                entry_of(&d, doc).unwrap()
            })
            .collect();
        want.sort();
        let got: Vec<Vec<u8>> = scan_all(&store, d.id, 1 + rng.below(50) as usize)
            .into_iter()
            .map(|e| encode_key(&e.values, &e.doc_key).unwrap())
            .collect();
        assert_eq!(got, want, "seed {seed}, round {round}");
    }
}

#[test]
fn memory_counts_what_the_memtables_hold() {
    let dir = tempfile::tempdir().unwrap();
    let store = IndexStore::open(dir.path(), 1 << 20).unwrap();
    let id = store.create(def("by_status", &["status"])).unwrap().id;
    let before = store.memory().write_buffer_bytes;
    let body = json!({"status": "x".repeat(1000)});
    let keys: Vec<Vec<u8>> = (0..100).map(|i| format!("k{i}").into_bytes()).collect();
    let changes: Vec<Change<'_>> = keys.iter().map(|k| doc(k, &body)).collect();
    store.apply(id, VbId(0), &changes, at(100)).unwrap();
    // 100 entries of over 1 KB each, and their back references, in the memtables.
    assert!(store.memory().write_buffer_bytes >= before + 100_000);
}

#[test]
fn several_vbuckets_apply_in_one_batch_with_each_its_own_position() {
    let dir = tempfile::tempdir().unwrap();
    let store = IndexStore::open(dir.path(), 1 << 20).unwrap();
    let id = store.create(def("i", &["v"])).unwrap().id;
    let (one, two) = (json!({"v": 1}), json!({"v": 2}));
    // The same document key in two vbuckets is two documents (two back entries).
    let parts = [
        VbChanges {
            vb: VbId(3),
            changes: vec![doc(b"a", &one), doc(b"k", &one)],
            to: at(4),
        },
        VbChanges {
            vb: VbId(9),
            changes: vec![doc(b"k", &two)],
            to: at(2),
        },
    ];
    let applied = store.apply_many(id, &parts).unwrap();
    assert_eq!((applied.entries_added, applied.entries_removed), (3, 0));
    assert_eq!(
        all(&store, id, 10),
        vec![
            (vec![json!(1)], b"a".to_vec()),
            (vec![json!(1)], b"k".to_vec()),
            (vec![json!(2)], b"k".to_vec()),
        ]
    );
    let positions = store.positions(id).unwrap();
    assert_eq!((positions[&VbId(3)], positions[&VbId(9)]), (at(4), at(2)));
    // A deletion in one vbucket leaves the other's document alone.
    let del = [VbChanges {
        vb: VbId(3),
        changes: vec![Change::Delete { key: b"k" }],
        to: at(5),
    }];
    store.apply_many(id, &del).unwrap();
    assert_eq!(
        all(&store, id, 10),
        vec![
            (vec![json!(1)], b"a".to_vec()),
            (vec![json!(2)], b"k".to_vec())
        ]
    );
}

#[test]
#[should_panic(expected = "twice in one apply")]
fn a_vbucket_twice_in_one_apply_is_a_bug() {
    let dir = tempfile::tempdir().unwrap();
    let store = IndexStore::open(dir.path(), 1 << 20).unwrap();
    let id = store.create(def("i", &["v"])).unwrap().id;
    let part = VbChanges {
        vb: VbId(1),
        changes: vec![],
        to: at(1),
    };
    let _ = store.apply_many(id, &[part.clone(), part]);
}

#[test]
fn an_entry_keeps_its_documents_expiry_and_follows_a_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = IndexStore::open(dir.path(), 1 << 20).unwrap();
    let id = store.create(def("i", &["v"])).unwrap().id;
    let primary = store.create(def("#primary", &[])).unwrap().id;
    let body = json!({"v": 1});
    let expiring = |expiration: u32| {
        Change::Upsert(Doc {
            key: b"k",
            body: Some(&body),
            meta: DocMeta {
                is_json: true,
                expiration,
                ..DocMeta::default()
            },
        })
    };
    let expiries = |id| -> Vec<u32> { scan_all(&store, id, 10).iter().map(|e| e.expiry).collect() };
    for ix in [id, primary] {
        store
            .apply(ix, VbId(0), &[doc(b"k", &body)], at(1))
            .unwrap();
        assert_eq!(expiries(ix), [0]);
        // The same entry with an expiry now: rewritten in place, no entry added or removed.
        let applied = store
            .apply(ix, VbId(0), &[expiring(1_900_000_000)], at(2))
            .unwrap();
        assert_eq!((applied.entries_added, applied.entries_removed), (0, 0));
        assert_eq!(expiries(ix), [1_900_000_000]);
        store
            .apply(ix, VbId(0), &[expiring(1_900_000_100)], at(3))
            .unwrap();
        assert_eq!(expiries(ix), [1_900_000_100]);
        store
            .apply(ix, VbId(0), &[doc(b"k", &body)], at(4))
            .unwrap();
        assert_eq!(expiries(ix), [0]);
    }
    // It survives a reopen.
    store
        .apply(id, VbId(0), &[expiring(1_900_000_200)], at(5))
        .unwrap();
    drop(store);
    let store = IndexStore::open(dir.path(), 1 << 20).unwrap();
    let got: Vec<u32> = scan_all(&store, id, 10).iter().map(|e| e.expiry).collect();
    assert_eq!(got, [1_900_000_200]);
}

#[test]
fn settling_moves_the_entries_to_one_table_and_changes_nothing_a_scan_sees() {
    let dir = tempfile::tempdir().unwrap();
    let store = IndexStore::open(dir.path(), 1 << 20).unwrap();
    let id = store.create(def("by_n", &["n"])).unwrap().id;
    let keys: Vec<Vec<u8>> = (0..500).map(|i| format!("k{i:03}").into_bytes()).collect();
    let bodies: Vec<serde_json::Value> = (0..500).map(|i| json!({"n": i % 37})).collect();
    let changes: Vec<Change<'_>> = keys.iter().zip(&bodies).map(|(k, b)| doc(k, b)).collect();
    store.apply(id, VbId(0), &changes, at(500)).unwrap();
    let before = all(&store, id, 64);
    assert_eq!(before.len(), 500);
    assert_eq!(store.table_count(id).unwrap(), 0, "all in the memtable");
    let buffered = store.memory().write_buffer_bytes;

    store.settle(id).unwrap();
    assert_eq!(store.table_count(id).unwrap(), 1);
    assert!(store.memory().write_buffer_bytes < buffered);
    assert_eq!(all(&store, id, 64), before);

    // Writes after it land in the new memtable and merge with the table on reads.
    let moved = json!({"n": 1000});
    store
        .apply(
            id,
            VbId(0),
            &[doc(b"k000", &moved), Change::Delete { key: b"k001" }],
            at(502),
        )
        .unwrap();
    let after = all(&store, id, 64);
    assert_eq!(after.len(), 499);
    assert_eq!(
        after.last().unwrap(),
        &(vec![json!(1000)], b"k000".to_vec())
    );
    // And a reopen finds the same.
    drop(store);
    let store = IndexStore::open(dir.path(), 1 << 20).unwrap();
    assert_eq!(all(&store, id, 64), after);
}

#[test]
fn the_generation_moves_with_every_change_of_the_definitions() {
    let dir = tempfile::tempdir().unwrap();
    let store = IndexStore::open(dir.path(), 1 << 20).unwrap();
    let g0 = store.generation();
    let id = store.create(def("by_n", &["n"])).unwrap().id;
    let g1 = store.generation();
    assert!(g1 > g0);
    // Entries are not definitions.
    store
        .apply(id, VbId(0), &[doc(b"k", &json!({"n": 1}))], at(1))
        .unwrap();
    assert_eq!(store.generation(), g1);
    store.set_state(id, IndexState::Online).unwrap();
    let g2 = store.generation();
    assert!(g2 > g1);
    store.drop_index(id).unwrap();
    assert!(store.generation() > g2);
    assert!(store.definitions().is_empty());
}
