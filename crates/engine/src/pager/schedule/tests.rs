//! The pager's decisions in table form: each row is one step, with the time advanced by hand.

use super::*;
use PagerAction::*;

const CALM: MemoryPressure = MemoryPressure {
    recovery_needed: false,
    above_high_watermark: false,
};
/// Checkpoint memory past the recovery threshold.
const CKPT: MemoryPressure = MemoryPressure {
    recovery_needed: true,
    above_high_watermark: false,
};
/// Memory use past the high watermark.
const HIGH: MemoryPressure = MemoryPressure {
    recovery_needed: false,
    above_high_watermark: true,
};
const BOTH: MemoryPressure = MemoryPressure {
    recovery_needed: true,
    above_high_watermark: true,
};
const WAIT: PagerAction = Wait(TICK);
const PAUSE: PagerAction = Pause(FUTILE_RECOVERY_PAUSE);

/// One step: `at_ms` after the schedule's start, the counters say `memory` and the schedule
/// answers `expect`; when that is a recovery, `freed` bytes are reported back.
struct Row {
    at_ms: u64,
    memory: MemoryPressure,
    expect: PagerAction,
    freed: usize,
}

const fn row(at_ms: u64, memory: MemoryPressure, expect: PagerAction) -> Row {
    Row {
        at_ms,
        memory,
        expect,
        freed: 0,
    }
}

const fn recovery(at_ms: u64, memory: MemoryPressure, freed: usize) -> Row {
    Row {
        at_ms,
        memory,
        expect: RecoverCheckpoints,
        freed,
    }
}

struct Scenario {
    name: &'static str,
    expiry_interval_s: u64,
    purge_age_s: u64,
    rows: &'static [Row],
}

