//! SyncWrites survive a restart as they stood: a persisted prepare comes back pending and
//! inherited (its key refuses reads and writes until it is re-committed), an aborted or
//! committed one does not, and a committed durable write reads back committed.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::{config, get, open, set, vb};
use sluice_engine::{Bucket, EngineError};
use sluice_types::{DurabilityLevel, Seqno};
use std::time::Duration;

fn durable_set(b: &Bucket, key: &[u8], value: &[u8]) -> sluice_engine::Mutation {
    common::try_set_durable(b, key, value, Some(DurabilityLevel::PersistToMajority)).unwrap()
}

fn persisted(b: &Bucket, key: &[u8], seqno: Seqno) {
    assert!(b
        .wait_persisted(vb(b, key), seqno, Duration::from_secs(10))
        .unwrap());
}

#[test]
fn prepares_come_back_pending_and_completed_ones_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path(), config(64, 4));
    for k in [&b"pending"[..], b"aborted", b"committed"] {
        set(&b, k, b"old");
    }
    let pending = durable_set(&b, b"pending", b"new");
    let aborted = durable_set(&b, b"aborted", b"new");
    let committed = durable_set(&b, b"committed", b"new");
    b.abort(vb(&b, b"aborted"), aborted.seqno).unwrap();
    let c = b.commit(vb(&b, b"committed"), committed.seqno).unwrap();
    for (k, s) in [(&b"pending"[..], pending.seqno), (b"committed", c.seqno)] {
        persisted(&b, k, s);
    }
    persisted(&b, b"aborted", Seqno(aborted.seqno.0 + 1));
    b.shutdown().unwrap();
    drop(b);

    let b = open(dir.path(), config(64, 4));
    let pending_vb = vb(&b, b"pending");
    let back: Vec<Seqno> = b
        .pending_writes(pending_vb)
        .unwrap()
        .iter()
        .map(|p| p.seqno)
        .collect();
    assert_eq!(back, vec![pending.seqno], "only the outstanding prepare");
    for (k, done) in [(&b"aborted"[..], aborted), (b"committed", committed)] {
        let still: Vec<Seqno> = b
            .pending_writes(vb(&b, k))
            .unwrap()
            .iter()
            .map(|p| p.seqno)
            .collect();
        assert!(!still.contains(&done.seqno), "{k:?} came back pending");
    }
    // It may have been committed and acknowledged before the stop: neither the old value
    // nor a new write is served until it is re-committed.
    assert_eq!(
        b.get(pending_vb, b"pending").unwrap_err(),
        EngineError::SyncWriteReCommitInProgress
    );
    assert_eq!(
        common::try_set(&b, b"pending", b"x").unwrap_err(),
        EngineError::SyncWriteReCommitInProgress,
        "the key stays locked across the restart"
    );
    assert_eq!(
        b.take_inherited_prepares(),
        vec![pending_vb],
        "for the monitor to adopt"
    );
    assert_eq!(get(&b, b"aborted").unwrap(), b"old");
    assert_eq!(get(&b, b"committed").unwrap(), b"new");
    let m = b.commit(pending_vb, pending.seqno).unwrap();
    assert_eq!(m.cas, pending.cas);
    assert_eq!(get(&b, b"pending").unwrap(), b"new");
    persisted(&b, b"pending", m.seqno);
    b.shutdown().unwrap();
    drop(b);

    let b = open(dir.path(), config(64, 4));
    assert!(
        b.pending_writes(pending_vb).unwrap().is_empty(),
        "committed before the stop"
    );
    assert_eq!(get(&b, b"pending").unwrap(), b"new");
}

#[test]
fn the_max_visible_seqno_stays_below_prepares_and_aborts_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path(), config(64, 4));
    let visible = |b: &Bucket, v| {
        let all = b.vb_visible_seqnos(None);
        all.iter().find(|(x, _)| *x == v).unwrap().1
    };
    let high = |b: &Bucket, v| b.vb_seqnos(None).iter().find(|(x, _)| *x == v).unwrap().1;
    set(&b, b"k", b"v1");
    let v = vb(&b, b"k");
    let first = high(&b, v);
    assert_eq!(visible(&b, v), first, "a mutation is visible");
    let p = durable_set(&b, b"k", b"v2");
    assert_eq!(
        (high(&b, v), visible(&b, v)),
        (p.seqno, first),
        "a prepare is not"
    );
    let a = b.abort(v, p.seqno).unwrap();
    assert_eq!((high(&b, v), visible(&b, v)), (a, first), "nor an abort");
    let p = durable_set(&b, b"k", b"v3");
    let c = b.commit(v, p.seqno).unwrap();
    assert_eq!(visible(&b, v), c.seqno, "a commit is");
    let pending = durable_set(&b, b"k2", b"x");
    let pv = vb(&b, b"k2");
    let before = visible(&b, pv);
    persisted(&b, b"k2", pending.seqno);
    persisted(&b, b"k", c.seqno);
    b.shutdown().unwrap();
    drop(b);

    // Warmup reads it back from the records: the outstanding prepare is above it.
    let b = open(dir.path(), config(64, 4));
    assert_eq!(visible(&b, v), c.seqno);
    assert_eq!(high(&b, pv), pending.seqno);
    assert_eq!(visible(&b, pv), before);
}

#[test]
fn a_disk_backfill_carries_the_high_completed_seqno_persisted_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path(), config(64, 1));
    let v = vb(&b, b"a");
    set(&b, b"a", b"old");
    let committed = durable_set(&b, b"a", b"new");
    let c = b.commit(v, committed.seqno).unwrap();
    let aborted = durable_set(&b, b"b", b"new");
    let a = b.abort(v, aborted.seqno).unwrap();
    let pending = durable_set(&b, b"c", b"new");
    persisted(&b, b"c", pending.seqno);
    let check = |b: &Bucket, what: &str| {
        let backfill = b.backfill(v, Seqno(0)).unwrap();
        assert_eq!(backfill.end, pending.seqno, "{what}");
        // The abort completed the newer of the two prepares; the third is pending.
        assert_eq!(backfill.high_completed, aborted.seqno, "{what}");
        assert!(c.seqno < a, "{what}");
        // The newest visible change is the commit: the abort and the last prepare follow it.
        assert_eq!(backfill.max_visible, c.seqno, "{what}");
    };
    check(&b, "before the restart");
    b.shutdown().unwrap();
    drop(b);
    let b = open(dir.path(), config(64, 1));
    check(&b, "read back from the vbucket's metadata");
}
