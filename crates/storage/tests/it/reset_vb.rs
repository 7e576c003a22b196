//! Resetting a vbucket removes its records, key index and metadata, and nothing else.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line
use crate::common;

use common::*;
use sluice_storage::Store;
use sluice_types::VbId;

#[test]
fn reset_removes_one_vbucket_entirely() {
    let (_dir, store) = temp_store();
    commit_items(
        &store,
        vec![
            item(1, "a", 1, "v1"),
            item(1, "b", 2, "v2"),
            item(2, "a", 1, "other"),
        ],
    );
    store.reset_vb(VbId(1)).expect("reset");
    assert!(scan(&store, 1).is_empty());
    assert_eq!(store.get(VbId(1), b"a").expect("get"), None);
    assert_eq!(scan(&store, 2).len(), 1, "other vbuckets are untouched");
    assert!(store.get(VbId(2), b"a").expect("get").is_some());
    // The vbucket can be written again from seqno 1.
    commit_items(&store, vec![item(1, "a", 1, "new")]);
    assert_eq!(
        &store.get(VbId(1), b"a").unwrap().unwrap().value[..],
        b"new"
    );
}
