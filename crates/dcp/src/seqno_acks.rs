//! What a replication feed tells its producer about each replica vbucket: how far it is
//! applied in memory and on disk (DCP_SEQNO_ACKNOWLEDGED), which durable writes on the
//! active wait for.
//!
//! Only prepares wait for acks, so a vbucket is acked only while it holds a prepare the last
//! ack did not cover, in memory or on disk (Couchbase acks its "high prepared seqno" for the
//! same reason). A stream of plain mutations sends no acks at all: before this, every
//! snapshot end was acked, which at tens of thousands of sets a second was about one ack
//! per write, each read, locked and matched against the durability monitor on the active.
//!
//! When: the end of a snapshot holding an unacked prepare is acked as soon as it is applied,
//! since a writer is waiting for it. A prepare applied mid-snapshot, and the disk catching
//! up with a prepare, are acked on a short timer ([`SeqnoAcks::due`]). After a restart
//! (a rollback, or a producer that accepted the stream) the timer acks what the replica
//! holds once, prepares or not. An ack always says the applied and persisted seqnos, which
//! cover every prepare at or below them. No I/O here: the caller reads the persisted seqnos
//! and sends the acks.

use sluice_types::{Seqno, VbId};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Default, Clone, Copy)]
struct VbAcks {
    snap_end: Seqno,
    applied: Seqno,
    /// The highest prepare applied (0: none since the stream started).
    high_prepared: Seqno,
    acked_in_memory: Seqno,
    acked_persisted: Seqno,
    /// A restart: the next tick acks what the replica holds, whatever it is.
    forced: bool,
}

impl VbAcks {
    /// A prepare is applied that no in-memory ack covered.
    fn memory_behind(&self) -> bool {
        self.high_prepared > self.acked_in_memory
    }

    /// Persisted up to `p`: a prepare at or below it that no persisted ack covered.
    fn disk_behind(&self, p: Seqno) -> bool {
        self.high_prepared.min(p) > self.acked_persisted
    }

    /// Nothing more to say until a new prepare: every prepare is acked persisted.
    fn settled(&self) -> bool {
        !self.forced && self.acked_persisted >= self.high_prepared
    }

    fn ack(&mut self, p: Seqno) -> (Seqno, Seqno) {
        self.acked_in_memory = self.applied;
        self.acked_persisted = p;
        self.forced = false;
        (self.applied, p)
    }
}

/// Whether an applied change is a prepare (the only kind of change acks are for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    Prepare,
    Other,
}

#[derive(Debug, Default)]
pub struct SeqnoAcks {
    vbs: BTreeMap<VbId, VbAcks>,
    /// Vbuckets the timer must look at: a prepare not acked in memory or on disk, or a
    /// restart not acked yet.
    unacked: BTreeSet<VbId>,
}

impl SeqnoAcks {
    /// A snapshot marker: its end is where the next immediate ack happens.
    pub fn snapshot(&mut self, vb: VbId, end: Seqno) {
        self.vbs.entry(vb).or_default().snap_end = end;
    }

    /// `seqno` of `vb` was applied. Returns the ack to send now `(in_memory, persisted)` if
    /// it ends its snapshot and a prepare waits for it; `persisted` is read only then.
    pub fn applied(
        &mut self,
        vb: VbId,
        seqno: Seqno,
        kind: Applied,
        persisted: impl FnOnce() -> Option<Seqno>,
    ) -> Option<(Seqno, Seqno)> {
        let v = self.vbs.entry(vb).or_default();
        v.applied = seqno;
        if kind == Applied::Prepare {
            v.high_prepared = seqno;
            self.unacked.insert(vb);
        }
        if seqno < v.snap_end || !v.memory_behind() {
            return None;
        }
        let p = persisted().unwrap_or_default().min(seqno);
        let ack = v.ack(p);
        if v.settled() {
            self.unacked.remove(&vb);
        }
        Some(ack)
    }

    /// The stream of `vb` starts again with the replica holding up to `at`: after a
    /// rollback to `at`, or when the producer accepted a request from there. Either way the
    /// producer knows nothing true of this copy (it forgets a replica's acks when its
    /// connection closes, and a new active has none), so the next timer tick says what it
    /// holds, even if nothing is ever streamed: a prepare it holds may wait for that ack.
    pub fn restarted(&mut self, vb: VbId, at: Seqno) {
        self.vbs.insert(
            vb,
            VbAcks {
                snap_end: at,
                applied: at,
                // Whatever it holds may include prepares: until acked persisted, the disk
                // catching up is acked too.
                high_prepared: at,
                acked_in_memory: Seqno(0),
                acked_persisted: Seqno(0),
                forced: true,
            },
        );
        self.unacked.insert(vb);
    }

    /// Whether anything waits for the timer.
    pub fn pending(&self) -> bool {
        !self.unacked.is_empty()
    }

