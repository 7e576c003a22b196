//! A failed sync is never retried: the bucket refuses writes with a clear error, reads go on.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use sluice_engine::{Bucket, EngineError, StoreKind, StoreRequest, SystemClock};
use sluice_storage::{FailedSync, FaultyStore, FjallStore, Store};
use sluice_types::{vbucket_of, Cas, Datatype};
use std::sync::Arc;
use std::time::Duration;

use crate::common;

#[test]
fn failed_sync_refuses_later_writes() {
    let dir = tempfile::tempdir().unwrap();
    let faulty = Arc::new(FaultyStore::new(FjallStore::open(dir.path()).unwrap()));
    // Commit 1 persists the fresh vbuckets' metadata; make the next one fail.
    faulty.fail_sync_of_commit(2, FailedSync::Lost);
    let store: Arc<dyn Store> = faulty.clone();
    let b = Bucket::open(common::config(64, 4), Some(store), Arc::new(SystemClock)).unwrap();
    let mut refused = None;
    for i in 0..200 {
        let k = common::key(i);
        let req = StoreRequest {
            kind: StoreKind::Set,
            key: &k,
            value: b"v",
            flags: 0,
            expiry_wire: 0,
            datatype: Datatype::RAW,
            cas: Cas::ZERO,
            preserve_ttl: false,
            durability: None,
            macros: &[],
            access_deleted: false,
            store_deleted: false,
        };
        match b.store(vbucket_of(&k, 4), &req) {
            Ok(_) => std::thread::sleep(Duration::from_millis(5)),
            Err(EngineError::WritesRefused(reason)) => {
                refused = Some(reason);
                break;
            }
            Err(e) => panic!("unexpected {e}"),
        }
    }
    let reason = refused.expect("writes are refused after the failed sync");
    assert!(!reason.is_empty());
    assert_eq!(b.write_failure(), Some(reason));
    // Reads still work.
    let k = common::key(0);
    assert!(matches!(
        b.get(vbucket_of(&k, 4), &k),
        Ok(_) | Err(EngineError::KeyNotFound)
    ));
    assert!(
        b.shutdown().is_err(),
        "a clean stop is not recorded after a storage failure"
    );
}
