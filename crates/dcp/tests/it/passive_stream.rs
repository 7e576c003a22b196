//! The consumer's passive-stream decisions, as tables: the rollback plan, and scripts of
//! refusals, retries and stream ends with the decision each must produce.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use sluice_dcp::passive::{
    rollback_plan, AllEnded, Applied, PassiveStreams, RollbackPlan, STREAM_RETRY_WAIT,
};
use sluice_types::{Seqno, VbId};
use std::time::{Duration, Instant};

#[test]
fn rollback_plan_table() {
    // (rollback to, replica high seqno, plan)
    let rows: &[(u64, u64, RollbackPlan)] = &[
        (0, 0, RollbackPlan::Resume { seqno: Seqno(0) }),
        (100, 100, RollbackPlan::Resume { seqno: Seqno(100) }),
        // The producer's history reaches past ours: keep everything, resume at our high.
        (150, 100, RollbackPlan::Resume { seqno: Seqno(100) }),
        // We hold seqnos the producer never had (or lost on failover): start over.
        (99, 100, RollbackPlan::StartOver),
        (0, 100, RollbackPlan::StartOver),
    ];
    for &(to, high, want) in rows {
        assert_eq!(
            rollback_plan(Seqno(to), Seqno(high)),
            want,
            "ROLLBACK({to}) with high seqno {high}"
        );
    }
}

#[derive(Debug, Clone, Copy)]
enum Step {
    /// At t ms, the producer refuses vb's stream.
    Refused(u64, u16),
    /// At t ms, these vbuckets are due for a retry (taken).
    Due(u64, &'static [u16]),
    /// The earliest retry is at t ms (None: no retry).
    NextRetry(Option<u64>),
    /// A retried stream restarted (or not).
    Restarted(bool),
    AllEnded(AllEnded),
    /// (idle, done)
    State(bool, bool),
}

use Step::*;

struct Row {
    name: &'static str,
    steps: &'static [Step],
}

const WAIT_MS: u64 = STREAM_RETRY_WAIT.as_millis() as u64;

const ROWS: &[Row] = &[
    Row {
        name: "no refusal: when every stream ends the connection is done",
        steps: &[State(false, false), AllEnded(AllEnded::Done)],
    },
    Row {
        name: "a refused stream is asked for again after the wait, not before",
        steps: &[
            Refused(0, 5),
            NextRetry(Some(WAIT_MS)),
            Due(WAIT_MS - 1, &[]),
            Due(WAIT_MS, &[5]),
            NextRetry(None),
            Due(WAIT_MS * 2, &[]),
        ],
    },
    Row {
        name: "retries are due each at its own time",
        steps: &[
            Refused(0, 1),
            Refused(50, 2),
            NextRetry(Some(WAIT_MS)),
            Due(WAIT_MS, &[1]),
            NextRetry(Some(WAIT_MS + 50)),
            Due(WAIT_MS + 50, &[2]),
        ],
    },
    Row {
        name: "a second refusal pushes the retry back",
        steps: &[
            Refused(0, 1),
            Refused(100, 1),
            Due(WAIT_MS, &[]),
            Due(WAIT_MS + 100, &[1]),
        ],
    },
    Row {
        name: "all ended with a retry pending: idle until it restarts a stream",
        steps: &[
            Refused(0, 3),
            AllEnded(AllEnded::WaitForRetries),
            State(true, false),
            Due(WAIT_MS, &[3]),
            Restarted(true),
            State(false, false),
        ],
    },
    Row {
        name: "all ended, and the retried vbucket is no replica any more: done",
        steps: &[
            Refused(0, 3),
            AllEnded(AllEnded::WaitForRetries),
            Due(WAIT_MS, &[3]),
            Restarted(false),
            State(true, true),
        ],
    },
];

#[test]
fn retry_table() {
    for row in ROWS {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut p = PassiveStreams::default();
        for (i, step) in row.steps.iter().enumerate() {
            let ctx = format!("{}: step {i} {step:?}", row.name);
            match *step {
                Refused(t, vb) => p.on_refused(VbId(vb), at(t)),
                Due(t, want) => {
                    let got: Vec<u16> = p.take_due(at(t)).iter().map(|v| v.0).collect();
                    assert_eq!(got, want, "{ctx}");
                }
                NextRetry(want) => assert_eq!(p.next_retry(), want.map(at), "{ctx}"),
                Restarted(r) => p.on_restarted(r),
                AllEnded(want) => assert_eq!(p.on_all_ended(), want, "{ctx}"),
                State(idle, done) => {
                    assert_eq!((p.is_idle(), p.is_done()), (idle, done), "{ctx}")
                }
            }
        }
    }
}

#[test]
fn a_rollback_is_acknowledged_with_the_new_position() {
    let vb = VbId(7);
    let mut p = PassiveStreams::default();
    p.on_snapshot(vb, Seqno(40));
    assert_eq!(
        p.on_applied(vb, Seqno(40), Applied::Prepare, || Some(Seqno(40))),
        Some((Seqno(40), Seqno(40)))
    );
    assert!(!p.acks_pending());
    let RollbackPlan::StartOver = rollback_plan(Seqno(10), Seqno(40)) else {
        panic!("the replica is ahead of the producer's branch");
    };
    p.on_rolled_back(vb, Seqno(0));
    assert!(
        p.acks_pending(),
        "the producer must learn the replica went back"
    );
    assert_eq!(
        p.acks_due(|_| Some(Seqno(0))),
        vec![(vb, Seqno(0), Seqno(0))]
    );
}