/// Long enough not to come due in a scenario about something else.
const HOUR: u64 = 3600;

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "a pass with nothing due only waits",
        expiry_interval_s: 10,
        purge_age_s: HOUR,
        rows: &[row(0, CALM, WAIT), row(250, CALM, WAIT)],
    },
    Scenario {
        name: "expiry runs every interval, not before",
        expiry_interval_s: 10,
        purge_age_s: HOUR,
        rows: &[
            row(9_999, CALM, WAIT),
            row(10_000, CALM, RunExpiry),
            row(10_000, CALM, WAIT),
            row(19_999, CALM, WAIT),
            row(20_000, CALM, RunExpiry),
            row(20_000, CALM, WAIT),
        ],
    },
    Scenario {
        name: "the expiry interval counts from when the last expiry ended",
        expiry_interval_s: 10,
        purge_age_s: HOUR,
        rows: &[
            row(10_000, CALM, RunExpiry),
            // The expiry took 2 s.
            row(12_000, CALM, WAIT),
            row(21_999, CALM, WAIT),
            row(22_000, CALM, RunExpiry),
            row(22_000, CALM, WAIT),
        ],
    },
    Scenario {
        name: "tombstones are purged every half purge age",
        expiry_interval_s: HOUR,
        purge_age_s: 60,
        rows: &[
            row(29_999, CALM, WAIT),
            row(30_000, CALM, PurgeTombstones),
            // The purge took 1 s: the next is 30 s after it ended.
            row(31_000, CALM, WAIT),
            row(60_999, CALM, WAIT),
            row(61_000, CALM, PurgeTombstones),
            row(61_000, CALM, WAIT),
        ],
    },
    Scenario {
        name: "tombstones are purged at most once a second, whatever the purge age",
        expiry_interval_s: HOUR,
        purge_age_s: 0,
        rows: &[
            row(999, CALM, WAIT),
            row(1_000, CALM, PurgeTombstones),
            row(1_000, CALM, WAIT),
            row(1_999, CALM, WAIT),
            row(2_000, CALM, PurgeTombstones),
        ],
    },
    Scenario {
        name: "expiry comes before the purge when both are due",
        expiry_interval_s: 10,
        purge_age_s: 20,
        rows: &[
            row(10_000, CALM, RunExpiry),
            row(10_000, CALM, PurgeTombstones),
            row(10_000, CALM, WAIT),
        ],
    },
    Scenario {
        name: "eviction runs above the high watermark only",
        expiry_interval_s: 10,
        purge_age_s: HOUR,
        rows: &[
            row(0, HIGH, Evict),
            row(0, CALM, WAIT),
            row(250, CALM, WAIT),
            row(500, HIGH, Evict),
            // Still above after the eviction: the next pass tries again, not this one.
            row(500, HIGH, WAIT),
            row(750, HIGH, Evict),
        ],
    },
    Scenario {
        name: "recovery runs while needed, and eviction is judged after it",
        expiry_interval_s: 10,
        purge_age_s: HOUR,
        rows: &[
            recovery(0, BOTH, 4096),
            row(0, HIGH, Evict),
            row(0, CALM, WAIT),
            recovery(250, BOTH, 4096),
            // The recovery brought memory below the high watermark: no eviction.
            row(250, CALM, WAIT),
        ],
    },
    Scenario {
        name: "a recovery that frees nothing while still needed pauses before the wait",
        expiry_interval_s: 10,
        purge_age_s: HOUR,
        rows: &[
            recovery(0, CKPT, 0),
            row(0, CKPT, PAUSE),
            row(20, CKPT, WAIT),
        ],
    },
    Scenario {
        name: "no pause when the recovery freed something",
        expiry_interval_s: 10,
        purge_age_s: HOUR,
        rows: &[recovery(0, CKPT, 1), row(0, CKPT, WAIT)],
    },
    Scenario {
        name: "no pause when the recovery freed nothing but is no longer needed",
        expiry_interval_s: 10,
        purge_age_s: HOUR,
        rows: &[recovery(0, CKPT, 0), row(0, CALM, WAIT)],
    },
    Scenario {
        name: "the pause is decided afresh each pass",
        expiry_interval_s: 10,
        purge_age_s: HOUR,
        rows: &[
            recovery(0, CKPT, 0),
            row(0, CKPT, PAUSE),
            row(20, CKPT, WAIT),
            row(270, CALM, WAIT),
        ],
    },
    Scenario {
        name: "a pass with everything due works in order: recover, evict, expire, purge, pause",
        expiry_interval_s: 10,
        purge_age_s: 20,
        rows: &[
            recovery(10_000, BOTH, 0),
            row(10_000, BOTH, Evict),
            row(10_000, BOTH, RunExpiry),
            row(10_000, BOTH, PurgeTombstones),
            row(10_000, BOTH, PAUSE),
            row(10_020, BOTH, WAIT),
            // Nothing timed is due again yet; the memory work is.
            recovery(10_270, BOTH, 0),
            row(10_270, BOTH, Evict),
            row(10_270, BOTH, PAUSE),
            row(10_290, BOTH, WAIT),
        ],
    },
];

#[test]
fn the_pager_decides_as_the_tables_say() {
    for s in SCENARIOS {
        let start = Instant::now();
        let mut pager = PagerSchedule::new(
            start,
            Duration::from_secs(s.expiry_interval_s),
            Duration::from_secs(s.purge_age_s),
        );
        for (i, r) in s.rows.iter().enumerate() {
            let got = pager.step(start + Duration::from_millis(r.at_ms), r.memory);
            assert_eq!(got, r.expect, "{}: row {i}", s.name);
            if got == RecoverCheckpoints {
                pager.recovered(r.freed);
            }
        }
    }
}

#[test]
#[should_panic(expected = "reported before the next step")]
fn a_recovery_must_be_reported_before_the_next_step() {
    let now = Instant::now();
    let mut pager = PagerSchedule::new(now, Duration::from_secs(10), Duration::from_secs(10));
    assert_eq!(pager.step(now, CKPT), RecoverCheckpoints);
    pager.step(now, CKPT);
}

#[test]
#[should_panic(expected = "only a recovery the schedule asked for")]
fn a_recovery_not_asked_for_cannot_be_reported() {
    let now = Instant::now();
    let mut pager = PagerSchedule::new(now, Duration::from_secs(10), Duration::from_secs(10));
    assert_eq!(pager.step(now, CALM), WAIT);
    pager.recovered(0);
}
