//! The flusher visits only the vbuckets marked dirty. Every kind of change must mark its
//! vbucket, or it would stay unpersisted until some later write to the same vbucket (and a
//! clean stop would leave it behind). Each change here is the only one in its vbucket.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;
use bytes::Bytes;
use common::*;
use sluice_engine::{
    Cas, Datatype, Expiry, ItemMeta, QueueOp, ReplicaChange, Seqno, VbId, VbState,
};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

/// A bucket whose flusher has finished its first round (which visits every vbucket).
fn opened(dir: &std::path::Path) -> std::sync::Arc<sluice_engine::Bucket> {
    let b = open(dir, config(64, 16));
    std::thread::sleep(Duration::from_millis(300));
    b
}

fn replica_change(key: &str, seqno: u64) -> ReplicaChange {
    ReplicaChange {
        key: Bytes::from(key.to_owned()),
        value: Bytes::from_static(b"from the active"),
        meta: ItemMeta {
            seqno: Seqno(seqno),
            rev_seqno: 1,
            cas: Cas(1_700_000_000_000_000_000 + seqno),
            flags: 0,
            expiry: Expiry::NEVER,
            datatype: Datatype::RAW,
            deleted: false,
            delete_time: 0,
        },
        op: QueueOp::Mutation,
    }
}

#[test]
fn sets_deletes_and_replica_changes_persist_without_another_write() {
    let dir = tempfile::tempdir().unwrap();
    let b = opened(dir.path());
    let k = key(1);
    let vbid = vb(&b, &k);
    let m = set(&b, &k, b"v1");
    assert!(b.wait_persisted(vbid, m.seqno, WAIT).unwrap(), "set");
    let d = b.delete(vbid, &k, Cas::ZERO, None).unwrap();
    assert!(b.wait_persisted(vbid, d.seqno, WAIT).unwrap(), "delete");

    let replica = VbId((vbid.0 + 1) % 16);
    b.set_vbucket_state(replica, VbState::Replica).unwrap();
    b.apply_replica(replica, replica_change("replicated", 1))
        .unwrap();
    assert!(
        b.wait_persisted(replica, Seqno(1), WAIT).unwrap(),
        "replica change"
    );
    b.shutdown().unwrap();
}

#[test]
fn metadata_changes_alone_persist_by_a_clean_stop() {
    let dir = tempfile::tempdir().unwrap();
    let (state_vb, log_vb) = (VbId(3), VbId(9));
    let log = {
        let b = opened(dir.path());
        b.set_vbucket_state(state_vb, VbState::Replica).unwrap();
        b.set_vbucket_state(log_vb, VbState::Replica).unwrap();
        // Let those two be flushed, so the failover log below is the only change left.
        std::thread::sleep(Duration::from_millis(300));
        let mut log = b.failover_log(log_vb).unwrap();
        log.new_branch(sluice_engine::VbUuid(0xfeed), Seqno::ZERO);
        b.set_failover_log(log_vb, log.clone()).unwrap();
        b.shutdown().unwrap();
        log
    };
    let b = open(dir.path(), config(64, 16));
    assert_eq!(b.vb_state(state_vb).unwrap(), VbState::Replica);
    assert_eq!(b.failover_log(log_vb).unwrap(), log);
    b.shutdown().unwrap();
}
