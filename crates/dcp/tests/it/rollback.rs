//! The stream-request rollback decision (protocol.md §4.3), one table row per case: the
//! producer's failover table, high and purge seqnos, what the client asked for, and the
//! decision. Rows named "lesson N" are client problem N of dcp-lessons.md.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use sluice_dcp::rollback::{decide, ProducerHistory, RollbackDecision};
use sluice_proto::dcp::{StreamFlags, StreamRequest};
use sluice_types::{FailoverEntry, FailoverLog, Seqno, VbUuid};

const W: u64 = 0x57;
const X: u64 = 0x58;
const Y: u64 = 0x59;
const UNKNOWN: u64 = 0xdead;
/// The spec's example history: W from 0, X from 500, Y (current) from 900.
const SPEC_TABLE: &[(u64, u64)] = &[(Y, 900), (X, 500), (W, 0)];

const NONE: StreamFlags = StreamFlags(0);
const STRICT: StreamFlags = StreamFlags::STRICT_VB_UUID;
const IGNORE_PURGED: StreamFlags = StreamFlags::IGNORE_PURGED_TOMBSTONES;

const CONTINUE: RollbackDecision = RollbackDecision::Continue;
const fn to(seqno: u64) -> RollbackDecision {
    RollbackDecision::RollbackTo(Seqno(seqno))
}

struct Row {
    name: &'static str,
    /// (uuid, seqno), newest first.
    failover: &'static [(u64, u64)],
    high: u64,
    purge: u64,
    flags: StreamFlags,
    uuid: u64,
    start: u64,
    snap: (u64, u64),
    client_purge: Option<u64>,
    want: RollbackDecision,
}

const BASE: Row = Row {
    name: "",
    failover: SPEC_TABLE,
    high: 1000,
    purge: 0,
    flags: NONE,
    uuid: Y,
    start: 0,
    snap: (0, 0),
    client_purge: None,
    want: CONTINUE,
};

