//! Prepares and aborts (the pending namespace) live beside committed versions: per key one
//! record of each, a write replacing only its own namespace's record, both in by_seqno order
//! for scans, each read back with its kind.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line
use crate::common;

use bytes::Bytes;
use common::*;
use sluice_storage::{FjallStore, FlushBatch, ItemRecord, OnDisk, RecordKind, Store};
use sluice_types::{DurabilityLevel, Seqno, VbId};

const LEVEL: DurabilityLevel = DurabilityLevel::MajorityAndPersistOnMaster;

fn prepare(vb: u16, key: &str, seqno: u64, value: &str) -> ItemRecord {
    ItemRecord {
        kind: RecordKind::Prepare(LEVEL),
        ..item(vb, key, seqno, value)
    }
}

fn abort(vb: u16, key: &str, seqno: u64, prepared: u64) -> ItemRecord {
    ItemRecord {
        kind: RecordKind::Abort {
            prepared: Seqno(prepared),
        },
        ..tombstone(vb, key, seqno)
    }
}

/// What a record is, compactly: `C` committed, `P` prepare, `A<n>` abort of the prepare at n.
fn kind_tag(kind: RecordKind) -> String {
    match kind {
        RecordKind::Committed => "C".into(),
        RecordKind::Prepare(_) => "P".into(),
        RecordKind::Abort { prepared } => format!("A{}", prepared.0),
    }
}

/// (key, seqno, kind) of each record, in the order given.
fn entries(records: &[ItemRecord]) -> Vec<(String, u64, String)> {
    records
        .iter()
        .map(|r| {
            let key = String::from_utf8_lossy(&r.key).into_owned();
            (key, r.meta.seqno.0, kind_tag(r.kind))
        })
        .collect()
}

fn e(key: &str, seqno: u64, kind: &str) -> (String, u64, String) {
    (key.into(), seqno, kind.into())
}

/// (seqno, kind) of a lookup's result.
fn found(record: Option<ItemRecord>) -> Option<(u64, String)> {
    record.map(|r| (r.meta.seqno.0, kind_tag(r.kind)))
}

fn committed_of(store: &dyn Store, vb: u16, key: &str) -> Option<(u64, String)> {
    found(store.get(VbId(vb), key.as_bytes()).unwrap())
}

fn pending_of(store: &dyn Store, vb: u16, key: &str) -> Option<(u64, String)> {
    found(store.get_pending(VbId(vb), key.as_bytes()).unwrap())
}

fn at(seqno: u64, kind: &str) -> Option<(u64, String)> {
    Some((seqno, kind.into()))
}

#[test]
fn a_prepare_and_a_committed_version_coexist() {
    let (_dir, store) = temp_store();
    commit_items(&store, vec![item(0, "a", 1, "v1")]);
    commit_items(&store, vec![prepare(0, "a", 2, "v2")]);

    let committed = store.get(VbId(0), b"a").unwrap().unwrap();
    assert_eq!(
        (committed.meta.seqno, &committed.value[..]),
        (Seqno(1), &b"v1"[..])
    );
    assert_eq!(committed.kind, RecordKind::Committed);
    let pending = store.get_pending(VbId(0), b"a").unwrap().unwrap();
    assert_eq!(
        (pending.meta.seqno, &pending.value[..]),
        (Seqno(2), &b"v2"[..])
    );
    assert_eq!(pending.kind, RecordKind::Prepare(LEVEL));
    assert_eq!(entries(&scan(&store, 0)), [e("a", 1, "C"), e("a", 2, "P")]);

    // The commit writes the committed version and leaves the (now complete) prepare.
    commit_items(&store, vec![item(0, "a", 3, "v2")]);
    assert_eq!(committed_of(&store, 0, "a"), at(3, "C"));
    assert_eq!(pending_of(&store, 0, "a"), at(2, "P"));
    assert_eq!(entries(&scan(&store, 0)), [e("a", 2, "P"), e("a", 3, "C")]);

    // A key never written durably has no pending record, and a pending-only key no
    // committed one.
    commit_items(&store, vec![prepare(0, "b", 4, "b1")]);
    assert_eq!(pending_of(&store, 0, "x"), None);
    assert_eq!(committed_of(&store, 0, "b"), None);
    assert_eq!(pending_of(&store, 0, "b"), at(4, "P"));
}

