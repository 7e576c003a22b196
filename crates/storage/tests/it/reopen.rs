//! Dropping and reopening the store restores every record and all vbucket metadata.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line
use crate::common;

use common::*;
use sluice_storage::{FjallStore, FlushBatch, Store};
use sluice_types::VbId;

#[test]
fn reopen_restores_everything() {
    let dir = tempfile::tempdir().expect("tempdir");
    let items: Vec<_> = (1..=200)
        .map(|s| {
            item(
                (s % 4) as u16,
                &format!("key-{s}"),
                s,
                &"x".repeat(s as usize),
            )
        })
        .collect();
    {
        let store = FjallStore::open(dir.path()).expect("open");
        store
            .commit(&FlushBatch {
                on_disk: Vec::new(),
                items: items.clone(),
                purges: vec![],
                vb_meta: (0..4).map(|vb| (VbId(vb), vb_meta(200))).collect(),
            })
            .expect("commit");
        // A rewrite in a later commit must survive as the only version too.
        commit_items(&store, vec![tombstone(1, "key-1", 201)]);
    }

    let store = FjallStore::open(dir.path()).expect("reopen");
    let metas = store.load_vb_meta().expect("load");
    assert_eq!(metas.len(), 4);
    assert!(metas.iter().all(|(_, m)| *m == vb_meta(200)));

    let mut restored: Vec<_> = (0..4).flat_map(|vb| scan(&store, vb)).collect();
    restored.sort_by_key(|r| r.meta.seqno);
    let mut expected = items;
    expected.retain(|r| &r.key[..] != b"key-1");
    expected.push(tombstone(1, "key-1", 201));
    assert_eq!(restored, expected);
    let t = store.get(VbId(1), b"key-1").expect("get").expect("present");
    assert!(t.meta.deleted);
}
