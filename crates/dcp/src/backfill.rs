//! A producer connection's backfills: which to start, which to read next, and when to wait.
//!
//! A stream that cannot read from memory asks for a backfill (a disk or snapshot scan of
//! `(after, end]`). Starting one takes a storage snapshot that is held until the scan ends,
//! and each read returns about one chunk of items, so both are bounded:
//!
//! ```text
//!   request(vb, stream, after)
//!        │
//!        ▼
//!    Waiting ── next(): Start, while fewer than `open_max` are open ──► Starting (a task)
//!                                                                        │ task_done + park(b)
//!                                                                        ▼
//!    Reading (a task) ◄── next(): Read, in turn, while the buffer has room ── Parked
//!        │ task_done + park(b): more to read ───────────────────────────────►─┘
//!        │ task_done + finish(vb): the scan ended or failed
//!        ▼
//!      gone  ◄── cancel(vb) from any state (the stream ended or was replaced)
//! ```
//!
//! The scheduler holds no I/O: [`BackfillScheduler::next`] hands out [`BackfillTask`]s for the
//! caller to run, and the caller reports every task's end with [`BackfillScheduler::task_done`],
//! whose answer says whether the result still belongs to a live stream (a stream closed or
//! replaced meanwhile gets nothing fed to it).
//!
//! Bounds, all per connection:
//! - `in_flight_max` tasks (starts and reads) run at once, so a connection's vbuckets take
//!   turns on the blocking pool instead of filling it;
//! - `open_max` backfills hold a storage snapshot (started and not finished); further starts
//!   wait in request order. The reference server settled on tens: a single one per connection
//!   cut index throughput 4×;
//! - a read starts only while the queued bytes plus one chunk for every read in flight and the
//!   new one stay within `buffer_bytes`, so queued and arriving data are bounded together
//!   (give or take one item per chunk).

use sluice_types::{Seqno, VbId};
use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

/// Identity of one stream on a connection: a vbucket's streams come and go, and results for
/// an old one must not be fed to its successor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u64);

/// The limits a connection's backfills run within.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackfillLimits {
    /// What one read returns, about.
    pub chunk_bytes: usize,
    /// Tasks (starts and reads) running at once.
    pub in_flight_max: usize,
    /// Backfills holding a storage snapshot: started and not finished.
    pub open_max: usize,
    /// Queued messages plus chunks being read stay within this.
    pub buffer_bytes: usize,
}

impl BackfillLimits {
    /// The limits with a buffer of at least two chunks: with less, no read could ever start.
    pub fn new(
        chunk_bytes: usize,
        in_flight_max: usize,
        open_max: usize,
        buffer_bytes: usize,
    ) -> Self {
        assert!(chunk_bytes > 0 && in_flight_max > 0 && open_max > 0);
        BackfillLimits {
            chunk_bytes,
            in_flight_max,
            open_max,
            buffer_bytes: buffer_bytes.max(2 * chunk_bytes),
        }
    }
}

/// Work for the caller to run off the connection's loop.
#[derive(Debug, PartialEq, Eq)]
pub enum BackfillTask<B, K = VbId> {
    /// Open a backfill of `key`'s vbucket covering `(after, end]`.
    Start {
        key: K,
        stream: StreamId,
        after: Seqno,
    },
    /// Read the next chunk of an open backfill.
    Read {
        key: K,
        stream: StreamId,
        backfill: B,
    },
}

/// The connection's backfills, generic over the engine's open-backfill handle `B` and what
/// names a stream's place on the connection `K` (a vbucket, or a vbucket and stream id: one
/// backfill per key at most).
#[derive(Debug)]
pub struct BackfillScheduler<B, K = VbId> {
    limits: BackfillLimits,
    /// The backfill each vbucket's current stream wants (one at most), from its request
    /// until it finishes or is cancelled.
    wanted: HashMap<K, StreamId>,
    /// Requested and not started, in request order.
    waiting: VecDeque<(K, StreamId, Seqno)>,
    /// Open backfills between reads.
    parked: HashMap<K, B>,
    /// The order parked backfills take turns in.
    turns: VecDeque<K>,
    /// Tasks handed out and not reported done; cancelled ones count until they return, since
    /// they still hold a snapshot and a blocking thread.
    in_flight: usize,
}

