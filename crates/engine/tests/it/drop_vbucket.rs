//! A rebalance's drop: a dead vbucket's copy is deleted in memory and on disk, and stays
//! deleted across a restart; a live vbucket is never dropped.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::{config, get, key, open, set, vb};
use sluice_engine::{EngineError, Seqno, VbState};
use std::time::Duration;

#[test]
fn a_dead_copy_is_deleted_in_memory_and_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path(), config(64, 4));
    let mut last = Seqno::ZERO;
    for i in 0..200 {
        last = set(&b, &key(i), b"v").seqno;
    }
    let target = vb(&b, &key(199));
    assert!(b
        .wait_persisted(target, last, Duration::from_secs(10))
        .unwrap());
    assert_eq!(
        b.drop_vbucket(target),
        Err(EngineError::NotMyVbucket),
        "an active copy is never dropped"
    );
    b.set_vbucket_state(target, VbState::Dead).unwrap();
    assert!(b.drop_vbucket(target).unwrap());
    assert!(
        !b.drop_vbucket(target).unwrap(),
        "nothing left the second time"
    );
    let details =
        |b: &sluice_engine::Bucket| b.vb_details().into_iter().find(|d| d.vb == target).unwrap();
    let d = details(&b);
    assert_eq!((d.items, d.high_seqno), (0, Seqno::ZERO));
    b.shutdown().unwrap();
    drop(b);

    let b = open(dir.path(), config(64, 4));
    let d = details(&b);
    assert_eq!(
        (d.state, d.items, d.high_seqno),
        (VbState::Dead, 0, Seqno::ZERO)
    );
    for i in 0..200 {
        if vb(&b, &key(i)) != target {
            assert_eq!(
                get(&b, &key(i)).unwrap(),
                b"v",
                "other vbuckets keep theirs"
            );
        }
    }
}
