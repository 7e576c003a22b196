//! Which live replica becomes the active when a vbucket's active failed: the most advanced
//! copy that is known to be complete.
//!
//! Why not simply the first replica: with two replicas, a durable write is acknowledged once
//! the active and one replica hold it, and that replica may be the second. Promoting a first
//! replica that lags loses the write, and the second replica then rolls back to the new
//! active's history. So the nodes are asked how far their copies are, and the copy ahead
//! wins, compared by:
//! 1. the highest SyncWrite prepare it received: a prepare is what a durable write's
//!    acknowledgement stands on, and a promoted copy commits the prepares it holds;
//! 2. then its high seqno;
//! 3. then chain order (the earlier slot on a tie), which keeps the map stable when every
//!    copy is level.
//!
//! A copy only competes when its node answered and the copy is complete. An incomplete copy
//! (inside a deduplicated disk snapshot, mid-rollback or mid-rebuild) does not hold a prefix
//! of the active's history: its seqnos do not say which writes it has, so it is never
//! chosen, not even over a copy that is behind.

use sluice_types::Seqno;

/// How far one replica copy of a vbucket is, as its node reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyPosition {
    /// The highest SyncWrite prepare seqno the copy received.
    pub high_prepared: Seqno,
    /// The copy's high seqno.
    pub high_seqno: Seqno,
    /// Whether the copy holds a consistent prefix of the active's history: false while it is
    /// mid-rollback or mid-rebuild, i.e. inside a deduplicated disk snapshot it has not
    /// finished.
    pub complete: bool,
}

impl CopyPosition {
    /// The order copies are compared in (see the module comment).
    fn rank(&self) -> (Seqno, Seqno) {
        (self.high_prepared, self.high_seqno)
    }
}

/// The index of the most advanced complete copy among `copies` (in chain order; `None` for a
/// copy whose node did not answer), the earliest on a tie; `None` if no copy is known
/// complete.
pub(super) fn most_advanced(copies: impl Iterator<Item = Option<CopyPosition>>) -> Option<usize> {
    let mut best: Option<(usize, (Seqno, Seqno))> = None;
    for (at, copy) in copies.enumerate() {
        let Some(copy) = copy.filter(|c| c.complete) else {
            continue;
        };
        // Strictly greater: a later slot only wins by being ahead.
        if best.is_none_or(|(_, rank)| copy.rank() > rank) {
            best = Some((at, copy.rank()));
        }
    }
    best.map(|(at, _)| at)
}
