//! A snapshot scan sees the store as it was when the snapshot was taken.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line
use crate::common;

use common::*;
use sluice_storage::Store;
use sluice_types::{Seqno, VbId};

#[test]
fn commits_after_snapshot_are_invisible_to_it() {
    let (_dir, store) = temp_store();
    commit_items(&store, vec![item(0, "a", 1, "a1"), item(0, "b", 2, "b1")]);
    let snap = store.snapshot();

    // Rewrite "a" (removing its old slot), add "c", and write another vbucket.
    commit_items(&store, vec![item(0, "a", 3, "a2"), item(0, "c", 4, "c1")]);
    commit_items(&store, vec![item(1, "z", 1, "z1")]);

    let seen: Vec<_> = snap
        .scan_seqnos(VbId(0), Seqno(0), Seqno::MAX)
        .collect::<Result<_, _>>()
        .expect("scan");
    assert_eq!(
        keys_and_seqnos(&seen),
        vec![("a".into(), 1), ("b".into(), 2)]
    );
    assert_eq!(&seen[0].value[..], b"a1");
    assert_eq!(snap.scan_seqnos(VbId(1), Seqno(0), Seqno::MAX).count(), 0);

    // The live view has moved on.
    assert_eq!(
        keys_and_seqnos(&scan(&store, 0)),
        vec![("b".into(), 2), ("a".into(), 3), ("c".into(), 4)]
    );
}

#[test]
fn scan_seqnos_bounds_are_start_exclusive_end_inclusive() {
    let (_dir, store) = temp_store();
    let items = (1..=6).map(|s| item(2, &format!("k{s}"), s, "v")).collect();
    commit_items(&store, items);
    let snap = store.snapshot();
    let seqnos = |start: u64, end: u64| -> Vec<u64> {
        snap.scan_seqnos(VbId(2), Seqno(start), Seqno(end))
            .map(|r| r.expect("record").meta.seqno.0)
            .collect()
    };
    assert_eq!(seqnos(2, 5), vec![3, 4, 5]);
    assert_eq!(seqnos(0, 1), vec![1]);
    assert_eq!(seqnos(5, 5), Vec::<u64>::new());
    assert_eq!(seqnos(6, 2), Vec::<u64>::new());
    assert_eq!(seqnos(u64::MAX, u64::MAX), Vec::<u64>::new());
}

/// A backfill scans up to the snapshot's own high seqno. Taken between two commits, the
/// snapshot's high seqno is the first commit's, and the scan up to it holds every key
/// that existed then (the race a high seqno read outside the snapshot would lose).
#[test]
fn a_snapshot_knows_its_own_high_seqno() {
    use sluice_storage::FlushBatch;
    let (_dir, store) = temp_store();
    let commit = |items, high| {
        store
            .commit(&FlushBatch {
                items,
                vb_meta: vec![(VbId(0), vb_meta(high))],
                ..FlushBatch::default()
            })
            .expect("commit");
    };
    commit(vec![item(0, "a", 1, "a1"), item(0, "b", 2, "b1")], 2);
    let snap = store.snapshot();
    commit(vec![item(0, "a", 3, "a2")], 3);
    assert_eq!(snap.high_seqno(VbId(0)).unwrap(), Seqno(2));
    assert_eq!(
        snap.high_seqno(VbId(9)).unwrap(),
        Seqno(0),
        "no vb_meta: nothing"
    );
    let end = snap.high_seqno(VbId(0)).unwrap();
    let seen: Vec<_> = snap
        .scan_seqnos(VbId(0), Seqno(0), end)
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        keys_and_seqnos(&seen),
        vec![("a".into(), 1), ("b".into(), 2)]
    );
    assert_eq!(store.snapshot().high_seqno(VbId(0)).unwrap(), Seqno(3));
}