impl<B, K: Copy + Eq + Hash> BackfillScheduler<B, K> {
    pub fn new(limits: BackfillLimits) -> Self {
        BackfillScheduler {
            limits,
            wanted: HashMap::new(),
            waiting: VecDeque::new(),
            parked: HashMap::new(),
            turns: VecDeque::new(),
            in_flight: 0,
        }
    }

    pub fn limits(&self) -> BackfillLimits {
        self.limits
    }

    /// The stream of `vb` wants a backfill of `(after, end]`. A vbucket has one at most: a
    /// request replaces whatever its earlier stream had wanted.
    pub fn request(&mut self, vb: K, stream: StreamId, after: Seqno) {
        self.cancel(vb);
        self.wanted.insert(vb, stream);
        self.waiting.push_back((vb, stream, after));
        self.check_invariants();
    }

    /// `vb`'s stream ended or was replaced: its backfill is dropped wherever it is. A task of
    /// it still running comes back through `task_done`, which then answers `false`.
    pub fn cancel(&mut self, vb: K) {
        if self.wanted.remove(&vb).is_none() {
            return;
        }
        self.waiting.retain(|(v, _, _)| *v != vb);
        if self.parked.remove(&vb).is_some() {
            self.turns.retain(|v| *v != vb);
        }
        self.check_invariants();
    }

    /// The next task to run, if the limits allow one; call until `None`. `queued_bytes`: what
    /// the connection's streams hold ready to send.
    pub fn next(&mut self, queued_bytes: usize) -> Option<BackfillTask<B, K>> {
        if self.in_flight >= self.limits.in_flight_max {
            return None;
        }
        if self.open() < self.limits.open_max {
            if let Some((vb, stream, after)) = self.waiting.pop_front() {
                self.in_flight += 1;
                return Some(BackfillTask::Start {
                    key: vb,
                    stream,
                    after,
                });
            }
        }
        let arriving = (self.in_flight + 1) * self.limits.chunk_bytes;
        if queued_bytes + arriving > self.limits.buffer_bytes {
            return None;
        }
        let vb = self.turns.pop_front()?;
        let backfill = self
            .parked
            .remove(&vb)
            .expect("every turn is a parked backfill");
        let stream = *self.wanted.get(&vb).expect("a parked backfill is wanted");
        self.in_flight += 1;
        self.check_invariants();
        Some(BackfillTask::Read {
            key: vb,
            stream,
            backfill,
        })
    }

    /// A task of `vb`'s `stream` returned. `true`: its result belongs to the live stream (the
    /// caller feeds it, then calls `park` or `finish`); `false`: drop it.
    pub fn task_done(&mut self, vb: K, stream: StreamId) -> bool {
        assert!(
            self.in_flight > 0,
            "a task returned that was never handed out"
        );
        self.in_flight -= 1;
        self.wanted.get(&vb) == Some(&stream)
    }

    /// An open backfill with more to read waits for its next turn.
    pub fn park(&mut self, vb: K, stream: StreamId, backfill: B) {
        assert_eq!(
            self.wanted.get(&vb),
            Some(&stream),
            "only a wanted backfill is parked"
        );
        let previous = self.parked.insert(vb, backfill);
        assert!(previous.is_none(), "one open backfill per vbucket");
        self.turns.push_back(vb);
        self.check_invariants();
    }

    /// `vb`'s backfill ended (read to its end, or failed).
    pub fn finish(&mut self, vb: K) {
        self.cancel(vb);
    }

    /// Backfills holding a storage snapshot or a thread: parked, plus tasks in flight.
    pub fn open(&self) -> usize {
        self.parked.len() + self.in_flight
    }

    /// Requested and not started yet.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    fn check_invariants(&self) {
        if cfg!(debug_assertions) {
            assert_eq!(self.turns.len(), self.parked.len(), "a turn per parked");
            assert!(self.turns.iter().all(|vb| self.parked.contains_key(vb)));
            assert!(self.parked.keys().all(|vb| self.wanted.contains_key(vb)));
            assert!(self
                .waiting
                .iter()
                .all(|(vb, s, _)| self.wanted.get(vb) == Some(s)));
        }
    }
}
