//! `get` reads by_key and by_seqno from one snapshot, so a concurrent rewrite (which removes
//! the old by_seqno slot) never makes it report a dangling index entry.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line
use crate::common;

use common::*;
use sluice_storage::Store;
use sluice_types::VbId;
use std::sync::atomic::{AtomicBool, Ordering};

#[test]
fn get_never_sees_a_half_rewritten_key() {
    let (_dir, store) = temp_store();
    commit_items(&store, vec![item(0, "hot", 1, "v1")]);
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            for seqno in 2..=150 {
                commit_items(&store, vec![item(0, "hot", seqno, "v")]);
            }
            done.store(true, Ordering::Release);
        });
        let mut reads = 0u64;
        while !done.load(Ordering::Acquire) {
            let got = store.get(VbId(0), b"hot").expect("get never fails");
            assert!(got.is_some());
            reads += 1;
        }
        assert!(reads > 0);
    });
    assert_eq!(keys_and_seqnos(&scan(&store, 0)), vec![("hot".into(), 150)]);
}