#[test]
fn a_later_prepare_or_an_abort_replaces_the_pending_record_only() {
    let (_dir, store) = temp_store();
    commit_items(&store, vec![prepare(0, "a", 1, "p1")]);
    commit_items(&store, vec![item(0, "a", 2, "p1")]);
    commit_items(&store, vec![prepare(0, "a", 3, "p2")]);
    assert_eq!(entries(&scan(&store, 0)), [e("a", 2, "C"), e("a", 3, "P")]);
    assert_eq!(committed_of(&store, 0, "a"), at(2, "C"));
    assert_eq!(pending_of(&store, 0, "a"), at(3, "P"));

    commit_items(&store, vec![abort(0, "a", 4, 3)]);
    assert_eq!(entries(&scan(&store, 0)), [e("a", 2, "C"), e("a", 4, "A3")]);
    assert_eq!(committed_of(&store, 0, "a"), at(2, "C"));
    let aborted = store.get_pending(VbId(0), b"a").unwrap().unwrap();
    assert_eq!(aborted, abort(0, "a", 4, 3));

    // And a prepare replaces an abort.
    commit_items(&store, vec![prepare(0, "a", 5, "p3")]);
    assert_eq!(entries(&scan(&store, 0)), [e("a", 2, "C"), e("a", 5, "P")]);
}

#[test]
fn one_batch_keeps_the_newest_of_each_namespace() {
    let (_dir, store) = temp_store();
    commit_items(
        &store,
        vec![
            prepare(1, "k", 5, "p5"),
            item(1, "k", 6, "c6"),
            prepare(1, "k", 7, "p7"),
        ],
    );
    assert_eq!(entries(&scan(&store, 1)), [e("k", 6, "C"), e("k", 7, "P")]);
    assert_eq!(&store.get(VbId(1), b"k").unwrap().unwrap().value[..], b"c6");
    assert_eq!(
        &store.get_pending(VbId(1), b"k").unwrap().unwrap().value[..],
        b"p7"
    );
}

/// Committed rewrites, hinted or not, remove their previous slot and never the pending
/// record; a pending record's hint is not used (with checks on, a wrong one is no error).
#[test]
fn committed_rewrites_leave_the_pending_record_alone() {
    for checks in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let store = FjallStore::open(dir.path())
            .unwrap()
            .with_hint_checks(checks);
        commit_items(&store, vec![prepare(2, "a", 1, "p1")]);
        let hinted = |items, on_disk| {
            store
                .commit(&FlushBatch {
                    items,
                    on_disk,
                    ..FlushBatch::default()
                })
                .unwrap();
        };
        hinted(vec![item(2, "a", 2, "v2")], vec![OnDisk::Absent]);
        hinted(vec![item(2, "a", 3, "v3")], vec![OnDisk::At(Seqno(2))]);
        commit_items(&store, vec![tombstone(2, "a", 4)]);
        // A hint beside a prepare describes the committed namespace: not used for it.
        hinted(
            vec![item(2, "a", 5, "v5"), prepare(2, "b", 6, "pb")],
            vec![OnDisk::At(Seqno(4)), OnDisk::At(Seqno(99))],
        );
        assert_eq!(
            entries(&scan(&store, 2)),
            [e("a", 1, "P"), e("a", 5, "C"), e("b", 6, "P")],
            "hint checks {checks}"
        );
        assert_eq!(pending_of(&store, 2, "a"), at(1, "P"));
        assert_eq!(committed_of(&store, 2, "a"), at(5, "C"));
    }
}

#[test]
fn reopen_reads_everything_back() {
    let dir = tempfile::tempdir().unwrap();
    let written = {
        let store = FjallStore::open(dir.path()).unwrap();
        commit_items(
            &store,
            vec![
                item(3, "a", 1, "a1"),
                prepare(3, "a", 2, "a2"),
                prepare(3, "b", 3, "b1"),
                item(3, "c", 4, "c1"),
            ],
        );
        commit_items(
            &store,
            vec![
                item(3, "a", 5, "a2"),
                abort(3, "b", 6, 3),
                prepare(3, "c", 7, ""),
            ],
        );
        scan(&store, 3)
    };
    assert_eq!(
        entries(&written),
        [
            e("a", 2, "P"),
            e("c", 4, "C"),
            e("a", 5, "C"),
            e("b", 6, "A3"),
            e("c", 7, "P")
        ]
    );
    let store = FjallStore::open(dir.path()).unwrap();
    assert_eq!(scan(&store, 3), written, "the warmup scan");
    let pending = store.get_pending(VbId(3), b"c").unwrap().unwrap();
    assert_eq!(pending, prepare(3, "c", 7, ""));
    assert_eq!(committed_of(&store, 3, "b"), None);
    assert_eq!(pending_of(&store, 3, "b"), at(6, "A3"));
    assert_eq!(committed_of(&store, 3, "a"), at(5, "C"));
    assert_eq!(pending_of(&store, 3, "a"), at(2, "P"));
}

#[test]
fn a_durable_delete_reads_back_as_one() {
    let (_dir, store) = temp_store();
    let mut delete = prepare(0, "a", 1, "");
    delete.meta.deleted = true;
    commit_items(&store, vec![delete.clone()]);
    assert_eq!(store.get_pending(VbId(0), b"a").unwrap(), Some(delete));
}

