//! The source-side pre-check of large documents (Couchbase's optimistic replication
//! threshold, `optimisticReplicationThreshold`, 256 bytes unless the replication's settings
//! say otherwise): a document whose value is larger is not sent on the chance that it wins. The target is first asked for the key's metadata
//! (GET_META, the tombstone's if the key was deleted), the target's conflict resolution is
//! applied here, and a version that would lose is not sent at all
//! (`docs_failed_cr_source`). That saves the bytes of versions the target already has,
//! which is what replication both ways sends back. Smaller documents and deletions go
//! optimistically: the target resolves them (`docs_failed_cr_target`).
//!
//! [`loses_at_target`] is pure; [`precheck`] does the round trip.

use sluice_client::{ClientError, ClusterClient, ClusterError, DocMeta, Op, OpResult, Status};
use sluice_engine::{resolve_conflict, ConflictResolution, Resolution, VersionMeta};
use sluice_proto::request::WithMetaOp;
use sluice_types::{Cas, Datatype};

/// Whether `op` is a set larger than `threshold` bytes, to be checked first.
pub fn needs_check(op: &Op, threshold: u32) -> bool {
    matches!(op, Op::WithMeta { op: WithMetaOp::Set | WithMetaOp::Add, value, .. }
        if value.len() as u64 > u64::from(threshold))
}

/// Whether the target, holding `there`, would refuse `op` (a set) under `mode`.
pub fn loses_at_target(mode: ConflictResolution, there: &DocMeta, op: &Op) -> bool {
    let Op::WithMeta {
        op: kind,
        meta,
        datatype,
        ..
    } = op
    else {
        return false;
    };
    // ADD_WITH_META is refused by a live document whatever its version.
    if *kind == WithMetaOp::Add && !there.deleted {
        return true;
    }
    let xattr = |d: u8| d & Datatype::XATTR != 0;
    let existing = VersionMeta {
        rev_seqno: there.rev_seqno,
        cas: there.cas,
        expiry: there.expiry,
        flags: there.flags,
        xattrs: xattr(there.datatype),
    };
    let incoming = VersionMeta {
        rev_seqno: meta.rev_seqno,
        cas: Cas(meta.cas),
        expiry: meta.expiry,
        flags: meta.flags,
        xattrs: xattr(*datatype),
    };
    resolve_conflict(mode, &existing, &incoming, false) != Resolution::Accept
}

