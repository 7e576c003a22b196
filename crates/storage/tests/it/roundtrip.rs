//! What is committed comes back unchanged through get, scan_vb and load_vb_meta.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line
use crate::common;

use common::*;
use sluice_storage::{FlushBatch, Store};
use sluice_types::{FailoverLog, Seqno, VbId, VbState, VbUuid};

#[test]
fn records_and_vb_meta_roundtrip() {
    let (_dir, store) = temp_store();
    let live = item(7, "doc::1", 1, r#"{"hello":"world"}"#);
    let dead = tombstone(7, "doc::2", 2);
    let other_vb = item(8, "doc::1", 1, "other");
    let mut log = FailoverLog::new(VbUuid(5), Seqno(0));
    log.new_branch(VbUuid(6), Seqno(2));
    let mut meta7 = vb_meta(2);
    meta7.failover_log = log;
    meta7.state = VbState::Replica;
    store
        .commit(&FlushBatch {
            on_disk: Vec::new(),
            items: vec![live.clone(), dead.clone(), other_vb.clone()],
            purges: vec![],
            vb_meta: vec![(VbId(7), meta7.clone()), (VbId(8), vb_meta(1))],
        })
        .expect("commit");

    assert_eq!(
        store.get(VbId(7), b"doc::1").expect("get"),
        Some(live.clone())
    );
    assert_eq!(
        store.get(VbId(7), b"doc::2").expect("get"),
        Some(dead.clone())
    );
    assert_eq!(
        store.get(VbId(8), b"doc::1").expect("get"),
        Some(other_vb.clone())
    );
    assert_eq!(store.get(VbId(7), b"missing").expect("get"), None);
    assert_eq!(store.get(VbId(9), b"doc::1").expect("get"), None);

    assert_eq!(scan(&store, 7), vec![live, dead]);
    assert_eq!(scan(&store, 8), vec![other_vb]);
    assert!(scan(&store, 9).is_empty());

    let metas = store.load_vb_meta().expect("load");
    assert_eq!(metas, vec![(VbId(7), meta7), (VbId(8), vb_meta(1))]);
    assert!(store.disk_bytes() > 0);
}

#[test]
fn empty_batch_is_a_no_op() {
    let (_dir, store) = temp_store();
    store.commit(&FlushBatch::default()).expect("commit");
    assert!(store.load_vb_meta().expect("load").is_empty());
}
