//! The flusher's decisions in table form: each row is one step, with the time advanced by
//! hand.

use super::*;
use FlusherAction::*;
use RoundOutcome::*;

/// Every scenario's checkpoint budget, so that backlogs read as thousandths of it.
const BUDGET: u64 = 1000;
const VBUCKETS: usize = 4;

/// One step: `at_ms` after the start, `backlog` checkpoint bytes wait and the bucket is
/// `stopping` or not; the schedule answers `expect`, and when that is a round, its
/// `outcome` is reported back.
#[derive(Clone, Copy)]
struct Row {
    at_ms: u64,
    backlog: u64,
    stopping: bool,
    expect: FlusherAction,
    outcome: RoundOutcome,
}

const fn row(at_ms: u64, backlog: u64, expect: FlusherAction) -> Row {
    Row {
        at_ms,
        backlog,
        stopping: false,
        expect,
        // Not reported: `expect` is no round.
        outcome: Failed,
    }
}

const fn round(at_ms: u64, backlog: u64, first_vb: usize, outcome: RoundOutcome) -> Row {
    Row {
        at_ms,
        backlog,
        stopping: false,
        expect: Flush { first_vb },
        outcome,
    }
}

impl Row {
    const fn stopping(self) -> Row {
        Row {
            stopping: true,
            ..self
        }
    }
}

struct Scenario {
    name: &'static str,
    flush_interval_ms: u64,
    rows: &'static [Row],
}

const fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "after a commit the next round waits out the rest of the interval",
        flush_interval_ms: 3,
        rows: &[
            round(0, 0, 0, Committed),
            row(1, 0, Sleep(ms(2))),
            round(3, 0, 1, Committed),
            row(3, 0, Sleep(ms(3))),
            round(6, 0, 2, Committed),
            // The round took exactly the interval: nothing left to wait.
            row(9, 0, Sleep(ms(0))),
        ],
    },
    Scenario {
        name: "after a commit longer than the interval the next round starts at once",
        flush_interval_ms: 3,
        rows: &[
            round(0, 0, 0, Committed),
            round(5, 0, 1, Committed),
            row(6, 0, Sleep(ms(2))),
        ],
    },
    Scenario {
        name: "with no interval rounds follow each other, their first vbucket rotating",
        flush_interval_ms: 0,
        rows: &[
            round(0, 0, 0, Committed),
            round(1, 0, 1, Committed),
            round(2, 0, 2, Committed),
            round(3, 0, 3, Committed),
            round(4, 0, 0, Committed),
        ],
    },
    Scenario {
        name: "an empty round waits until woken, and the rotation goes on",
        flush_interval_ms: 3,
        rows: &[
            round(0, 0, 0, Empty),
            row(0, 0, Wait(IDLE_WAIT)),
            round(100, 0, 1, Empty),
            row(100, 0, Wait(IDLE_WAIT)),
            round(150, 0, 2, Committed),
        ],
    },
    Scenario {
        name: "when stopping, commits follow each other without sleeping until one is empty",
        flush_interval_ms: 3,
        rows: &[
            round(0, 0, 0, Committed).stopping(),
            round(1, 0, 1, Committed).stopping(),
            round(2, 0, 2, Empty).stopping(),
            row(2, 0, Stop).stopping(),
            row(3, 0, Stop).stopping(),
        ],
    },
    Scenario {
        name: "shutdown during a commit: its interval is still waited out",
        flush_interval_ms: 3,
        rows: &[
            round(0, 0, 0, Committed),
            // Whether the bucket stops is judged when a round begins.
            row(1, 0, Sleep(ms(2))).stopping(),
            round(3, 0, 1, Empty).stopping(),
            row(3, 0, Stop).stopping(),
        ],
    },
    Scenario {
        name: "shutdown during an empty round: it waits (shutdown wakes it), then stops",
        flush_interval_ms: 3,
        rows: &[
            round(0, 0, 0, Empty),
            row(0, 0, Wait(IDLE_WAIT)).stopping(),
            round(1, 0, 1, Empty).stopping(),
            row(1, 0, Stop).stopping(),
        ],
    },
    Scenario {
        name: "a failed round stops the flusher for good",
        flush_interval_ms: 3,
        rows: &[round(0, 0, 0, Failed), row(0, 0, Stop), row(100, 0, Stop)],
    },
    Scenario {
        name: "the share rises at half the budget and falls below a fifth, before a round",
        flush_interval_ms: 0,
        rows: &[
            round(0, 499, 0, Committed),
            row(1, 500, SetShare(Share::Fair)),
            round(1, 500, 1, Committed),
            // Between the thresholds the share stays what it was.
            round(2, 300, 2, Committed),
            round(3, 200, 3, Committed),
            row(4, 199, SetShare(Share::Leftover)),
            round(4, 199, 0, Committed),
            round(5, 300, 1, Committed),
        ],
    },
];

#[test]
fn the_flusher_decides_as_the_tables_say() {
    for s in SCENARIOS {
        let start = Instant::now();
        let mut flusher = FlusherSchedule::new(ms(s.flush_interval_ms), VBUCKETS);
        for (i, r) in s.rows.iter().enumerate() {
            let seen = FlusherObservation {
                checkpoint_bytes: r.backlog,
                checkpoint_bytes_max: BUDGET,
                stopping: r.stopping,
            };
            let got = flusher.step(start + ms(r.at_ms), seen);
            assert_eq!(got, r.expect, "{}: row {i}", s.name);
            if let Flush { .. } = got {
                flusher.round_done(r.outcome);
            }
        }
    }
}

#[test]
fn the_share_follows_the_backlog_with_hysteresis() {
    let budget = 1000;
    // (backlog, current share, wanted share)
    let rows = [
        (0, Share::Leftover, Share::Leftover),
        (499, Share::Leftover, Share::Leftover),
        (500, Share::Leftover, Share::Fair),
        // Between the two thresholds the share stays what it was.
        (300, Share::Fair, Share::Fair),
        (300, Share::Leftover, Share::Leftover),
        (200, Share::Fair, Share::Fair),
        (199, Share::Fair, Share::Leftover),
    ];
    for (backlog, current, wanted) in rows {
        assert_eq!(
            share_for(backlog, budget, current),
            wanted,
            "{backlog} from {current:?}"
        );
    }
    // A bucket with no checkpoint budget never divides by zero.
    assert_eq!(share_for(5, 0, Share::Leftover), Share::Fair);
}

#[test]
#[should_panic(expected = "reported before the next step")]
fn a_round_must_be_reported_before_the_next_step() {
    let seen = FlusherObservation {
        checkpoint_bytes: 0,
        checkpoint_bytes_max: BUDGET,
        stopping: false,
    };
    let now = Instant::now();
    let mut flusher = FlusherSchedule::new(ms(3), VBUCKETS);
    assert_eq!(flusher.step(now, seen), Flush { first_vb: 0 });
    flusher.step(now, seen);
}

#[test]
#[should_panic(expected = "only a round the schedule handed out")]
fn a_round_not_handed_out_cannot_be_reported() {
    let mut flusher = FlusherSchedule::new(ms(3), VBUCKETS);
    flusher.round_done(Committed);
}
