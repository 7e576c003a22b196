//! SyncWrites on one vbucket: prepares are invisible and lock their key, commits make them
//! visible with the prepare's CAS, aborts leave the old value, and the checkpoint carries
//! all three, undeduplicated. The replica side applies them by the rules of `prepares`.

use super::tests::{ctx, set, vb};
use super::*;
use crate::prepares::PendingError;
use crate::replica::ReplicaChange;

fn durable(level: DurabilityLevel) -> OpCtx {
    OpCtx {
        durability: Some(level),
        ..ctx(1000)
    }
}

/// Every queued item's (seqno, op) since the last call.
fn queued(v: &mut VbInner, reader: crate::checkpoint::CursorId) -> Vec<(u64, QueueOp)> {
    let (chunks, _) = v.checkpoints.read(reader, usize::MAX);
    chunks
        .iter()
        .flat_map(|ch| ch.items.iter())
        .map(|i| (i.meta.seqno.0, i.op))
        .collect()
}

fn value(v: &mut VbInner, key: &[u8]) -> Result<Vec<u8>, EngineError> {
    v.read(key, &ctx(1000), |_, value| value.to_vec())
}

#[test]
fn a_prepare_is_invisible_until_committed_and_keeps_its_cas() {
    let mut v = vb();
    let reader = v.checkpoints.register_cursor_at_oldest();
    let plain = ctx(1000);
    v.store(&set(b"k", b"old", StoreKind::Set, 0), Datatype::RAW, &plain)
        .unwrap();
    let p = v
        .store(
            &set(b"k", b"new", StoreKind::Set, 0),
            Datatype::RAW,
            &durable(DurabilityLevel::Majority),
        )
        .unwrap();
    assert_eq!(p.seqno, Seqno(2));
    assert_eq!(
        value(&mut v, b"k").unwrap(),
        b"old",
        "readers see the committed value"
    );
    assert_eq!(
        v.store(&set(b"k", b"x", StoreKind::Set, 0), Datatype::RAW, &plain),
        Err(EngineError::SyncWriteInProgress)
    );
    assert_eq!(
        v.delete(b"k", Cas::ZERO, &plain),
        Err(EngineError::SyncWriteInProgress)
    );
    assert_eq!(
        v.touch(b"k", 0, &plain).map(|_| ()),
        Err(EngineError::SyncWriteInProgress)
    );
    let c = v.commit(p.seqno, &plain).unwrap();
    assert_eq!(c.seqno, Seqno(3));
    assert_eq!(c.cas, p.cas, "the commit keeps the prepare's CAS");
    assert_eq!(value(&mut v, b"k").unwrap(), b"new");
    assert_eq!(v.ht.get(b"k").unwrap().meta.rev_seqno, 2);
    assert_eq!(
        queued(&mut v, reader),
        vec![
            (1, QueueOp::Mutation),
            (2, QueueOp::Prepare(DurabilityLevel::Majority)),
            (3, QueueOp::Commit { prepared: Seqno(2) }),
        ]
    );
    assert_eq!(
        v.commit(p.seqno, &plain),
        Err(EngineError::NoSuchPrepare(p.seqno))
    );
    assert!(v.prepares.is_empty());
}

#[test]
fn an_abort_leaves_the_old_value_and_frees_the_key() {
    let mut v = vb();
    let reader = v.checkpoints.register_cursor_at_oldest();
    let plain = ctx(1000);
    v.store(&set(b"k", b"old", StoreKind::Set, 0), Datatype::RAW, &plain)
        .unwrap();
    let p = v
        .delete(
            b"k",
            Cas::ZERO,
            &durable(DurabilityLevel::PersistToMajority),
        )
        .unwrap();
    assert_eq!(value(&mut v, b"k").unwrap(), b"old");
    assert_eq!(v.abort(p.seqno), Ok(Seqno(3)));
    assert_eq!(value(&mut v, b"k").unwrap(), b"old");
    assert_eq!(v.num_items, 1);
    v.store(
        &set(b"k", b"next", StoreKind::Set, 0),
        Datatype::RAW,
        &plain,
    )
    .unwrap();
    assert_eq!(
        queued(&mut v, reader),
        vec![
            (2, QueueOp::Prepare(DurabilityLevel::PersistToMajority)),
            (3, QueueOp::Abort { prepared: Seqno(2) }),
            (4, QueueOp::Mutation),
        ],
        "the sync write's items keep their slots; the plain rewrite replaces the plain write"
    );
}

#[test]
fn a_durable_delete_commits_a_tombstone_and_add_respects_the_committed_state() {
    let mut v = vb();
    let plain = ctx(1000);
    let d = durable(DurabilityLevel::Majority);
    let p = v
        .store(&set(b"k", b"v", StoreKind::Add, 0), Datatype::RAW, &d)
        .unwrap();
    assert_eq!(value(&mut v, b"k"), Err(EngineError::KeyNotFound));
    v.commit(p.seqno, &plain).unwrap();
    assert_eq!(v.num_items, 1);
    let del = v.delete(b"k", Cas::ZERO, &d).unwrap();
    assert_eq!(value(&mut v, b"k").unwrap(), b"v");
    v.commit(del.seqno, &plain).unwrap();
    assert_eq!(value(&mut v, b"k"), Err(EngineError::KeyNotFound));
    assert_eq!(v.num_items, 0);
    assert!(v.ht.get(b"k").unwrap().meta.deleted);
}

