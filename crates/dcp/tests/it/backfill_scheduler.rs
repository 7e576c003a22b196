//! The backfill scheduler, one table row per scenario: a script of events and the task (or
//! none) each `next` must hand out. Backfill handles are plain numbers here, so a row shows
//! which open backfill a read continues.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use sluice_dcp::backfill::{BackfillLimits, BackfillScheduler, BackfillTask, StreamId};
use sluice_types::{Seqno, VbId};

const MIB: usize = 1 << 20;

#[derive(Debug, Clone, Copy)]
enum Step {
    /// `vb`'s stream `s` wants a backfill after `after`.
    Request(u16, u64, u64),
    Cancel(u16),
    /// `next(queued bytes)` hands out this task, or none.
    Next(usize, Want),
    /// A task of (vb, stream) returned; the bool is what `task_done` must answer.
    Done(u16, u64, bool),
    /// Park (vb, stream) with backfill handle n.
    Park(u16, u64, u32),
    Finish(u16),
    /// `open()`, `waiting()` and `in_flight()` are these.
    Counts(usize, usize, usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    None,
    /// Start (vb, stream, after).
    Start(u16, u64, u64),
    /// Read (vb, stream, handle).
    Read(u16, u64, u32),
}

use Step::*;

struct Row {
    name: &'static str,
    /// chunk, in flight, open, buffer (bytes).
    limits: (usize, usize, usize, usize),
    steps: &'static [Step],
}

const LIMITS: (usize, usize, usize, usize) = (4 * MIB, 2, 16, 20 * MIB);

const ROWS: &[Row] = &[
    Row {
        name: "a start, then reads until the scan ends",
        limits: LIMITS,
        steps: &[
            Request(1, 1, 10),
            Next(0, Want::Start(1, 1, 10)),
            Next(0, Want::None),
            Done(1, 1, true),
            Park(1, 1, 100),
            Counts(1, 0, 0),
            Next(0, Want::Read(1, 1, 100)),
            Done(1, 1, true),
            Park(1, 1, 100),
            Next(0, Want::Read(1, 1, 100)),
            Done(1, 1, true),
            Finish(1),
            Counts(0, 0, 0),
            Next(0, Want::None),
        ],
    },
    Row {
        name: "at most in_flight_max tasks at once; starts go in request order",
        limits: LIMITS,
        steps: &[
            Request(3, 1, 0),
            Request(1, 2, 0),
            Request(2, 3, 0),
            Next(0, Want::Start(3, 1, 0)),
            Next(0, Want::Start(1, 2, 0)),
            Next(0, Want::None),
            Counts(2, 1, 2),
            Done(1, 2, true),
            Park(1, 2, 7),
            Next(0, Want::Start(2, 3, 0)),
            Next(0, Want::None),
        ],
    },
    Row {
        name: "no new start while open_max backfills are open: reads go on",
        limits: (MIB, 1, 2, 20 * MIB),
        steps: &[
            Request(1, 1, 0),
            Request(2, 2, 0),
            Request(3, 3, 0),
            Next(0, Want::Start(1, 1, 0)),
            Done(1, 1, true),
            Park(1, 1, 10),
            Next(0, Want::Start(2, 2, 0)),
            Done(2, 2, true),
            Park(2, 2, 20),
            Counts(2, 1, 0),
            // Two open: vb 3 waits, the open ones take turns.
            Next(0, Want::Read(1, 1, 10)),
            Done(1, 1, true),
            Park(1, 1, 10),
            Next(0, Want::Read(2, 2, 20)),
            Done(2, 2, true),
            Finish(2),
            // One closed: vb 3 starts before vb 1 reads again.
            Next(0, Want::Start(3, 3, 0)),
        ],
    },
    Row {
        name: "reads wait while queued plus arriving bytes would pass the buffer",
        limits: (4 * MIB, 2, 16, 12 * MIB),
        steps: &[
            Request(1, 1, 0),
            Next(0, Want::Start(1, 1, 0)),
            Done(1, 1, true),
            Park(1, 1, 1),
            // 8 MiB queued + one 4 MiB chunk = 12 MiB: fits.
            Next(8 * MIB, Want::Read(1, 1, 1)),
            Done(1, 1, true),
            Park(1, 1, 1),
            // One byte more does not.
            Next(8 * MIB + 1, Want::None),
            Counts(1, 0, 0),
            Next(4 * MIB, Want::Read(1, 1, 1)),
        ],
    },
    Row {
        name: "chunks in flight count against the buffer",
        limits: (4 * MIB, 2, 16, 12 * MIB),
        steps: &[
            Request(1, 1, 0),
            Request(2, 2, 0),
            Next(0, Want::Start(1, 1, 0)),
            Next(0, Want::Start(2, 2, 0)),
            Done(1, 1, true),
            Park(1, 1, 1),
            Done(2, 2, true),
            Park(2, 2, 2),
            Next(4 * MIB, Want::Read(1, 1, 1)),
            // 4 MiB queued + (1 in flight + 1) × 4 MiB = 12 MiB: fits.
            Next(4 * MIB, Want::Read(2, 2, 2)),
        ],
    },
    Row {
        name: "a buffer under two chunks is raised to two, so a read can start",
        limits: (4 * MIB, 2, 16, MIB),
        steps: &[
            Request(1, 1, 0),
            Next(0, Want::Start(1, 1, 0)),
            Done(1, 1, true),
            Park(1, 1, 1),
            Next(0, Want::Read(1, 1, 1)),
        ],
    },
    Row {
        name: "a cancelled stream's task comes back stale, and still counted until then",
        limits: LIMITS,
        steps: &[
            Request(1, 1, 0),
            Next(0, Want::Start(1, 1, 0)),
            Cancel(1),
            Counts(1, 0, 1),
            // The vbucket's next stream asks again while the old start still runs.
            Request(1, 2, 5),
            Next(0, Want::Start(1, 2, 5)),
            Counts(2, 0, 2),
            Done(1, 1, false),
            Done(1, 2, true),
            Park(1, 2, 9),
            Next(0, Want::Read(1, 2, 9)),
        ],
    },
    Row {
        name: "cancel drops waiting and parked backfills alike",
        limits: (MIB, 1, 16, 20 * MIB),
        steps: &[
            Request(1, 1, 0),
            Request(2, 2, 0),
            Next(0, Want::Start(1, 1, 0)),
            Done(1, 1, true),
            Park(1, 1, 1),
            Cancel(2),
            Counts(1, 0, 0),
            Cancel(1),
            Counts(0, 0, 0),
            Next(0, Want::None),
        ],
    },
    Row {
        name: "a new request for a vbucket replaces its old one",
        limits: LIMITS,
        steps: &[
            Request(1, 1, 0),
            Request(1, 2, 50),
            Counts(0, 1, 0),
            Next(0, Want::Start(1, 2, 50)),
            Next(0, Want::None),
        ],
    },
    Row {
        name: "parked backfills take turns round-robin",
        limits: (MIB, 1, 16, 20 * MIB),
        steps: &[
            Request(1, 1, 0),
            Request(2, 2, 0),
            Next(0, Want::Start(1, 1, 0)),
            Done(1, 1, true),
            Park(1, 1, 1),
            Next(0, Want::Start(2, 2, 0)),
            Done(2, 2, true),
            Park(2, 2, 2),
            Next(0, Want::Read(1, 1, 1)),
            Done(1, 1, true),
            Park(1, 1, 1),
            Next(0, Want::Read(2, 2, 2)),
            Done(2, 2, true),
            Park(2, 2, 2),
            Next(0, Want::Read(1, 1, 1)),
        ],
    },
];

fn run(row: &Row) {
    let (chunk, in_flight, open, buffer) = row.limits;
    let mut s: BackfillScheduler<u32> =
        BackfillScheduler::new(BackfillLimits::new(chunk, in_flight, open, buffer));
    for (i, step) in row.steps.iter().enumerate() {
        let at = format!("{}: step {i} {step:?}", row.name);
        match *step {
            Request(vb, st, after) => s.request(VbId(vb), StreamId(st), Seqno(after)),
            Cancel(vb) => s.cancel(VbId(vb)),
            Next(queued, want) => {
                let got = match s.next(queued) {
                    None => Want::None,
                    Some(BackfillTask::Start {
                        key: vb,
                        stream,
                        after,
                    }) => Want::Start(vb.0, stream.0, after.0),
                    Some(BackfillTask::Read {
                        key: vb,
                        stream,
                        backfill,
                    }) => Want::Read(vb.0, stream.0, backfill),
                };
                assert_eq!(got, want, "{at}");
            }
            Done(vb, st, current) => {
                assert_eq!(s.task_done(VbId(vb), StreamId(st)), current, "{at}")
            }
            Park(vb, st, b) => s.park(VbId(vb), StreamId(st), b),
            Finish(vb) => s.finish(VbId(vb)),
            Counts(open, waiting, in_flight) => assert_eq!(
                (s.open(), s.waiting(), s.in_flight()),
                (open, waiting, in_flight),
                "{at}: (open, waiting, in flight)"
            ),
        }
    }
}

#[test]
fn backfill_scheduler_table() {
    for row in ROWS {
        run(row);
    }
}

#[test]
#[should_panic(expected = "never handed out")]
fn a_task_reported_twice_is_a_bug() {
    let mut s: BackfillScheduler<u32> =
        BackfillScheduler::new(BackfillLimits::new(MIB, 1, 1, 4 * MIB));
    s.task_done(VbId(0), StreamId(1));
}