const ROWS: &[Row] = &[
    Row {
        name: "spec example: client ahead on an abandoned branch rolls back to its end",
        uuid: W,
        start: 1000,
        snap: (1000, 1000),
        want: to(500),
        ..BASE
    },
    // Lesson 1: "from now" must not roll back.
    Row {
        name: "lesson 1: from now with the current uuid and the high seqno",
        uuid: Y,
        start: 1000,
        snap: (1000, 1000),
        ..BASE
    },
    Row {
        name: "lesson 1: from now, inside the last snapshot",
        uuid: Y,
        start: 1000,
        snap: (950, 1000),
        ..BASE
    },
    Row {
        name: "lesson 1: from now on a fresh vbucket (high seqno 0)",
        failover: &[(W, 0)],
        high: 0,
        uuid: W,
        ..BASE
    },
    Row {
        name: "current uuid, behind the high seqno",
        uuid: Y,
        start: 950,
        snap: (900, 990),
        ..BASE
    },
    // Lesson 2: what the snapshot bounds say the client holds.
    Row {
        name: "lesson 2: start == snap_start holds nothing of the snapshot, so the \
               snapshot's end past the branch does not matter",
        uuid: X,
        start: 800,
        snap: (800, 1000),
        ..BASE
    },
    Row {
        name: "lesson 2: start == snap_start, but start itself is past the branch end",
        uuid: X,
        start: 950,
        snap: (950, 1000),
        want: to(900),
        ..BASE
    },
    Row {
        name: "lesson 2: start == snap_end holds the whole snapshot: back to the branch \
               end, not to the snapshot start",
        uuid: X,
        start: 1000,
        snap: (600, 1000),
        want: to(900),
        ..BASE
    },
    Row {
        name: "lesson 2: start == snap_start == snap_end on the branch's last seqno",
        uuid: X,
        start: 900,
        snap: (900, 900),
        ..BASE
    },
    Row {
        name: "part of a snapshot that crosses the branch end: back to the snapshot start",
        uuid: X,
        start: 950,
        snap: (850, 1000),
        want: to(850),
        ..BASE
    },
    Row {
        name: "part of a snapshot that ends at the branch end",
        uuid: X,
        start: 880,
        snap: (850, 900),
        ..BASE
    },
    Row {
        name: "current branch, start above the high seqno: back to the high seqno",
        failover: &[(W, 0)],
        high: 100,
        uuid: W,
        start: 150,
        snap: (150, 150),
        want: to(100),
        ..BASE
    },
    Row {
        name: "current branch, start above the high seqno, snapshot starts lower",
        failover: &[(W, 0)],
        high: 100,
        uuid: W,
        start: 150,
        snap: (80, 200),
        want: to(80),
        ..BASE
    },
    // Lesson 6: a wrong uuid rolls back to 0 only when no history is shared.
    Row {
        name: "lesson 6: unknown uuid: no common history",
        uuid: UNKNOWN,
        start: 500,
        snap: (500, 500),
        want: to(0),
        ..BASE
    },
    Row {
        name: "lesson 6: uuid 0 with data: no common history",
        uuid: 0,
        start: 100,
        snap: (100, 100),
        want: to(0),
        ..BASE
    },
    Row {
        name: "lesson 6: an older uuid the producer still has is not 'wrong'",
        uuid: W,
        start: 300,
        snap: (200, 400),
        ..BASE
    },
    // Lesson 8: after a failover, the closest valid seqno, not 0.
    Row {
        name: "lesson 8: replica promoted at 500, client on the old branch at 600",
        failover: &[(X, 500), (W, 0)],
        high: 520,
        uuid: W,
        start: 600,
        snap: (600, 600),
        want: to(500),
        ..BASE
    },
    Row {
        name: "lesson 8: client on the old branch exactly at the failover point",
        failover: &[(X, 500), (W, 0)],
        high: 700,
        uuid: W,
        start: 500,
        snap: (400, 500),
        ..BASE
    },
    Row {
        name: "lesson 8: two failovers, client two branches back",
        uuid: W,
        start: 700,
        snap: (650, 700),
        want: to(500),
        ..BASE
    },
    // Lesson 9: no uuid, nothing held.
    Row {
        name: "lesson 9: start 0 with uuid 0",
        uuid: 0,
        ..BASE
    },
    Row {
        name: "lesson 9: start 0 with uuid 0, even with StrictVbUuid and purged tombstones",
        flags: STRICT,
        purge: 300,
        uuid: 0,
        ..BASE
    },
    Row {
        name: "start 0 with a stale uuid is not checked without StrictVbUuid",
        uuid: UNKNOWN,
        ..BASE
    },
    // StrictVbUuid.
    Row {
        name: "strict, start 0, known uuid",
        flags: STRICT,
        uuid: W,
        ..BASE
    },
    Row {
        name: "strict, start 0, unknown uuid: the branch is gone",
        flags: STRICT,
        uuid: UNKNOWN,
        want: to(0),
        ..BASE
    },
    Row {
        name: "strict, start 0: the purge rule does not apply to a client holding nothing",
        flags: STRICT,
        purge: 300,
        uuid: Y,
        ..BASE
    },
    // The purge seqno.
    Row {
        name: "purge: start below the purge seqno may have missed deletes",
        purge: 500,
        uuid: Y,
        start: 100,
        snap: (100, 100),
        want: to(0),
        ..BASE
    },
    Row {
        name: "purge: IgnorePurgedTombstones skips the rule",
        flags: IGNORE_PURGED,
        purge: 500,
        uuid: Y,
        start: 100,
        snap: (100, 100),
        ..BASE
    },
    Row {
        name: "purge: IgnorePurgedTombstones still checks the history",
        flags: IGNORE_PURGED,
        purge: 500,
        uuid: UNKNOWN,
        start: 100,
        snap: (100, 100),
        want: to(0),
        ..BASE
    },
    Row {
        name: "purge: the client already saw this purge seqno",
        purge: 500,
        uuid: Y,
        start: 100,
        snap: (100, 100),
        client_purge: Some(500),
        ..BASE
    },
    Row {
        name: "purge: the client saw an older purge seqno",
        purge: 500,
        uuid: Y,
        start: 100,
        snap: (100, 100),
        client_purge: Some(400),
        want: to(0),
        ..BASE
    },
    Row {
        name: "purge: start equal to the purge seqno",
        purge: 500,
        uuid: X,
        start: 500,
        snap: (500, 500),
        ..BASE
    },
    Row {
        name: "purge: start above the purge seqno, then the history rule applies",
        purge: 500,
        uuid: X,
        start: 950,
        snap: (950, 950),
        want: to(900),
        ..BASE
    },
];