#[test]
fn expiry_and_eviction_leave_a_pending_key_alone() {
    let mut v = vb();
    let mut expiring = set(b"k", b"v", StoreKind::Set, 0);
    expiring.expiry_wire = 1010;
    v.store(&expiring, Datatype::RAW, &ctx(1000)).unwrap();
    let p = v
        .store(
            &set(b"k", b"w", StoreKind::Set, 0),
            Datatype::RAW,
            &durable(DurabilityLevel::Majority),
        )
        .unwrap();
    let later = ctx(2000);
    assert_eq!(v.expire_due(&later, 10), 0);
    v.mark_persisted(b"k", Seqno(1));
    assert_eq!(v.evict_key(b"k"), 0, "pinned while pending");
    assert_eq!(v.high_seqno, p.seqno, "nothing written meanwhile");
    v.commit(p.seqno, &later).unwrap();
    assert_eq!(value(&mut v, b"k").unwrap(), b"w");
}

fn replica() -> VbInner {
    let mut v = vb();
    v.state = VbState::Replica;
    v
}

fn change(key: &str, seqno: u64, op: QueueOp, value: &str) -> ReplicaChange {
    ReplicaChange {
        key: Bytes::copy_from_slice(key.as_bytes()),
        value: Bytes::copy_from_slice(value.as_bytes()),
        meta: ItemMeta {
            seqno: Seqno(seqno),
            cas: Cas(seqno * 100),
            rev_seqno: 1,
            ..ItemMeta::default()
        },
        op,
    }
}

#[test]
fn a_replica_commits_the_prepare_it_holds() {
    let mut v = replica();
    let level = DurabilityLevel::Majority;
    v.apply_replica(change("k", 1, QueueOp::Prepare(level), "v"), true)
        .unwrap();
    assert!(v.ht.get(b"k").is_none(), "a prepare is not a document");
    assert_eq!(v.prepares.high_prepared_seqno(), Seqno(1));
    let commit = QueueOp::Commit { prepared: Seqno(1) };
    v.apply_replica(change("k", 2, commit, ""), true).unwrap();
    let sv = v.ht.get(b"k").unwrap();
    assert_eq!((sv.meta.seqno, sv.meta.cas), (Seqno(2), Cas(100)));
    assert_eq!(sv.value.as_deref(), Some(&b"v"[..]), "the prepare's value");
    assert_eq!(v.num_items, 1);
    assert_eq!(v.prepares.high_completed_seqno(), Seqno(1));
}

#[test]
fn a_replica_refuses_completions_that_contradict_its_prepares() {
    let mut v = replica();
    let commit = QueueOp::Commit { prepared: Seqno(1) };
    assert_eq!(
        v.apply_replica(change("k", 2, commit, ""), true),
        Err(EngineError::Pending(PendingError::UnknownPrepare {
            prepared: Seqno(1),
            pending: None
        }))
    );
    let level = DurabilityLevel::Majority;
    v.apply_replica(change("k", 3, QueueOp::Prepare(level), "v"), true)
        .unwrap();
    assert_eq!(
        v.apply_replica(change("k", 4, QueueOp::Mutation, "x"), true),
        Err(EngineError::Pending(PendingError::PrepareOutstanding {
            pending: Seqno(3)
        })),
        "memory snapshot"
    );
    // A disk snapshot is deduplicated: the committed document stands for the commit.
    v.replica_snapshot_kind = SnapshotKind::Disk;
    v.apply_replica(change("k", 5, QueueOp::Mutation, "x"), true)
        .unwrap();
    assert!(v.prepares.is_empty());
    let abort = QueueOp::Abort { prepared: Seqno(6) };
    v.apply_replica(change("j", 7, abort, ""), true).unwrap();
    assert_eq!(v.high_seqno, Seqno(7));
}

#[test]
fn a_promoted_replica_serves_no_key_with_an_inherited_prepare_until_it_commits() {
    let mut v = replica();
    let level = DurabilityLevel::Majority;
    v.apply_replica(change("k", 1, QueueOp::Mutation, "old"), true)
        .unwrap();
    v.apply_replica(change("k", 2, QueueOp::Prepare(level), "new"), true)
        .unwrap();
    v.state = VbState::Active;
    assert!(v.prepares.inherit());
    let plain = ctx(1000);
    assert_eq!(
        value(&mut v, b"k"),
        Err(EngineError::SyncWriteReCommitInProgress)
    );
    assert_eq!(
        v.store(&set(b"k", b"x", StoreKind::Set, 0), Datatype::RAW, &plain),
        Err(EngineError::SyncWriteReCommitInProgress)
    );
    v.commit(Seqno(2), &plain).unwrap();
    assert_eq!(value(&mut v, b"k").unwrap(), b"new");
}
