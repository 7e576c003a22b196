//! The active durability monitor, one table row per scenario: a chain, the active's persisted
//! seqno, and a script of events with the commits and aborts each must return. Nodes are
//! numbers (0 is the active in every row, 7 is never in a chain); time is milliseconds after
//! the row's start.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use sluice_dcp::durability::{
    ActiveMonitor, AddError, Chain, Impossible, Outcome, ReplicaAck, Resolution,
};
use sluice_types::{DurabilityLevel, Seqno};
use std::time::{Duration, Instant};

const MAJ: DurabilityLevel = DurabilityLevel::Majority;
const PAM: DurabilityLevel = DurabilityLevel::MajorityAndPersistOnMaster;
const PTM: DurabilityLevel = DurabilityLevel::PersistToMajority;

/// A resolution: commit or abort of a seqno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum R {
    C(u64),
    A(u64),
}

use R::{A, C};

#[derive(Debug, Clone)]
enum Step {
    /// `add(seqno, level, deadline)` returns these.
    Add(u64, DurabilityLevel, Option<u64>, &'static [R]),
    /// `add(seqno, level, None)` refuses with this.
    Refused(u64, DurabilityLevel, AddError),
    /// `ack(node, {in_memory, persisted})` returns these.
    Ack(u32, u64, u64, &'static [R]),
    Forget(u32),
    /// `persisted(seqno)` returns these.
    Persisted(u64, &'static [R]),
    /// `tick(now)` returns these.
    Tick(u64, &'static [R]),
    /// `set_chain(active, replicas)` returns these.
    SetChain(u32, &'static [Option<u32>], &'static [R]),
    NextDeadline(Option<u64>),
    /// Exactly these seqnos are tracked.
    Tracked(&'static [u64]),
    /// (high prepared, high completed).
    Seqnos(u64, u64),
    /// `clear()` returns these.
    Clear(&'static [u64]),
}

use Step::*;

struct Row {
    name: &'static str,
    /// The active and its replica slots.
    chain: (u32, &'static [Option<u32>]),
    /// The active's persisted seqno at the start.
    persisted: u64,
    steps: &'static [Step],
}

const fn impossible(needed: usize, chain_len: usize, present: usize) -> AddError {
    AddError::Impossible(Impossible {
        needed,
        chain_len,
        present,
    })
}

const fn not_increasing(got: u64, high: u64) -> AddError {
    AddError::NotIncreasing {
        got: Seqno(got),
        high: Seqno(high),
    }
}

const ROWS: &[Row] = &[
    Row {
        name: "chain of 1: Majority commits at add, the persist levels wait for the active's disk",
        chain: (0, &[]),
        persisted: 0,
        steps: &[
            Add(1, MAJ, None, &[C(1)]),
            Add(2, PTM, None, &[]),
            Add(3, PAM, None, &[]),
            Persisted(1, &[]),
            Persisted(2, &[C(2)]),
            // A lower value than known changes nothing.
            Persisted(1, &[]),
            Persisted(3, &[C(3)]),
            Tracked(&[]),
            Seqnos(3, 3),
        ],
    },
    Row {
        name: "chain of 1: a write already persisted commits at add",
        chain: (0, &[]),
        persisted: 10,
        steps: &[Add(5, PTM, None, &[C(5)]), Add(11, PTM, None, &[])],
    },
    Row {
        name:
            "chain of 2: majority 2, the replica's ack commits; PersistToMajority needs both disks",
        chain: (0, &[Some(1)]),
        persisted: 0,
        steps: &[
            Add(1, MAJ, None, &[]),
            Ack(1, 1, 0, &[C(1)]),
            Add(2, PTM, None, &[]),
            Ack(1, 2, 2, &[]),
            Persisted(2, &[C(2)]),
            Add(3, PTM, None, &[]),
            Persisted(3, &[]),
            Ack(1, 3, 2, &[]),
            Ack(1, 3, 3, &[C(3)]),
        ],
    },
    Row {
        name: "chain of 2: an ack's persisted seqno is clamped to its in-memory one",
        chain: (0, &[Some(1)]),
        persisted: 0,
        steps: &[
            Ack(1, 3, 10, &[]),
            Add(4, PTM, None, &[]),
            // Counted as persisted up to 3 only.
            Persisted(4, &[]),
            Ack(1, 4, 4, &[C(4)]),
        ],
    },
    Row {
        name: "chain of 2: acks already above a write commit it at add",
        chain: (0, &[Some(1)]),
        persisted: 10,
        steps: &[
            Ack(1, 10, 10, &[]),
            Add(5, PTM, None, &[C(5)]),
            Add(11, MAJ, None, &[]),
        ],
    },
    Row {
        name: "chain of 3: one replica suffices; strangers and the active's own id never count",
        chain: (0, &[Some(1), Some(2)]),
        persisted: 0,
        steps: &[
            Add(1, MAJ, None, &[]),
            Ack(7, 5, 5, &[]),
            Ack(0, 5, 5, &[]),
            Tracked(&[1]),
            Ack(2, 1, 0, &[C(1)]),
            Add(2, MAJ, None, &[]),
            Ack(1, 2, 0, &[C(2)]),
        ],
    },
    Row {
        name: "chain of 4 (majority 3): two acks from one replica count once",
        chain: (0, &[Some(1), Some(2), Some(3)]),
        persisted: 0,
        steps: &[
            Add(1, MAJ, None, &[]),
            Ack(1, 1, 0, &[]),
            Ack(1, 1, 1, &[]),
            Ack(1, 2, 2, &[]),
            Tracked(&[1]),
            Ack(3, 1, 0, &[C(1)]),
        ],
    },
    Row {
        name: "a node named in two slots counts once",
        chain: (0, &[Some(1), Some(1), Some(2)]),
        persisted: 0,
        steps: &[
            Add(1, MAJ, None, &[]),
            Ack(1, 1, 1, &[]),
            Ack(2, 1, 1, &[C(1)]),
        ],
    },
    Row {
        name: "an empty slot counts in the length: [a, b, -] needs 2 and can get them",
        chain: (0, &[Some(1), None]),
        persisted: 0,
        steps: &[Add(1, MAJ, None, &[]), Ack(1, 1, 1, &[C(1)])],
    },
    Row {
        name: "[a, -, -] cannot reach 2 of 3: add refuses and tracks nothing",
        chain: (0, &[None, None]),
        persisted: 0,
        steps: &[
            Refused(1, MAJ, impossible(2, 3, 1)),
            Tracked(&[]),
            Seqnos(0, 0),
            NextDeadline(None),
        ],
    },
    Row {
        name: "the active named as its own replica is not a second copy",
        chain: (0, &[Some(0)]),
        persisted: 0,
        steps: &[Refused(1, MAJ, impossible(2, 2, 1))],
    },
    Row {
        name: "MajorityAndPersistOnMaster: replicas in memory, then the active's disk",
        chain: (0, &[Some(1), Some(2)]),
        persisted: 0,
        steps: &[
            Add(1, PAM, None, &[]),
            Ack(1, 1, 0, &[]),
            Ack(2, 1, 0, &[]),
            Persisted(1, &[C(1)]),
        ],
    },
    Row {
        name: "commits go in prepare order: a satisfied 6 waits for 5",
        chain: (0, &[Some(1), Some(2)]),
        persisted: 0,
        steps: &[
            Add(5, PTM, None, &[]),
            Add(6, MAJ, None, &[]),
            Ack(1, 6, 4, &[]),
            Tracked(&[5, 6]),
            Seqnos(6, 0),
            Persisted(5, &[]),
            Ack(1, 6, 6, &[C(5), C(6)]),
            Seqnos(6, 6),
        ],
    },
    Row {
        name: "timeout: nothing before the deadline, abort at it, and the abort unblocks commits",
        chain: (0, &[Some(1), Some(2)]),
        persisted: 0,
        steps: &[
            Add(5, PTM, Some(100), &[]),
            Add(6, MAJ, Some(300), &[]),
            Add(7, MAJ, Some(200), &[]),
            NextDeadline(Some(100)),
            Ack(1, 7, 0, &[]),
            Tick(99, &[]),
            Tick(100, &[A(5), C(6), C(7)]),
            Tracked(&[]),
            Seqnos(7, 7),
            NextDeadline(None),
        ],
    },
    Row {
        name: "timeout: an expired write behind a pending one is aborted out of order",
        chain: (0, &[Some(1)]),
        persisted: 0,
        steps: &[
            Add(1, MAJ, Some(500), &[]),
            Add(2, MAJ, Some(100), &[]),
            Tick(100, &[A(2)]),
            Tracked(&[1]),
            Seqnos(2, 2),
            Ack(1, 1, 0, &[C(1)]),
            // The high completed seqno never goes back.
            Seqnos(2, 2),
        ],
    },
    Row {
        name: "timeout: aborts in seqno order whatever their deadlines' order",
        chain: (0, &[Some(1)]),
        persisted: 0,
        steps: &[
            Add(1, PTM, Some(200), &[]),
            Add(2, PTM, Some(100), &[]),
            Tick(300, &[A(1), A(2)]),
        ],
    },
    Row {
        name: "timeout: a satisfied write whose own deadline passed behind a pending one aborts",
        chain: (0, &[Some(1)]),
        persisted: 0,
        steps: &[
            Add(1, PTM, Some(100), &[]),
            Add(2, MAJ, Some(100), &[]),
            Ack(1, 2, 0, &[]),
            Tick(100, &[A(1), A(2)]),
        ],
    },
    Row {
        name: "an ack that goes down (the replica rolled back) no longer counts",
        chain: (0, &[Some(1), Some(2)]),
        persisted: 0,
        steps: &[
            Add(5, PTM, None, &[]),
            Add(6, MAJ, None, &[]),
            Ack(1, 6, 0, &[]),
            Ack(1, 4, 0, &[]),
            Persisted(6, &[]),
            Ack(1, 5, 5, &[C(5)]),
            // 6 was acked once, but not by the replica as it is now.
            Tracked(&[6]),
            Ack(2, 6, 0, &[C(6)]),
        ],
    },
    Row {
        name: "forget: a closed replica's ack no longer counts",
        chain: (0, &[Some(1), Some(2)]),
        persisted: 0,
        steps: &[
            Add(1, PTM, None, &[]),
            Ack(1, 1, 1, &[]),
            Forget(1),
            Persisted(1, &[]),
            Ack(2, 1, 1, &[C(1)]),
        ],
    },
    Row {
        name:
            "set_chain: a removed replica's ack is dropped; an ack from before joining was ignored",
        chain: (0, &[Some(1), Some(2)]),
        persisted: 0,
        steps: &[
            Add(1, PTM, None, &[]),
            Ack(1, 1, 1, &[]),
            Ack(3, 1, 1, &[]),
            SetChain(0, &[Some(3), Some(2)], &[]),
            Persisted(1, &[]),
            Ack(1, 1, 1, &[]),
            Tracked(&[1]),
            Ack(3, 1, 1, &[C(1)]),
        ],
    },
    Row {
        name: "set_chain: a kept replica keeps its ack",
        chain: (0, &[Some(1), Some(2)]),
        persisted: 0,
        steps: &[
            Add(1, PTM, None, &[]),
            Ack(2, 1, 1, &[]),
            SetChain(0, &[Some(2), None], &[]),
            Persisted(1, &[C(1)]),
        ],
    },
    Row {
        name: "set_chain: a smaller majority commits pending writes at once",
        chain: (0, &[Some(1), Some(2), Some(3)]),
        persisted: 0,
        steps: &[
            Add(1, MAJ, None, &[]),
            Add(2, MAJ, None, &[]),
            Ack(1, 2, 0, &[]),
            SetChain(0, &[Some(1)], &[C(1), C(2)]),
        ],
    },
    Row {
        name: "set_chain: a chain that cannot reach a majority leaves writes pending, refuses new",
        chain: (0, &[Some(1)]),
        persisted: 0,
        steps: &[
            Add(1, MAJ, Some(100), &[]),
            SetChain(0, &[None], &[]),
            Refused(2, MAJ, impossible(2, 2, 1)),
            Seqnos(1, 0),
            Tick(100, &[A(1)]),
        ],
    },
    Row {
        name: "no deadline never aborts; next_deadline is the earliest of those tracked",
        chain: (0, &[Some(1)]),
        persisted: 0,
        steps: &[
            Add(1, PTM, None, &[]),
            Add(2, PTM, Some(300), &[]),
            Add(3, PTM, Some(200), &[]),
            NextDeadline(Some(200)),
            Tick(250, &[A(3)]),
            NextDeadline(Some(300)),
            Tick(10_000, &[A(2)]),
            NextDeadline(None),
            Tick(1_000_000, &[]),
            Tracked(&[1]),
        ],
    },
    Row {
        name: "a committed write's deadline leaves with it",
        chain: (0, &[]),
        persisted: 0,
        steps: &[
            Add(1, MAJ, Some(100), &[C(1)]),
            NextDeadline(None),
            Add(2, PTM, Some(50), &[]),
            NextDeadline(Some(50)),
            Persisted(2, &[C(2)]),
            NextDeadline(None),
            Tick(1000, &[]),
        ],
    },
    Row {
        name: "a seqno not above every one added before is refused",
        chain: (0, &[Some(1)]),
        persisted: 0,
        steps: &[
            Refused(0, MAJ, not_increasing(0, 0)),
            Add(5, MAJ, None, &[]),
            Refused(5, MAJ, not_increasing(5, 5)),
            Refused(3, PTM, not_increasing(3, 5)),
            Ack(1, 10, 5, &[C(5)]),
            // Resolved writes still bound what comes next.
            Refused(4, MAJ, not_increasing(4, 5)),
            Add(6, MAJ, None, &[C(6)]),
        ],
    },
    Row {
        name: "clear drops every tracked write unresolved",
        chain: (0, &[Some(1)]),
        persisted: 0,
        steps: &[
            Add(1, MAJ, None, &[]),
            Ack(1, 1, 0, &[C(1)]),
            Add(2, PTM, Some(100), &[]),
            Add(3, MAJ, None, &[]),
            Add(4, PTM, Some(50), &[]),
            Clear(&[2, 3, 4]),
            Tracked(&[]),
            NextDeadline(None),
            Tick(1000, &[]),
            Seqnos(4, 1),
            Clear(&[]),
            Add(5, MAJ, None, &[]),
        ],
    },
];

fn got(resolutions: Vec<Resolution>) -> Vec<R> {
    resolutions
        .into_iter()
        .map(|r| match r.outcome {
            Outcome::Commit => C(r.seqno.0),
            Outcome::Abort => A(r.seqno.0),
        })
        .collect()
}

fn chain(active: u32, replicas: &[Option<u32>]) -> Chain<u32> {
    Chain::new(active, replicas.to_vec())
}

fn run(row: &Row) {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let mut m = ActiveMonitor::new(chain(row.chain.0, row.chain.1), Seqno(row.persisted));
    for (i, step) in row.steps.iter().enumerate() {
        let here = format!("{}: step {i} {step:?}", row.name);
        match step {
            Add(seqno, level, deadline, want) => {
                let r = m.add(Seqno(*seqno), *level, deadline.map(at));
                assert_eq!(got(r.unwrap()), *want, "{here}");
            }
            Refused(seqno, level, err) => {
                assert_eq!(
                    m.add(Seqno(*seqno), *level, None),
                    Err(err.clone()),
                    "{here}"
                )
            }
            Ack(node, in_memory, persisted, want) => {
                let ack = ReplicaAck {
                    in_memory: Seqno(*in_memory),
                    persisted: Seqno(*persisted),
                };
                assert_eq!(got(m.ack(*node, ack)), *want, "{here}");
            }
            Forget(node) => m.forget(*node),
            Persisted(seqno, want) => assert_eq!(got(m.persisted(Seqno(*seqno))), *want, "{here}"),
            Tick(ms, want) => assert_eq!(got(m.tick(at(*ms))), *want, "{here}"),
            SetChain(active, replicas, want) => {
                assert_eq!(got(m.set_chain(chain(*active, replicas))), *want, "{here}");
                assert_eq!(m.chain(), &chain(*active, replicas), "{here}");
            }
            NextDeadline(ms) => assert_eq!(m.next_deadline(), ms.map(at), "{here}"),
            Tracked(seqnos) => {
                assert_eq!(m.tracked(), seqnos.len(), "{here}: tracked");
                for &s in *seqnos {
                    assert!(m.is_tracked(Seqno(s)), "{here}: {s} tracked");
                }
            }
            Seqnos(prepared, completed) => assert_eq!(
                (m.high_prepared_seqno(), m.high_completed_seqno()),
                (Seqno(*prepared), Seqno(*completed)),
                "{here}: (high prepared, high completed)"
            ),
            Clear(want) => {
                let want: Vec<Seqno> = want.iter().map(|&s| Seqno(s)).collect();
                assert_eq!(m.clear(), want, "{here}");
            }
        }
        m.check_invariants();
    }
}

#[test]
fn durability_monitor_table() {
    for row in ROWS {
        run(row);
    }
}

#[test]
fn errors_say_what_was_refused() {
    assert_eq!(
        impossible(2, 3, 1).to_string(),
        "durability needs 2 of 3 copies and only 1 are placed"
    );
    assert_eq!(
        not_increasing(3, 5).to_string(),
        "prepare 3 is not above the high prepared seqno 5"
    );
}
