//! A commit may be told which seqno each key already has on disk, or that it has none
//! (`FlushBatch::on_disk`), and then does not read by_key for it. A right hint gives the same result as a read; a
//! wrong one, when checks are on, fails the commit as corruption instead of leaving the old
//! version's by_seqno slot behind.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line
use crate::common;

use common::*;
use sluice_storage::{FjallStore, FlushBatch, OnDisk, Store, StoreError};
use sluice_types::Seqno;

/// Hints as numbers: 0 not known, `ABSENT` none on disk, any other the seqno on disk.
const ABSENT: u64 = u64::MAX;

fn commit_hinted(store: &dyn Store, items: Vec<sluice_storage::ItemRecord>, on_disk: &[u64]) {
    try_commit_hinted(store, items, on_disk).expect("commit");
}

fn try_commit_hinted(
    store: &dyn Store,
    items: Vec<sluice_storage::ItemRecord>,
    on_disk: &[u64],
) -> Result<(), StoreError> {
    store.commit(&FlushBatch {
        items,
        on_disk: on_disk
            .iter()
            .map(|&s| match s {
                0 => OnDisk::Unknown,
                ABSENT => OnDisk::Absent,
                s => OnDisk::At(Seqno(s)),
            })
            .collect(),
        ..FlushBatch::default()
    })
}

#[test]
fn a_right_hint_replaces_the_previous_slot() {
    let (_dir, store) = temp_store();
    commit_items(&store, vec![item(4, "a", 1, "v1"), item(4, "b", 2, "v1")]);
    // "a" is hinted, "b" is not known (read), "c" is new and not known, "d" is new and
    // known to be absent.
    commit_hinted(
        &store,
        vec![
            item(4, "a", 3, "v2"),
            item(4, "b", 4, "v2"),
            item(4, "c", 5, "v1"),
            item(4, "d", 6, "v1"),
        ],
        &[1, 0, 0, ABSENT],
    );
    // Two copies of one key in a batch share the hint (the disk before the batch).
    commit_hinted(
        &store,
        vec![item(4, "a", 7, "v3"), item(4, "a", 8, "v4")],
        &[3, 3],
    );
    assert_eq!(
        keys_and_seqnos(&scan(&store, 4)),
        vec![
            ("b".into(), 4),
            ("c".into(), 5),
            ("d".into(), 6),
            ("a".into(), 8)
        ]
    );
}

#[test]
fn a_wrong_hint_is_caught_when_checks_are_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = FjallStore::open(dir.path()).unwrap().with_hint_checks(true);
    commit_items(&store, vec![item(4, "a", 1, "v1")]);
    let err = try_commit_hinted(&store, vec![item(4, "a", 2, "v2")], &[9])
        .expect_err("a hint that disagrees with by_key");
    assert!(matches!(err, StoreError::Corrupt(_)), "{err:?}");
    assert_eq!(keys_and_seqnos(&scan(&store, 4)), vec![("a".into(), 1)]);
}

#[test]
fn a_wrong_absent_hint_is_caught_when_checks_are_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = FjallStore::open(dir.path()).unwrap().with_hint_checks(true);
    commit_items(&store, vec![item(4, "a", 1, "v1")]);
    let err = try_commit_hinted(&store, vec![item(4, "a", 2, "v2")], &[ABSENT])
        .expect_err("an absent hint for a key on disk");
    assert!(matches!(err, StoreError::Corrupt(_)), "{err:?}");
    // And a key hinted to be somewhere while it is nowhere.
    let err = try_commit_hinted(&store, vec![item(4, "new", 3, "v1")], &[1])
        .expect_err("a seqno hint for a key not on disk");
    assert!(matches!(err, StoreError::Corrupt(_)), "{err:?}");
    assert_eq!(keys_and_seqnos(&scan(&store, 4)), vec![("a".into(), 1)]);
}

#[test]
fn without_checks_a_hint_is_trusted() {
    // What the check guards against: with a wrong hint the previous slot stays behind.
    let dir = tempfile::tempdir().unwrap();
    let store = FjallStore::open(dir.path())
        .unwrap()
        .with_hint_checks(false);
    commit_items(&store, vec![item(4, "a", 1, "v1")]);
    commit_hinted(&store, vec![item(4, "a", 2, "v2")], &[9]);
    assert_eq!(
        keys_and_seqnos(&scan(&store, 4)),
        vec![("a".into(), 1), ("a".into(), 2)]
    );
}
