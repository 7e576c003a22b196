//! The pending-write rules, as a table: a replica's pending prepares, an event, the snapshot
//! kind, and what must come of it.

use super::*;
use sluice_types::Cas;

fn prepare(seqno: u64) -> Prepare {
    Prepare {
        meta: ItemMeta {
            seqno: Seqno(seqno),
            cas: Cas(seqno * 10),
            ..ItemMeta::default()
        },
        value: Bytes::from_static(b"v"),
        level: DurabilityLevel::Majority,
        maybe_visible: false,
    }
}

fn with(pending: &[(&'static str, u64)]) -> Prepares {
    let mut p = Prepares::default();
    for &(k, s) in pending {
        p.insert(Bytes::from_static(k.as_bytes()), prepare(s));
    }
    p
}

#[derive(Debug, PartialEq)]
enum Want {
    Apply,
    Superseded(u64),
    Completed(u64),
    AbortOfUnknown,
    Outstanding(u64),
    Unknown(u64, Option<u64>),
}

/// (pending of "k", event on "k", snapshot, outcome, pending of "k" after)
type Row = (Option<u64>, ReplicaEvent, SnapshotKind, Want, Option<u64>);

#[test]
fn replica_events_follow_the_table() {
    use ReplicaEvent::*;
    use SnapshotKind::*;
    let commit = |p| Commit { prepared: Seqno(p) };
    let abort = |p| Abort { prepared: Seqno(p) };
    let rows: Vec<Row> = vec![
        (None, Prepare, Memory, Want::Apply, None),
        (None, Committed, Memory, Want::Apply, None),
        (None, Prepare, Disk, Want::Apply, None),
        (Some(5), Prepare, Memory, Want::Outstanding(5), Some(5)),
        (Some(5), Committed, Memory, Want::Outstanding(5), Some(5)),
        (Some(5), Prepare, Disk, Want::Superseded(5), None),
        (Some(5), Committed, Disk, Want::Superseded(5), None),
        (Some(5), commit(5), Memory, Want::Completed(5), None),
        (Some(5), abort(5), Memory, Want::Completed(5), None),
        (Some(5), commit(5), Disk, Want::Completed(5), None),
        (
            Some(5),
            commit(4),
            Memory,
            Want::Unknown(4, Some(5)),
            Some(5),
        ),
        (None, commit(5), Memory, Want::Unknown(5, None), None),
        (None, commit(5), Disk, Want::Unknown(5, None), None),
        (None, abort(5), Memory, Want::Unknown(5, None), None),
        (None, abort(5), Disk, Want::AbortOfUnknown, None),
        (Some(5), abort(7), Disk, Want::AbortOfUnknown, None),
        (
            Some(5),
            abort(7),
            Memory,
            Want::Unknown(7, Some(5)),
            Some(5),
        ),
        (Some(7), abort(5), Disk, Want::Unknown(5, Some(7)), Some(7)),
    ];
    for (i, (pending, event, snapshot, want, after)) in rows.into_iter().enumerate() {
        let mut p = match pending {
            Some(s) => with(&[("other", 1), ("k", s)]),
            None => with(&[("other", 1)]),
        };
        let got = match p.on_replica(b"k", event, snapshot) {
            Ok((ReplicaOutcome::Apply, _)) => Want::Apply,
            Ok((ReplicaOutcome::Superseded(old), _)) => Want::Superseded(old.meta.seqno.0),
            Ok((ReplicaOutcome::Completed(done), _)) => Want::Completed(done.meta.seqno.0),
            Ok((ReplicaOutcome::AbortOfUnknown, _)) => Want::AbortOfUnknown,
            Err(PendingError::PrepareOutstanding { pending }) => Want::Outstanding(pending.0),
            Err(PendingError::UnknownPrepare { prepared, pending }) => {
                Want::Unknown(prepared.0, pending.map(|s| s.0))
            }
        };
        assert_eq!(got, want, "row {i}");
        assert_eq!(p.get(b"k").map(|x| x.meta.seqno.0), after, "row {i}: after");
        assert!(p.get(b"other").is_some(), "row {i}: other keys untouched");
        p.check_invariants();
    }
}

#[test]
fn completion_tracks_seqnos_and_memory() {
    let mut p = Prepares::default();
    let a = p.insert(Bytes::from_static(b"a"), prepare(3));
    let b = p.insert(Bytes::from_static(b"b"), prepare(4));
    assert!(a > 0 && b > 0);
    assert_eq!(p.mem_bytes() as isize, a + b);
    assert_eq!(p.high_prepared_seqno(), Seqno(4));
    assert_eq!(
        p.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert!(p.complete(b"a", Seqno(4)).is_none(), "not a's prepare");
    let (done, delta) = p.complete(b"b", Seqno(4)).unwrap();
    assert_eq!(done.meta.cas, Cas(40));
    assert_eq!(delta, -b);
    assert_eq!(p.high_completed_seqno(), Seqno(4));
    assert_eq!(p.len(), 1);
    assert_eq!(p.clear(), -a);
    assert!(p.is_empty());
}

#[test]
#[should_panic(expected = "one prepare per key")]
fn a_second_prepare_of_a_key_is_a_bug() {
    let mut p = with(&[("k", 1)]);
    p.insert(Bytes::from_static(b"k"), prepare(2));
}
