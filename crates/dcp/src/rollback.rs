//! Does a stream request need a rollback, and to where (protocol.md §4.3).
//!
//! A consumer says what it holds as (uuid, start seqno, snapshot bounds). The producer checks
//! that this is a prefix of its own history; if not, it answers ROLLBACK with the newest seqno
//! both histories share, so the consumer discards only what the producer never had. Rolling
//! back to 0 when a closer point exists makes clients re-read everything (dcp-lessons.md,
//! client problems 1, 6 and 8), so 0 is returned only when nothing closer is safe.

use sluice_proto::dcp::{StreamFlags, StreamRequest};
use sluice_types::{FailoverLog, Seqno, VbUuid};

/// What the producer knows about the vbucket's history.
#[derive(Debug, Clone, Copy)]
pub struct ProducerHistory<'a> {
    pub high_seqno: Seqno,
    /// The highest seqno of a tombstone purged from this vbucket.
    pub purge_seqno: Seqno,
    /// Newest entry first.
    pub failover: &'a FailoverLog,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RollbackDecision {
    /// The client's history is a prefix of the producer's: stream from its start.
    Continue,
    /// Answer ROLLBACK with this seqno; the client truncates to it and asks again.
    RollbackTo(Seqno),
}

/// Decides whether `req` must roll back first. Run after the request's own checks (in
/// particular `snap_start <= start <= snap_end`), as step 8 of the producer's validation.
///
/// `client_purge_seqno`: the `purge_seqno` the client sent in the stream-request JSON, if
/// any. A client that says it already knows about the producer's purges (it saw the same
/// purge seqno) is exempt from the purge rule.
pub fn decide(
    req: &StreamRequest,
    client_purge_seqno: Option<Seqno>,
    producer: &ProducerHistory<'_>,
) -> RollbackDecision {
    let start = req.start;
    let strict = req.flags.contains(StreamFlags::STRICT_VB_UUID);
    // A client that holds nothing cannot disagree with any history, unless it asks for the
    // uuid to be checked anyway (it wants to know the branch it follows still exists).
    if start == Seqno::ZERO && (!strict || req.vb_uuid == VbUuid(0)) {
        return RollbackDecision::Continue;
    }

    // Tombstones up to `purge_seqno` are gone: a client that stopped below it may have missed
    // deletes that can no longer be sent, so it must rebuild from scratch. Clients that do
    // not care about deletes opt out with IgnorePurgedTombstones.
    let purge_seqno = if req.flags.contains(StreamFlags::IGNORE_PURGED_TOMBSTONES) {
        Seqno::ZERO
    } else {
        producer.purge_seqno
    };
    if start < purge_seqno && start != Seqno::ZERO && client_purge_seqno != Some(purge_seqno) {
        return RollbackDecision::RollbackTo(Seqno::ZERO);
    }

    // The branch the client followed, and where the producer left it: the seqno at which the
    // next newer branch began, or the producer's high seqno if that branch is still current.
    let Some(upper) = branch_end(producer, req.vb_uuid) else {
        return RollbackDecision::RollbackTo(Seqno::ZERO); // no common history
    };

    let mut snap_start = req.snap_start;
    let mut snap_end = req.snap_end;
    if start == snap_start {
        // The client holds none of that snapshot's items, so it holds exactly up to `start`.
        snap_end = start;
    }
    // Also guards requests whose bounds were not validated (start > snap_end): a client
    // past the end of its branch never continues.
    if snap_end <= upper && start <= upper {
        return RollbackDecision::Continue;
    }
    if start == snap_end {
        // The client holds the whole snapshot, so everything up to `start` is consistent.
        snap_start = start;
    }
    // Otherwise it holds part of a snapshot, which is only consistent at the snapshot's start.
    RollbackDecision::RollbackTo(upper.min(snap_start))
}

/// Where the producer's copy of branch `uuid` ends, or `None` if the producer never had it.
/// Scanned oldest first, as the reference producer does, so a uuid that somehow appears twice
/// resolves to its oldest (smallest) bound.
fn branch_end(producer: &ProducerHistory<'_>, uuid: VbUuid) -> Option<Seqno> {
    let entries = producer.failover.entries();
    let i = entries.iter().rposition(|e| e.uuid == uuid)?;
    // The branch ends where the next newer one begins; the newest runs to the high seqno.
    Some(
        match i.checked_sub(1).and_then(|newer| entries.get(newer)) {
            Some(newer) => newer.seqno,
            None => producer.high_seqno,
        },
    )
}
