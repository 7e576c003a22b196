//! Per-vbucket XDCR checkpoints, and which of them a target still honours.
//!
//! A [`Record`] of source vbucket `source.vb` says: every change of it up to
//! `source.seqno` was written at the target, lost its conflict there, or was filtered; and
//! the target's answers to those writes named, per target vbucket, the history (vbucket
//! uuid) and seqno of the newest one ([`XdcrTargetAck`]).
//!
//! The target may later lose writes it acknowledged: an unclean restart loses what was not
//! on disk, a failover to a lagging replica what the replica lacked. The vbucket then goes
//! on from a new branch of its history, begun at the seqno it kept, and its failover log
//! says so. A record *survives* if each of its acknowledgements is still on the target's
//! history: its uuid is in the target vbucket's failover log, and its seqno is not past the
//! seqno where the next branch began. Everything the target acknowledged before it, on that
//! history, is then still there too (a history is a line).
//!
//! Each source vbucket keeps a [`Ring`] of up to [`RECORDS_MAX`] records, newest first, at
//! least [`RECORD_EVERY_MS`] apart (the newest is moved in place until it is that old). A
//! resume takes the newest record that survives: only the vbuckets whose recent writes the
//! target lost go back, and only as far as they must; with none surviving, the vbucket
//! starts again from zero (what the target still has then loses to itself).
//!
//! While a pipeline runs, [`Histories`] holds the history each target vbucket answered
//! with. A record only moves on answers of the history it was checked against: an answer
//! naming another one stops the run, and the next start checks the records again.
//!
//! Sans-IO: the failover logs and the clock are passed in.

use sluice_client::dcp::DcpPosition;
use sluice_cluster::metadata::{XdcrCheckpoint, XdcrTargetAck};
use sluice_types::{FailoverEntry, Seqno, VbId, VbUuid};
use std::collections::{BTreeMap, HashMap, VecDeque};

/// Records kept per source vbucket.
pub const RECORDS_MAX: usize = 8;
/// The least age of the newest record before the next one is added (rather than the
/// newest moved): a target loses at most what it had not persisted or replicated, so a
/// record a second old usually survives when the newest does not.
pub const RECORD_EVERY_MS: u64 = 1_000;

/// One checkpoint of a source vbucket.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Record {
    pub source: DcpPosition,
    /// When it was made (Unix ms; 0 for a zero or adopted record): moving it in place
    /// keeps this, so the records' positions stay about [`RECORD_EVERY_MS`] apart.
    pub made_ms: u64,
    /// Sorted by target vbucket, one entry each.
    #[serde(default)]
    pub targets: Vec<XdcrTargetAck>,
}

/// A source vbucket's records, newest first; never empty.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ring {
    records: VecDeque<Record>,
}

/// Where a vbucket resumes, as [`Ring::resume`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// From its newest record (or from zero, having none).
    Newest,
    /// From an older record: the `dropped` newer ones claimed writes the target lost.
    Older { dropped: usize },
    /// From zero: no record survived (`dropped` of them).
    Zero { dropped: usize },
}

impl Resume {
    /// Whether the target lost writes this vbucket's checkpoints counted on.
    pub fn rewound(self) -> bool {
        !matches!(self, Resume::Newest)
    }
}

impl Ring {
    /// A vbucket with no checkpoint: it streams from zero.
    pub fn zero(vb: VbId) -> Ring {
        Ring::of(Record::at(DcpPosition::zero(vb)))
    }

    pub fn of(record: Record) -> Ring {
        Ring {
            records: VecDeque::from([record]),
        }
    }

    pub fn newest(&self) -> &Record {
        self.records.front().expect("a ring is never empty")
    }

    /// How many records it holds (at least one).
    pub fn records(&self) -> usize {
        self.records.len()
    }

    /// The vbucket streamed to `to`, and the target answered its writes since the newest
    /// record with `acks` (any order; the newest per target vbucket wins). Callers move a
    /// record only on answers of the histories it was checked against ([`Histories`]).
    pub fn advance(&mut self, to: DcpPosition, acks: &[XdcrTargetAck], now_ms: u64) {
        let newest = self.newest();
        assert_eq!(to.vb, newest.source.vb, "a ring holds one vbucket");
        let mut targets: BTreeMap<u16, XdcrTargetAck> =
            newest.targets.iter().map(|t| (t.vb, *t)).collect();
        for a in acks {
            let e = targets.entry(a.vb).or_insert(*a);
            if a.uuid != e.uuid || a.seqno >= e.seqno {
                *e = *a;
            }
        }
        // The newest moves in place until it is a record's spacing old; a fresh ring's
        // zero record is kept under the first real one (a resume may need it).
        let young = newest.made_ms > 0 && now_ms.saturating_sub(newest.made_ms) < RECORD_EVERY_MS;
        let record = Record {
            source: to,
            made_ms: if young { newest.made_ms } else { now_ms },
            targets: targets.into_values().collect(),
        };
        if young {
            self.records[0] = record;
        } else {
            self.records.push_front(record);
            self.records.truncate(RECORDS_MAX);
        }
    }

