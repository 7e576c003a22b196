//! A rewritten key leaves exactly one by_seqno entry: scans show only the newest version.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line
use crate::common;

use common::*;
use sluice_storage::Store;
use sluice_types::VbId;

#[test]
fn rewrite_across_commits_keeps_one_entry() {
    let (_dir, store) = temp_store();
    commit_items(&store, vec![item(0, "a", 1, "v1"), item(0, "b", 2, "b1")]);
    commit_items(&store, vec![item(0, "a", 3, "v2")]);
    commit_items(&store, vec![tombstone(0, "a", 4)]);
    commit_items(&store, vec![item(0, "a", 5, "v3")]);

    let records = scan(&store, 0);
    assert_eq!(
        keys_and_seqnos(&records),
        vec![("b".into(), 2), ("a".into(), 5)]
    );
    let a = store.get(VbId(0), b"a").expect("get").expect("present");
    assert_eq!(&a.value[..], b"v3");
    assert_eq!(a.meta.seqno.0, 5);
}

#[test]
fn duplicates_in_one_batch_keep_highest_seqno() {
    let (_dir, store) = temp_store();
    commit_items(
        &store,
        vec![
            item(1, "k", 10, "ten"),
            item(1, "k", 12, "twelve"),
            item(1, "k", 11, "eleven"),
        ],
    );
    let records = scan(&store, 1);
    assert_eq!(keys_and_seqnos(&records), vec![("k".into(), 12)]);
    assert_eq!(&records[0].value[..], b"twelve");
}

#[test]
fn same_key_in_other_vbucket_is_independent() {
    let (_dir, store) = temp_store();
    commit_items(&store, vec![item(1, "k", 1, "x"), item(2, "k", 1, "y")]);
    commit_items(&store, vec![item(1, "k", 2, "x2")]);
    assert_eq!(keys_and_seqnos(&scan(&store, 1)), vec![("k".into(), 2)]);
    assert_eq!(keys_and_seqnos(&scan(&store, 2)), vec![("k".into(), 1)]);
}
