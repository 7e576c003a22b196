//! After a failed sync (injected by FaultyStore) the store is poisoned: the failing commit
//! reports an I/O error, every later write reports Poisoned, reads keep working.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line
use crate::common;

use common::*;
use sluice_storage::{FailedSync, FaultyStore, FlushBatch, Store, StoreError};
use sluice_types::VbId;

fn commit(store: &dyn Store, key: &str, seqno: u64) -> Result<(), StoreError> {
    store.commit(&FlushBatch {
        items: vec![item(0, key, seqno, "v")],
        ..FlushBatch::default()
    })
}

#[test]
fn failed_sync_poisons_for_good() {
    let (_dir, inner) = temp_store();
    let store = FaultyStore::new(inner);
    store.fail_sync_of_commit(2, FailedSync::Lost);

    commit(&store, "a", 1).expect("first commit succeeds");
    assert!(matches!(commit(&store, "b", 2), Err(StoreError::Io(_))));
    assert!(store.is_poisoned());
    for seqno in 3..6 {
        assert!(matches!(
            commit(&store, "c", seqno),
            Err(StoreError::Poisoned(_))
        ));
    }
    assert!(matches!(
        store.commit(&FlushBatch::default()),
        Err(StoreError::Poisoned(_))
    ));
    assert!(matches!(
        store.mark_clean_shutdown(),
        Err(StoreError::Poisoned(_))
    ));

    // Reads still work; the lost batch never arrived.
    assert!(store.get(VbId(0), b"a").expect("get").is_some());
    assert!(store.get(VbId(0), b"b").expect("get").is_none());
    assert_eq!(keys_and_seqnos(&scan(&store, 0)), vec![("a".into(), 1)]);
}

#[test]
fn applied_failed_sync_still_reports_failure() {
    let (_dir, inner) = temp_store();
    let store = FaultyStore::new(inner);
    store.fail_sync_of_commit(1, FailedSync::Applied);
    assert!(matches!(commit(&store, "a", 1), Err(StoreError::Io(_))));
    assert!(store.get(VbId(0), b"a").expect("get").is_some());
    assert!(matches!(
        commit(&store, "b", 2),
        Err(StoreError::Poisoned(_))
    ));
}

#[test]
fn unarmed_wrapper_is_transparent() {
    let (_dir, inner) = temp_store();
    let store = FaultyStore::new(inner);
    for seqno in 1..=5 {
        commit(&store, &format!("k{seqno}"), seqno).expect("commit");
    }
    assert!(!store.is_poisoned());
    assert_eq!(scan(&store, 0).len(), 5);
}