    /// The acks the timer sends: every vbucket with a restart to report, or a prepare
    /// applied or persisted since its last ack, as `(vb, in_memory, persisted)`.
    pub fn due(&mut self, persisted: impl Fn(VbId) -> Option<Seqno>) -> Vec<(VbId, Seqno, Seqno)> {
        let mut out = Vec::new();
        let mut settled = Vec::new();
        for &vb in &self.unacked {
            let v = self.vbs.get_mut(&vb).expect("unacked vbuckets are tracked");
            let p = persisted(vb).unwrap_or_default().min(v.applied);
            if v.forced || v.memory_behind() || v.disk_behind(p) {
                let (in_memory, persisted) = v.ack(p);
                out.push((vb, in_memory, persisted));
            }
            if v.settled() {
                settled.push(vb);
            }
        }
        for vb in settled {
            self.unacked.remove(&vb);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VB: VbId = VbId(3);
    const P: Applied = Applied::Prepare;
    const O: Applied = Applied::Other;

    #[test]
    fn a_prepares_snapshot_end_is_acked_at_once_and_its_middle_on_the_timer() {
        let mut a = SeqnoAcks::default();
        a.snapshot(VB, Seqno(12));
        assert_eq!(a.applied(VB, Seqno(10), P, || panic!("not read")), None);
        assert!(a.pending());
        assert_eq!(a.due(|_| Some(Seqno(4))), vec![(VB, Seqno(10), Seqno(4))]);
        assert_eq!(a.due(|_| Some(Seqno(4))), vec![], "nothing new");
        assert_eq!(a.applied(VB, Seqno(11), O, || panic!("not read")), None);
        assert_eq!(
            a.applied(VB, Seqno(12), O, || Some(Seqno(10))),
            None,
            "the prepare was acked in memory already"
        );
        assert!(a.pending(), "the prepare is not on disk yet");
        assert_eq!(a.due(|_| Some(Seqno(12))), vec![(VB, Seqno(12), Seqno(12))]);
        assert!(!a.pending(), "the prepare is acked persisted");
    }

    #[test]
    fn a_snapshot_ending_in_a_prepare_is_acked_at_once() {
        let mut a = SeqnoAcks::default();
        a.snapshot(VB, Seqno(5));
        assert_eq!(a.applied(VB, Seqno(4), O, || panic!("not read")), None);
        assert_eq!(
            a.applied(VB, Seqno(5), P, || Some(Seqno(5))),
            Some((Seqno(5), Seqno(5)))
        );
        assert!(!a.pending(), "acked in memory and on disk");
    }

    /// No prepare, no ack: plain writes never wait for one (before, every snapshot end
    /// was acked, about one ack per write under load).
    #[test]
    fn plain_writes_are_never_acked() {
        let mut a = SeqnoAcks::default();
        for end in 1..=100u64 {
            a.snapshot(VB, Seqno(end));
            assert_eq!(a.applied(VB, Seqno(end), O, || panic!("not read")), None);
        }
        assert!(!a.pending());
        assert_eq!(a.due(|_| Some(Seqno(100))), vec![]);
    }

    #[test]
    fn the_disk_catching_up_with_a_prepare_is_acked_on_the_timer() {
        let mut a = SeqnoAcks::default();
        a.snapshot(VB, Seqno(7));
        assert_eq!(
            a.applied(VB, Seqno(7), P, || Some(Seqno(2))),
            Some((Seqno(7), Seqno(2)))
        );
        assert_eq!(a.due(|_| Some(Seqno(2))), vec![], "the disk did not move");
        // Later plain writes move the applied seqno; the disk reaching the prepare is news.
        a.snapshot(VB, Seqno(9));
        assert_eq!(a.applied(VB, Seqno(9), O, || panic!("not read")), None);
        assert_eq!(a.due(|_| Some(Seqno(8))), vec![(VB, Seqno(9), Seqno(8))]);
        assert!(!a.pending());
        assert_eq!(
            a.due(|_| Some(Seqno(9))),
            vec![],
            "settled: no prepare left"
        );
    }

    #[test]
    fn persisted_never_exceeds_applied() {
        let mut a = SeqnoAcks::default();
        assert_eq!(
            a.applied(VB, Seqno(5), P, || Some(Seqno(9))),
            Some((Seqno(5), Seqno(5)))
        );
        assert!(!a.pending());
    }

    #[test]
    fn a_rollback_is_acked_on_the_next_tick() {
        let mut a = SeqnoAcks::default();
        a.applied(VB, Seqno(50), P, || Some(Seqno(50)));
        a.restarted(VB, Seqno(0));
        assert!(a.pending());
        assert_eq!(a.due(|_| Some(Seqno(0))), vec![(VB, Seqno(0), Seqno(0))]);
        assert!(!a.pending());
    }

    #[test]
    fn a_stream_accepted_is_acked_on_the_next_tick_with_nothing_streamed() {
        let mut a = SeqnoAcks::default();
        a.restarted(VB, Seqno(7));
        assert!(a.pending());
        assert_eq!(a.due(|_| Some(Seqno(7))), vec![(VB, Seqno(7), Seqno(7))]);
        assert!(!a.pending());
    }

    /// What a restarted replica holds may include prepares: until it is on disk, the disk
    /// catching up is acked too.
    #[test]
    fn a_restart_ahead_of_the_disk_is_acked_until_the_disk_catches_up() {
        let mut a = SeqnoAcks::default();
        a.restarted(VB, Seqno(7));
        assert_eq!(a.due(|_| Some(Seqno(3))), vec![(VB, Seqno(7), Seqno(3))]);
        assert!(a.pending());
        assert_eq!(a.due(|_| Some(Seqno(7))), vec![(VB, Seqno(7), Seqno(7))]);
        assert!(!a.pending());
    }
}