    /// Puts `record` (another node's, further along) first.
    pub fn adopt(&mut self, record: Record) {
        assert_eq!(record.source.vb, self.newest().source.vb);
        self.records.push_front(record);
        self.records.truncate(RECORDS_MAX);
    }

    /// Every target vbucket some record names.
    pub fn target_vbuckets(&self) -> impl Iterator<Item = u16> + '_ {
        self.records
            .iter()
            .flat_map(|r| r.targets.iter().map(|t| t.vb))
    }

    /// Drops the records the target no longer honours, newest first, down to the newest
    /// that survives (or a zero record). `log` gives a target vbucket's failover log,
    /// newest entry first; a target vbucket without one honours nothing.
    pub fn resume<'a>(&mut self, log: impl Fn(u16) -> Option<&'a [FailoverEntry]>) -> Resume {
        let vb = self.newest().source.vb;
        let survives = |r: &Record| {
            r.targets
                .iter()
                .all(|t| log(t.vb).is_some_and(|l| honours(l, t)))
        };
        let Some(keep) = self.records.iter().position(survives) else {
            let dropped = self.records.len();
            *self = Ring::zero(vb);
            return Resume::Zero { dropped };
        };
        self.records.drain(..keep);
        if keep == 0 {
            Resume::Newest
        } else if self.newest().source.seqno == Seqno(0) {
            Resume::Zero { dropped: keep }
        } else {
            Resume::Older { dropped: keep }
        }
    }

    /// The newest record, as the replicated metadata keeps it.
    pub fn to_replicated(&self) -> XdcrCheckpoint {
        let r = self.newest();
        XdcrCheckpoint {
            vb: r.source.vb.0,
            vb_uuid: r.source.vb_uuid.0,
            seqno: r.source.seqno.0,
            snap_start: r.source.snap_start.0,
            snap_end: r.source.snap_end.0,
            targets: r.targets.clone(),
        }
    }
}

impl Record {
    /// A bare position: no target answers, no age.
    pub fn at(source: DcpPosition) -> Record {
        Record {
            source,
            made_ms: 0,
            targets: Vec::new(),
        }
    }

    /// A replicated checkpoint as a record.
    pub fn from_replicated(c: &XdcrCheckpoint) -> Record {
        Record {
            targets: c.targets.clone(),
            ..Record::at(DcpPosition {
                vb: VbId(c.vb),
                vb_uuid: VbUuid(c.vb_uuid),
                seqno: Seqno(c.seqno),
                snap_start: Seqno(c.snap_start),
                snap_end: Seqno(c.snap_end),
            })
        }
    }
}

/// Whether a target vbucket whose failover log is `log` (newest first) still has the
/// write acknowledged as `ack`.
pub fn honours(log: &[FailoverEntry], ack: &XdcrTargetAck) -> bool {
    let Some(i) = log.iter().position(|e| e.uuid.0 == ack.uuid) else {
        return false; // a history the target no longer knows (or never had)
    };
    // The branch after `ack.uuid`'s began at that seqno: what came later on `ack.uuid` is
    // gone. The newest branch goes on.
    i == 0 || ack.seqno <= log[i - 1].seqno.0
}

/// The history each target vbucket answered with during one run.
#[derive(Debug, Default)]
pub struct Histories {
    uuids: HashMap<u16, u64>,
}

