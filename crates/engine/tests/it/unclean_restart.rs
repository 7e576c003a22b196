//! After a stop without shutdown (a crash), persisted data survives and every vbucket starts a
//! new failover-log branch at its persisted high seqno; a clean stop adds no branch.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;
use common::*;
use std::time::Duration;

#[test]
fn crash_adds_a_failover_branch_and_keeps_persisted_data() {
    let dir = tempfile::tempdir().unwrap();
    let k = key(1);
    let (vbid, seqno, uuid_before) = {
        let b = open(dir.path(), config(64, 8));
        let m = set(&b, &k, b"v1");
        let vbid = vb(&b, &k);
        assert!(b
            .wait_persisted(vbid, m.seqno, Duration::from_secs(10))
            .unwrap());
        let uuid = b.failover_log(vbid).unwrap().latest().uuid;
        // No shutdown(): the clean-stop flag is never written, as after kill -9.
        std::mem::forget(b);
        (vbid, m.seqno, uuid)
    };
    // The forgotten bucket's threads still hold the store open; a crash would have released
    // it. Reopen through a copy of the directory instead.
    let copy = tempfile::tempdir().unwrap();
    copy_dir(dir.path(), copy.path());
    let b = open(copy.path(), config(64, 8));
    assert_eq!(get(&b, &k), Some(b"v1".to_vec()));
    let log = b.failover_log(vbid).unwrap();
    assert_eq!(log.entries().len(), 2, "{log:?}");
    assert_ne!(log.latest().uuid, uuid_before);
    assert_eq!(log.latest().seqno, seqno);
    assert_eq!(log.entries()[1].uuid, uuid_before);
    b.shutdown().unwrap();
    drop(b);
    let b = open(copy.path(), config(64, 8));
    assert_eq!(
        b.failover_log(vbid).unwrap().entries().len(),
        2,
        "clean stop: no new branch"
    );
    b.shutdown().unwrap();
}
