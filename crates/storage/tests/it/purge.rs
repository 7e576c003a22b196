//! Purges remove a tombstone for good, unless the key was rewritten since.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line
use crate::common;

use bytes::Bytes;
use common::*;
use sluice_storage::{FlushBatch, Store};
use sluice_types::{Seqno, VbId};

fn purge(key: &str, seqno: u64) -> (VbId, Bytes, Seqno) {
    (
        VbId(0),
        Bytes::copy_from_slice(key.as_bytes()),
        Seqno(seqno),
    )
}

fn commit_purges(store: &dyn Store, purges: Vec<(VbId, Bytes, Seqno)>) {
    store
        .commit(&FlushBatch {
            purges,
            ..FlushBatch::default()
        })
        .expect("commit");
}

#[test]
fn purge_of_current_tombstone_removes_it() {
    let (_dir, store) = temp_store();
    commit_items(&store, vec![item(0, "a", 1, "v"), tombstone(0, "b", 2)]);
    commit_items(&store, vec![tombstone(0, "a", 3)]);
    commit_purges(&store, vec![purge("a", 3), purge("b", 2)]);
    assert!(scan(&store, 0).is_empty());
    assert_eq!(store.get(VbId(0), b"a").expect("get"), None);
    assert_eq!(store.get(VbId(0), b"b").expect("get"), None);
}

#[test]
fn stale_purge_is_ignored() {
    let (_dir, store) = temp_store();
    commit_items(&store, vec![tombstone(0, "a", 1)]);
    commit_items(&store, vec![item(0, "a", 2, "back")]);
    commit_purges(&store, vec![purge("a", 1), purge("never-existed", 9)]);
    assert_eq!(keys_and_seqnos(&scan(&store, 0)), vec![("a".into(), 2)]);
    assert!(store.get(VbId(0), b"a").expect("get").is_some());
}

#[test]
fn purge_and_rewrite_in_one_batch() {
    let (_dir, store) = temp_store();
    commit_items(&store, vec![tombstone(0, "a", 1)]);
    store
        .commit(&FlushBatch {
            on_disk: Vec::new(),
            items: vec![item(0, "a", 5, "new")],
            purges: vec![purge("a", 1)],
            vb_meta: vec![],
        })
        .expect("commit");
    assert_eq!(keys_and_seqnos(&scan(&store, 0)), vec![("a".into(), 5)]);
}
