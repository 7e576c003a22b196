//! What a replication feed tells its producer about each replica vbucket: how far it is
//! applied in memory and on disk (DCP_SEQNO_ACKNOWLEDGED), which durable writes on the
//! active wait for.
//!
//! The end of each snapshot is acked as soon as it is applied, since a writer is waiting
//! for it. Anything applied mid-snapshot, and the disk catching up, is acked on a short
//! timer ([`SeqnoAcks::due`]) for as long as something is left unacked. No I/O here: the
//! caller reads the persisted seqnos and sends the acks.

use sluice_types::{Seqno, VbId};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Default, Clone, Copy)]
struct VbAcks {
    snap_end: Seqno,
    applied: Seqno,
    acked_in_memory: Seqno,
    acked_persisted: Seqno,
}

#[derive(Debug, Default)]
pub struct SeqnoAcks {
    vbs: BTreeMap<VbId, VbAcks>,
    /// Vbuckets with something applied or persisted that was not acked yet.
    unacked: BTreeSet<VbId>,
}

impl SeqnoAcks {
    /// A snapshot marker: its end is where the next immediate ack happens.
    pub fn snapshot(&mut self, vb: VbId, end: Seqno) {
        self.vbs.entry(vb).or_default().snap_end = end;
    }

    /// `seqno` of `vb` was applied. Returns the ack to send now `(in_memory, persisted)` if
    /// it ends its snapshot; `persisted` is read only then.
    pub fn applied(
        &mut self,
        vb: VbId,
        seqno: Seqno,
        persisted: impl FnOnce() -> Option<Seqno>,
    ) -> Option<(Seqno, Seqno)> {
        let v = self.vbs.entry(vb).or_default();
        v.applied = seqno;
        if seqno < v.snap_end {
            self.unacked.insert(vb);
            return None;
        }
        let p = persisted().unwrap_or_default().min(seqno);
        v.acked_in_memory = seqno;
        v.acked_persisted = p;
        if p < seqno {
            self.unacked.insert(vb);
        } else {
            self.unacked.remove(&vb);
        }
        Some((seqno, p))
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
                // Acked as more than it holds, so the next timer tick sends the truth.
                acked_in_memory: Seqno(u64::MAX),
                acked_persisted: Seqno(0),
            },
        );
        self.unacked.insert(vb);
    }

    /// Whether anything waits for the timer.
    pub fn pending(&self) -> bool {
        !self.unacked.is_empty()
    }

    /// The acks the timer sends: every vbucket whose applied or persisted seqno moved since
    /// its last ack, as `(vb, in_memory, persisted)`.
    pub fn due(&mut self, persisted: impl Fn(VbId) -> Option<Seqno>) -> Vec<(VbId, Seqno, Seqno)> {
        let mut out = Vec::new();
        let mut settled = Vec::new();
        for &vb in &self.unacked {
            let v = self.vbs.get_mut(&vb).expect("unacked vbuckets are tracked");
            let p = persisted(vb).unwrap_or_default().min(v.applied);
            if v.applied != v.acked_in_memory || p != v.acked_persisted {
                v.acked_in_memory = v.applied;
                v.acked_persisted = p;
                out.push((vb, v.applied, p));
            }
            if p >= v.applied {
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

    #[test]
    fn a_snapshot_end_is_acked_at_once_and_its_middle_on_the_timer() {
        let mut a = SeqnoAcks::default();
        a.snapshot(VB, Seqno(12));
        assert_eq!(a.applied(VB, Seqno(10), || panic!("not read")), None);
        assert!(a.pending());
        assert_eq!(a.due(|_| Some(Seqno(4))), vec![(VB, Seqno(10), Seqno(4))]);
        assert_eq!(a.due(|_| Some(Seqno(4))), vec![], "nothing new");
        assert_eq!(
            a.applied(VB, Seqno(12), || Some(Seqno(10))),
            Some((Seqno(12), Seqno(10)))
        );
        assert!(a.pending(), "the disk is behind");
        assert_eq!(a.due(|_| Some(Seqno(12))), vec![(VB, Seqno(12), Seqno(12))]);
        assert!(!a.pending(), "all acked and persisted");
    }

    #[test]
    fn persisted_never_exceeds_applied() {
        let mut a = SeqnoAcks::default();
        assert_eq!(
            a.applied(VB, Seqno(5), || Some(Seqno(9))),
            Some((Seqno(5), Seqno(5)))
        );
        assert!(!a.pending());
    }

    #[test]
    fn a_rollback_is_acked_on_the_next_tick() {
        let mut a = SeqnoAcks::default();
        a.applied(VB, Seqno(50), || Some(Seqno(50)));
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
}
