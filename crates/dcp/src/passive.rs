//! The consumer's decisions for one replication connection's streams: when to ask again for a
//! stream the producer refused, how to roll a replica back, when to acknowledge seqnos, and
//! when the connection has nothing left to follow.
//!
//! ```text
//!   stream requested ──► streaming ── ROLLBACK(to) ──► rollback_plan(to, high):
//!        ▲   │                           to ≥ high: Resume{to: high} (nothing to discard)
//!        │   │ refused (producer          to < high: StartOver (reset the vbucket, from 0)
//!        │   │ not active yet)            then on_rolled_back(vb, from) and ask again
//!        │   ▼
//!        └─ retry due (STREAM_RETRY_WAIT later, while the vbucket is a replica here)
//!
//!   all streams ended: retries pending ─► idle (wait for them) ; none ─► done
//! ```
//!
//! Acknowledgements ([`SeqnoAcks`]), only while a prepare waits for one: the end of a
//! snapshot is acked as soon as it is applied (a durable write on the active waits for it);
//! the rest, and the disk catching up, on a timer of [`ACK_INTERVAL`]; and what the replica
//! holds, on that timer, once the producer accepts its stream (a new active, or one that
//! forgot the replica's acks, learns it even if nothing more is streamed).
//!
//! No I/O and no clock: the caller passes `now` and reads the replica's positions.

pub use crate::seqno_acks::Applied;
use crate::seqno_acks::SeqnoAcks;
use sluice_types::{Seqno, VbId};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Pause before asking again for a stream the producer refused.
pub const STREAM_RETRY_WAIT: Duration = Duration::from_millis(200);
/// How often prepares applied or persisted since the last ack are acknowledged.
pub const ACK_INTERVAL: Duration = Duration::from_millis(2);

/// How a replica answers the producer's ROLLBACK(to).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RollbackPlan {
    /// Nothing to discard: ask again from `seqno` (the replica's high seqno), holding a
    /// complete snapshot there.
    Resume { seqno: Seqno },
    /// The replica holds writes the producer's history lacks. Storage keeps one version per
    /// key, so it cannot undo them one by one: the vbucket is emptied and followed from 0.
    StartOver,
}

/// What a ROLLBACK(to) means for a replica whose high seqno is `high`.
pub fn rollback_plan(to: Seqno, high: Seqno) -> RollbackPlan {
    if to >= high {
        RollbackPlan::Resume { seqno: high }
    } else {
        RollbackPlan::StartOver
    }
}

/// What the stream loop does once every stream has ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllEnded {
    /// Refused streams will be asked for again: wait for their retries.
    WaitForRetries,
    /// Nothing is left to follow on this connection.
    Done,
}

/// The decisions for one connection's passive streams.
#[derive(Debug, Default)]
pub struct PassiveStreams {
    /// Vbuckets whose stream the producer refused, and when to ask again.
    retries: BTreeMap<VbId, Instant>,
    acks: SeqnoAcks,
    /// Every stream ended; only refused ones may come back.
    idle: bool,
}

impl PassiveStreams {
    /// The producer refused `vb`'s stream (e.g. it has not made the vbucket active yet: both
    /// nodes apply a new map on their own).
    pub fn on_refused(&mut self, vb: VbId, now: Instant) {
        self.retries.insert(vb, now + STREAM_RETRY_WAIT);
    }

    /// When the earliest retry is due.
    pub fn next_retry(&self) -> Option<Instant> {
        self.retries.values().min().copied()
    }

    /// The vbuckets to ask for again now (taken out of the retry set).
    pub fn take_due(&mut self, now: Instant) -> Vec<VbId> {
        let due: Vec<VbId> = self
            .retries
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(vb, _)| *vb)
            .collect();
        for vb in &due {
            self.retries.remove(vb);
        }
        due
    }

    /// A stream was asked for again; `restarted` says whether it is streaming now.
    pub fn on_restarted(&mut self, restarted: bool) {
        self.idle &= !restarted;
    }

    /// The producer ended every stream of the connection.
    pub fn on_all_ended(&mut self) -> AllEnded {
        if self.retries.is_empty() {
            AllEnded::Done
        } else {
            self.idle = true;
            AllEnded::WaitForRetries
        }
    }

    /// No stream is open: events are not read until a retry restarts one.
    pub fn is_idle(&self) -> bool {
        self.idle
    }

    /// Idle with no retry left: the connection is done.
    pub fn is_done(&self) -> bool {
        self.idle && self.retries.is_empty()
    }

    /// A snapshot marker: its end is where the next immediate ack happens.
    pub fn on_snapshot(&mut self, vb: VbId, end: Seqno) {
        self.acks.snapshot(vb, end);
    }

    /// `seqno` of `vb` was applied. Returns the ack to send now `(in_memory, persisted)` if it
    /// ends its snapshot and a prepare waits for it; `persisted` is read only then.
    pub fn on_applied(
        &mut self,
        vb: VbId,
        seqno: Seqno,
        kind: Applied,
        persisted: impl FnOnce() -> Option<Seqno>,
    ) -> Option<(Seqno, Seqno)> {
        self.acks.applied(vb, seqno, kind, persisted)
    }

    /// `vb` was rolled back and is asked for again from `from`: the next ack says so.
    pub fn on_rolled_back(&mut self, vb: VbId, from: Seqno) {
        self.acks.restarted(vb, from);
    }

    /// The producer accepted the stream of `vb`, which holds up to `held` here: the next
    /// ack tick tells it so (see [`SeqnoAcks::restarted`]).
    pub fn on_opened(&mut self, vb: VbId, held: Seqno) {
        self.acks.restarted(vb, held);
    }

    /// Whether anything waits for the ack timer.
    pub fn acks_pending(&self) -> bool {
        self.acks.pending()
    }

    /// The acks the timer sends, as `(vb, in_memory, persisted)`.
    pub fn acks_due(
        &mut self,
        persisted: impl Fn(VbId) -> Option<Seqno>,
    ) -> Vec<(VbId, Seqno, Seqno)> {
        self.acks.due(persisted)
    }
}