/// `ops` (one target collection's share of a batch, `client` in that collection) with the
/// large sets that would lose at the target taken out, with their `along` entries; and how
/// many were taken out. Only the sets above `threshold` bytes are checked. A GET_META that fails (KEY_ENOENT: the target has no version of
/// the key; or any error) keeps its set: the target resolves it.
pub async fn precheck<T>(
    client: &ClusterClient,
    mode: ConflictResolution,
    threshold: u32,
    ops: Vec<Op>,
    along: Vec<T>,
) -> (Vec<Op>, Vec<T>, u64) {
    debug_assert_eq!(ops.len(), along.len());
    let checked: Vec<usize> = (0..ops.len())
        .filter(|&i| needs_check(&ops[i], threshold))
        .collect();
    if checked.is_empty() {
        return (ops, along, 0);
    }
    let asks: Vec<Op> = checked
        .iter()
        .map(|&i| Op::GetMeta {
            key: ops[i].key().clone(),
        })
        .collect();
    let answers = client.execute_many(asks).await;
    let mut drop = vec![false; ops.len()];
    for (&i, answer) in checked.iter().zip(answers) {
        match answer {
            Ok(OpResult::Meta(there)) => drop[i] = loses_at_target(mode, &there, &ops[i]),
            Err(ClusterError::Client(ClientError::Status(Status::KeyEnoent))) => {}
            Ok(_) | Err(_) => {}
        }
    }
    let dropped = drop.iter().filter(|d| **d).count() as u64;
    let (mut kept_ops, mut kept) = (Vec::with_capacity(ops.len()), Vec::with_capacity(ops.len()));
    for ((op, a), d) in ops.into_iter().zip(along).zip(drop) {
        if !d {
            kept_ops.push(op);
            kept.push(a);
        }
    }
    (kept_ops, kept, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use sluice_cluster::metadata::{OPTIMISTIC_THRESHOLD_DEFAULT, OPTIMISTIC_THRESHOLD_MAX};
    use sluice_proto::request::{WithMeta, WithMetaOptions};

    fn set(kind: WithMetaOp, bytes: usize, rev: u64, cas: u64, datatype: u8) -> Op {
        Op::WithMeta {
            op: kind,
            key: Bytes::from_static(b"k"),
            value: Bytes::from(vec![b'x'; bytes]),
            meta: WithMeta {
                flags: 0,
                expiry: 0,
                rev_seqno: rev,
                cas,
                options: WithMetaOptions(0),
            },
            datatype,
        }
    }

    fn there(rev: u64, cas: u64, deleted: bool) -> DocMeta {
        DocMeta {
            deleted,
            flags: 0,
            expiry: 0,
            rev_seqno: rev,
            cas: Cas(cas),
            datatype: 0,
        }
    }

    #[test]
    fn only_sets_above_the_threshold_are_checked() {
        let t = OPTIMISTIC_THRESHOLD_DEFAULT;
        assert!(needs_check(&set(WithMetaOp::Set, 257, 1, 1, 0), t));
        assert!(needs_check(&set(WithMetaOp::Add, 1000, 1, 1, 0), t));
        assert!(!needs_check(&set(WithMetaOp::Set, 256, 1, 1, 0), t));
        assert!(!needs_check(&set(WithMetaOp::Delete, 1000, 1, 1, 0), t));
        // Threshold 0 checks every set with a value; the largest checks none.
        assert!(needs_check(&set(WithMetaOp::Set, 1, 1, 1, 0), 0));
        assert!(!needs_check(&set(WithMetaOp::Set, 0, 1, 1, 0), 0));
        assert!(!needs_check(
            &set(WithMetaOp::Set, 1 << 20, 1, 1, 0),
            OPTIMISTIC_THRESHOLD_MAX
        ));
        let plain = Op::Set {
            key: Bytes::from_static(b"k"),
            value: Bytes::from(vec![0; 1000]),
            options: Default::default(),
        };
        assert!(!needs_check(&plain, 0));
    }

    #[test]
    fn the_targets_rules_decide_here() {
        use ConflictResolution::{LastWriteWins as Lww, Revision as Rev};
        let s = |rev, cas| set(WithMetaOp::Set, 1000, rev, cas, 0);
        // (mode, what the target has, what is sent, loses)
        let rows = [
            (Rev, there(5, 100, false), s(6, 1), false),
            (Rev, there(5, 100, false), s(4, 999), true),
            (Rev, there(5, 100, false), s(5, 100), true),
            (Rev, there(5, 100, false), s(5, 101), false),
            (Lww, there(5, 100, false), s(1, 101), false),
            (Lww, there(5, 100, false), s(9, 99), true),
            (Lww, there(5, 100, false), s(5, 100), true),
            // A tombstone with more revisions wins over a set too.
            (Rev, there(9, 100, true), s(6, 200), true),
            // ADD_WITH_META: refused by any live document, not by a tombstone it beats.
            (
                Rev,
                there(1, 1, false),
                set(WithMetaOp::Add, 1000, 9, 9, 0),
                true,
            ),
            (
                Rev,
                there(1, 1, true),
                set(WithMetaOp::Add, 1000, 9, 9, 0),
                false,
            ),
            // The same version, but only the incoming one has xattrs: it is sent.
            (
                Rev,
                there(5, 100, false),
                set(WithMetaOp::Set, 1000, 5, 100, Datatype::XATTR),
                false,
            ),
        ];
        for (i, (mode, t, op, loses)) in rows.iter().enumerate() {
            assert_eq!(loses_at_target(*mode, t, op), *loses, "row {i}");
        }
    }
}