impl Histories {
    /// Starts from the target's failover logs as read before the run: their newest
    /// branches are the ones the records were checked against.
    pub fn from_logs<'a>(logs: impl Iterator<Item = (u16, &'a [FailoverEntry])>) -> Histories {
        Histories {
            uuids: logs
                .filter_map(|(vb, log)| log.first().map(|e| (vb, e.uuid.0)))
                .collect(),
        }
    }

    /// Notes an answer's history; `false` if the vbucket answered with another one before
    /// (it took a new branch since: what the records say of it must be checked again).
    pub fn note(&mut self, ack: &XdcrTargetAck) -> bool {
        *self.uuids.entry(ack.vb).or_insert(ack.uuid) == ack.uuid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(uuid: u64, seqno: u64) -> FailoverEntry {
        FailoverEntry {
            uuid: VbUuid(uuid),
            seqno: Seqno(seqno),
        }
    }

    fn ack(vb: u16, uuid: u64, seqno: u64) -> XdcrTargetAck {
        XdcrTargetAck { vb, uuid, seqno }
    }

    fn at(seqno: u64) -> DcpPosition {
        DcpPosition::at(VbId(4), VbUuid(0xa), Seqno(seqno))
    }

    #[test]
    fn an_acknowledgement_survives_up_to_where_the_next_branch_began() {
        // Branches: 10 from 0, 20 from 500, 30 from 900 (newest).
        let log = [entry(30, 900), entry(20, 500), entry(10, 0)];
        let table = [
            (ack(0, 30, 5_000), true, "the newest branch goes on"),
            (ack(0, 20, 900), true, "the last write the next branch kept"),
            (ack(0, 20, 901), false, "past where the newest branch began"),
            (ack(0, 10, 500), true, "the oldest branch, up to 500"),
            (
                ack(0, 10, 501),
                false,
                "written after 500 on a branch that ended there",
            ),
            (ack(0, 40, 1), false, "a history the log does not know"),
        ];
        for (a, want, why) in table {
            assert_eq!(honours(&log, &a), want, "{why}: {a:?}");
        }
    }

    #[test]
    fn records_are_spaced_and_bounded_and_acks_accumulate() {
        let mut ring = Ring::zero(VbId(4));
        ring.advance(at(10), &[ack(4, 1, 100)], 1_000);
        assert_eq!(ring.records(), 2, "the zero record stays under the first");
        // Moved in place within a second, acks merged per target vbucket.
        ring.advance(at(20), &[ack(4, 1, 120), ack(5, 2, 7)], 1_500);
        ring.advance(at(25), &[ack(4, 1, 110)], 1_900); // an older answer does not go back
        assert_eq!(ring.records(), 2);
        assert_eq!(ring.newest().source.seqno, Seqno(25));
        assert_eq!(ring.newest().targets, [ack(4, 1, 120), ack(5, 2, 7)]);
        // A second later: a new record, carrying what the one before acknowledged.
        ring.advance(at(30), &[], 2_600);
        assert_eq!(ring.records(), 3);
        assert_eq!(ring.newest().targets, [ack(4, 1, 120), ack(5, 2, 7)]);
        for i in 0..20 {
            ring.advance(at(40 + i), &[], 4_000 + i * 1_000);
        }
        assert_eq!(ring.records(), RECORDS_MAX);
        assert_eq!(ring.newest().source.seqno, Seqno(59));
    }

    #[test]
    fn a_resume_takes_the_newest_record_the_target_honours() {
        let mut ring = Ring::zero(VbId(4));
        ring.advance(at(10), &[ack(4, 1, 100)], 1_000);
        ring.advance(at(20), &[ack(4, 1, 200)], 2_000);
        ring.advance(at(30), &[ack(4, 1, 300)], 3_000);
        let logs: HashMap<u16, Vec<FailoverEntry>> = HashMap::from([(4, vec![entry(1, 0)])]);
        let log = |vb: u16| logs.get(&vb).map(Vec::as_slice);
        assert_eq!(ring.clone().resume(log), Resume::Newest);

        // The target restarted uncleanly having persisted up to 250: the newest record
        // counted on writes it lost; the one before did not.
        let logs: HashMap<u16, Vec<FailoverEntry>> =
            HashMap::from([(4, vec![entry(2, 250), entry(1, 0)])]);
        let log = |vb: u16| logs.get(&vb).map(Vec::as_slice);
        let mut older = ring.clone();
        assert_eq!(older.resume(log), Resume::Older { dropped: 1 });
        assert_eq!(older.newest().source.seqno, Seqno(20));
        assert_eq!(older.records(), 3);

        // Kept only up to 50: back to the zero record.
        let logs: HashMap<u16, Vec<FailoverEntry>> =
            HashMap::from([(4, vec![entry(2, 50), entry(1, 0)])]);
        let log = |vb: u16| logs.get(&vb).map(Vec::as_slice);
        let mut zero = ring.clone();
        assert_eq!(zero.resume(log), Resume::Zero { dropped: 3 });
        assert_eq!(zero.newest().source, DcpPosition::zero(VbId(4)));

        // A target vbucket whose log could not be read honours nothing.
        let mut unread = ring.clone();
        assert_eq!(unread.resume(|_| None), Resume::Zero { dropped: 3 });
        assert!(Resume::Older { dropped: 1 }.rewound() && !Resume::Newest.rewound());
    }

    #[test]
    fn a_ring_without_its_zero_record_rewinds_to_a_fresh_zero() {
        let mut ring = Ring::of(Record::from_replicated(&XdcrCheckpoint {
            vb: 4,
            vb_uuid: 0xa,
            seqno: 30,
            snap_start: 30,
            snap_end: 30,
            targets: vec![ack(9, 1, 300)],
        }));
        assert_eq!(ring.to_replicated().targets, [ack(9, 1, 300)]);
        let log = [entry(3, 10), entry(1, 0)];
        assert_eq!(
            ring.resume(|vb| (vb == 9).then_some(&log[..])),
            Resume::Zero { dropped: 1 }
        );
        assert_eq!(ring.newest().source, DcpPosition::zero(VbId(4)));
    }

    #[test]
    fn an_answer_of_another_history_is_caught() {
        let logs = [(4u16, vec![entry(7, 100), entry(1, 0)])];
        let mut h = Histories::from_logs(logs.iter().map(|(vb, l)| (*vb, l.as_slice())));
        assert!(h.note(&ack(4, 7, 150)));
        assert!(
            !h.note(&ack(4, 8, 151)),
            "vbucket 4 took a new branch during the run"
        );
        assert!(h.note(&ack(5, 3, 1)), "a vbucket first answering");
        assert!(!h.note(&ack(5, 4, 2)));
    }
}