fn log_of(entries: &[(u64, u64)]) -> FailoverLog {
    FailoverLog::from_entries(
        entries
            .iter()
            .map(|&(uuid, seqno)| FailoverEntry {
                uuid: VbUuid(uuid),
                seqno: Seqno(seqno),
            })
            .collect(),
    )
}

fn request(flags: StreamFlags, uuid: u64, start: u64, snap: (u64, u64)) -> StreamRequest {
    StreamRequest {
        flags,
        start: Seqno(start),
        end: Seqno::MAX,
        vb_uuid: VbUuid(uuid),
        snap_start: Seqno(snap.0),
        snap_end: Seqno(snap.1),
    }
}

#[test]
fn table() {
    let mut failures = Vec::new();
    for row in ROWS {
        let log = log_of(row.failover);
        let producer = ProducerHistory {
            high_seqno: Seqno(row.high),
            purge_seqno: Seqno(row.purge),
            failover: &log,
        };
        let req = request(row.flags, row.uuid, row.start, row.snap);
        let got = decide(&req, row.client_purge.map(Seqno), &producer);
        if got != row.want {
            failures.push(format!("{}: got {got:?}, want {:?}", row.name, row.want));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// Over every valid request on a small grid: a rollback never goes forward, and the point it
/// names is one the client can resume from at once (so no closer point was passed over);
/// 0 comes only from the purge rule, an unknown uuid, or a snapshot that starts at 0.
#[test]
fn the_rollback_point_is_the_newest_shared_seqno() {
    let log = log_of(SPEC_TABLE);
    let grid = [
        0, 1, 400, 499, 500, 501, 600, 899, 900, 901, 950, 1000, 1100,
    ];
    for high in [900, 1000] {
        let producer = ProducerHistory {
            high_seqno: Seqno(high),
            purge_seqno: Seqno(0),
            failover: &log,
        };
        for uuid in [0, W, X, Y, UNKNOWN] {
            for &start in &grid {
                for &ss in grid.iter().filter(|&&s| s <= start) {
                    for &se in grid.iter().filter(|&&s| s >= start) {
                        let req = request(NONE, uuid, start, (ss, se));
                        let RollbackDecision::RollbackTo(to) = decide(&req, None, &producer) else {
                            continue;
                        };
                        let case = format!("uuid {uuid:#x} start {start} snap {ss}..{se}");
                        assert!(to.0 <= start, "{case}: rolled forward to {to}");
                        // The client keeps the newest of its entries that began at or before
                        // the rollback point (its log is the producer's, up to its uuid).
                        let Some(pos) = log.entries().iter().position(|e| e.uuid.0 == uuid) else {
                            assert_eq!(to, Seqno(0), "{case}");
                            continue;
                        };
                        let kept = log.entries()[pos..]
                            .iter()
                            .find(|e| e.seqno <= to)
                            .expect("the oldest entry starts at 0");
                        let again = request(NONE, kept.uuid.0, to.0, (to.0, to.0));
                        assert_eq!(
                            decide(&again, None, &producer),
                            RollbackDecision::Continue,
                            "{case}: rolled back to {to}, which is not a resume point"
                        );
                        if to == Seqno(0) {
                            assert_eq!(ss, 0, "{case}: rolled back to 0 past a closer point");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn an_empty_failover_log_shares_nothing() {
    let log = FailoverLog::default();
    let producer = ProducerHistory {
        high_seqno: Seqno(10),
        purge_seqno: Seqno(0),
        failover: &log,
    };
    assert_eq!(decide(&request(NONE, W, 5, (5, 5)), None, &producer), to(0));
    assert_eq!(
        decide(&request(NONE, W, 0, (0, 0)), None, &producer),
        CONTINUE
    );
}
