//! `keys_with_prefix`: the committed keys of one vbucket under a prefix (a collection's),
//! with their on-disk seqnos, at most as many as asked.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;
use common::*;
use sluice_storage::Store;
use sluice_types::{Seqno, VbId};

#[test]
fn keys_under_a_prefix_come_with_their_seqnos_in_key_order() {
    let (_dir, store) = temp_store();
    commit_items(
        &store,
        vec![
            item(0, "\u{8}b", 1, "v"),
            item(0, "\u{8}a", 2, "v"),
            item(0, "\u{9}a", 3, "v"),
            item(1, "\u{8}c", 1, "v"),
        ],
    );
    let found = store.keys_with_prefix(VbId(0), b"\x08", 10).unwrap();
    let found: Vec<(&[u8], Seqno)> = found.iter().map(|(k, s)| (&k[..], *s)).collect();
    assert_eq!(
        found,
        vec![(&b"\x08a"[..], Seqno(2)), (&b"\x08b"[..], Seqno(1))]
    );
    assert_eq!(
        store.keys_with_prefix(VbId(0), b"\x08", 1).unwrap().len(),
        1
    );
    assert!(store
        .keys_with_prefix(VbId(2), b"\x08", 10)
        .unwrap()
        .is_empty());
}