#[test]
fn reset_leaves_nothing_of_either_namespace() {
    let (_dir, store) = temp_store();
    commit_items(
        &store,
        vec![
            item(1, "a", 1, "v1"),
            prepare(1, "a", 2, "p"),
            abort(1, "b", 3, 1),
            prepare(2, "a", 1, "other"),
        ],
    );
    store.reset_vb(VbId(1)).unwrap();
    assert!(scan(&store, 1).is_empty());
    for key in ["a", "b"] {
        assert_eq!(committed_of(&store, 1, key), None);
        assert_eq!(pending_of(&store, 1, key), None);
    }
    assert_eq!(
        pending_of(&store, 2, "a"),
        at(1, "P"),
        "other vbuckets stay"
    );
    // Seqnos start over: a pending index entry left behind would now point at a committed
    // record (and read as corrupt), a by_seqno slot would show in the scan.
    commit_items(&store, vec![item(1, "b", 1, "new"), item(1, "a", 2, "new")]);
    assert_eq!(pending_of(&store, 1, "a"), None);
    assert_eq!(pending_of(&store, 1, "b"), None);
    assert_eq!(entries(&scan(&store, 1)), [e("b", 1, "C"), e("a", 2, "C")]);
}

#[test]
fn a_snapshot_does_not_see_later_pending_writes() {
    let (_dir, store) = temp_store();
    commit_items(
        &store,
        vec![item(0, "a", 1, "a1"), prepare(0, "a", 2, "a2")],
    );
    let snap = store.snapshot();

    // The commit, a new prepare replacing the old one's slot, and an abort of another key.
    commit_items(
        &store,
        vec![item(0, "a", 3, "a2"), prepare(0, "b", 4, "b1")],
    );
    commit_items(&store, vec![prepare(0, "a", 5, "a3"), abort(0, "b", 6, 4)]);

    let seen: Vec<_> = snap
        .scan_seqnos(VbId(0), Seqno(0), Seqno::MAX)
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(entries(&seen), [e("a", 1, "C"), e("a", 2, "P")]);
    assert_eq!(&seen[1].value[..], b"a2");
    assert_eq!(
        entries(&scan(&store, 0)),
        [e("a", 3, "C"), e("a", 5, "P"), e("b", 6, "A4")]
    );
}

/// The purger removes a committed tombstone; a pending record older than it (complete, as
/// the tombstone says) goes with it, so that it cannot look in flight afterwards.
#[test]
fn a_purge_takes_the_completed_pending_record_with_it() {
    let (_dir, store) = temp_store();
    let mut delete = prepare(0, "a", 1, "");
    delete.meta.deleted = true;
    commit_items(&store, vec![delete, tombstone(0, "a", 2)]);
    commit_items(&store, vec![tombstone(0, "b", 3), prepare(0, "b", 4, "b1")]);
    let purge = |key: &str, seqno| {
        (
            VbId(0),
            Bytes::copy_from_slice(key.as_bytes()),
            Seqno(seqno),
        )
    };
    store
        .commit(&FlushBatch {
            purges: vec![purge("a", 2), purge("b", 3)],
            ..FlushBatch::default()
        })
        .unwrap();
    assert_eq!(committed_of(&store, 0, "a"), None);
    assert_eq!(
        pending_of(&store, 0, "a"),
        None,
        "completed: purged with it"
    );
    assert_eq!(committed_of(&store, 0, "b"), None);
    assert_eq!(pending_of(&store, 0, "b"), at(4, "P"), "in flight: kept");
    assert_eq!(entries(&scan(&store, 0)), [e("b", 4, "P")]);
}

#[test]
fn a_snapshots_max_visible_seqno_skips_prepares_and_aborts() {
    let (_dir, store) = temp_store();
    commit_items(&store, vec![item(0, "a", 1, "v1"), item(1, "z", 1, "z1")]);
    commit_items(&store, vec![prepare(0, "b", 2, "p"), item(0, "c", 3, "c1")]);
    commit_items(&store, vec![prepare(0, "d", 4, "p"), abort(0, "d", 5, 4)]);
    commit_items(&store, vec![prepare(0, "e", 6, "p")]);
    let snap = store.snapshot();
    let mv = |start: u64, end: u64| {
        snap.max_visible_seqno(VbId(0), Seqno(start), Seqno(end))
            .unwrap()
            .map(|s| s.0)
    };
    // (start, end] → the newest committed record in it.
    assert_eq!(
        mv(0, 6),
        Some(3),
        "a prepare, an abort and a prepare above it"
    );
    assert_eq!(mv(0, 2), Some(1));
    assert_eq!(mv(1, 2), None, "only a prepare");
    assert_eq!(mv(3, 6), None, "only pending records");
    assert_eq!(mv(6, 6), None, "an empty range");
    assert_eq!(mv(0, 3), Some(3), "the end itself");
    // Another vbucket's records are not read.
    assert_eq!(
        snap.max_visible_seqno(VbId(1), Seqno(0), Seqno(9)).unwrap(),
        Some(Seqno(1))
    );
}
