//! The load of one row: a few connections, each a closed loop of sequential writes (one
//! outstanding at a time) over its own share of the keys, until the row's end or its write
//! count, whichever comes first. A write is timed from its send to its answer; those sent
//! after the warm-up are recorded. A write that gets no answer at all within `stuck_after`
//! ends its loop (the connection's state is then unknown), so every loop stops by itself.

use bytes::Bytes;
use std::future::Future;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

use crate::load::latency::Latency;
use crate::load::workload::key;

/// Why the prefill stopped.
#[derive(Debug, thiserror::Error)]
pub enum PrefillError {
    /// `answer` is what the target answered, as the writer put it.
    #[error("prefill: a write failed: {answer}")]
    Write { answer: String },
    #[error("prefill: no answer within {waited:?}")]
    NoAnswer { waited: Duration },
    #[error("a prefill loop")]
    Loop(#[source] tokio::task::JoinError),
}

/// One connection's way of making the row's write.
pub trait Writer: Send + 'static {
    /// What the target answered instead of a success, or why no answer came.
    type Error: std::error::Error + Send + 'static;
    /// Makes one write and waits for its answer.
    fn write(
        &mut self,
        key: &[u8],
        value: &[u8],
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// When and how much every loop of a row writes.
#[derive(Debug, Clone)]
pub struct LoopPlan {
    /// Writes sent from here on are measured.
    pub measure_from: Instant,
    /// No write is sent from here on.
    pub until: Instant,
    /// Each loop also stops after this many writes.
    pub max_writes: Option<u64>,
    pub stuck_after: Duration,
    pub value: Bytes,
    /// Writes answered so far (the progress bar's).
    pub done: Arc<AtomicU64>,
}

/// What a row's loops measured together.
#[derive(Debug, Clone, Default)]
pub struct RowMeasure {
    /// Send → answer of every successful write sent after the warm-up.
    pub latency: Latency,
    /// Successful writes sent after the warm-up.
    pub writes: u64,
    /// Failed writes, warm-up included.
    pub errors: u64,
    pub first_error: Option<String>,
    /// From the end of the warm-up to the last loop's last answer.
    pub measured: Duration,
}

impl RowMeasure {
    /// Measured writes per second over the measured span; 0 when nothing was measured.
    pub fn writes_per_s(&self) -> f64 {
        let s = self.measured.as_secs_f64();
        if s > 0.0 {
            self.writes as f64 / s
        } else {
            0.0
        }
    }

    /// Adds one loop's figures.
    fn add(&mut self, other: RowMeasure) {
        self.latency.merge(&other.latency);
        self.writes += other.writes;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.measured = self.measured.max(other.measured);
    }
}

/// Connection `conn`'s keys out of `keys`, split as evenly as possible: no key is written by
/// two connections, so no write waits behind another's pending durable write to its key.
pub fn key_share(conn: u32, connections: u32, keys: u64) -> Range<u64> {
    let (c, n) = (u64::from(conn), u64::from(connections.max(1)));
    (keys * c / n)..(keys * (c + 1) / n)
}

/// Runs one loop per writer until each stops; returns what they measured together.
pub async fn run_row<W: Writer>(writers: Vec<W>, keys: u64, plan: &LoopPlan) -> RowMeasure {
    let n = u32::try_from(writers.len()).unwrap_or(u32::MAX);
    let mut loops = JoinSet::new();
    for (i, w) in (0u32..).zip(writers) {
        loops.spawn(one_loop(w, key_share(i, n, keys), plan.clone()));
    }
    let mut row = RowMeasure::default();
    while let Some(joined) = loops.join_next().await {
        match joined {
            Ok(outcome) => row.add(outcome),
            Err(e) => {
                row.errors += 1;
                row.first_error
                    .get_or_insert_with(|| format!("a loop failed: {e}"));
            }
        }
    }
    row
}

async fn one_loop<W: Writer>(mut writer: W, keys: Range<u64>, plan: LoopPlan) -> RowMeasure {
    let mut out = RowMeasure::default();
    let share = (keys.end - keys.start).max(1);
    let mut last_answer = Instant::now();
    let mut k = 0u64;
    loop {
        let sent = Instant::now();
        if sent >= plan.until || plan.max_writes.is_some_and(|m| k >= m) {
            break;
        }
        let key = key(keys.start + k % share);
        k += 1;
        let answer = tokio::time::timeout(plan.stuck_after, writer.write(&key, &plan.value)).await;
        last_answer = Instant::now();
        match answer {
            Ok(Ok(())) => {
                plan.done.fetch_add(1, Ordering::Relaxed);
                if sent >= plan.measure_from {
                    out.latency.record(last_answer - sent);
                    out.writes += 1;
                }
            }
            Ok(Err(e)) => {
                out.errors += 1;
                out.first_error.get_or_insert_with(|| e.to_string());
            }
            Err(_) => {
                out.errors += 1;
                out.first_error.get_or_insert_with(|| {
                    format!(
                        "no answer within {:?}; the connection's loop stopped",
                        plan.stuck_after
                    )
                });
                break;
            }
        }
    }
    out.measured = last_answer.saturating_duration_since(plan.measure_from);
    out
}

/// Writes every key once, each writer its own share, so that the measured writes are
/// updates. Fails on the first failed write.
pub async fn prefill<W: Writer>(
    writers: Vec<W>,
    keys: u64,
    value: &Bytes,
    stuck_after: Duration,
) -> Result<(), PrefillError> {
    let n = u32::try_from(writers.len()).unwrap_or(u32::MAX);
    let mut loops = JoinSet::new();
    for (i, mut w) in (0u32..).zip(writers) {
        let (share, value) = (key_share(i, n, keys), value.clone());
        loops.spawn(async move {
            for k in share {
                match tokio::time::timeout(stuck_after, w.write(&key(k), &value)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        return Err(PrefillError::Write {
                            answer: e.to_string(),
                        })
                    }
                    Err(_) => {
                        return Err(PrefillError::NoAnswer {
                            waited: stuck_after,
                        })
                    }
                }
            }
            Ok(())
        });
    }
    while let Some(joined) = loops.join_next().await {
        joined.map_err(PrefillError::Loop)??;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Answers at once; fails every `fail_every`-th write; never answers write `hang_at`.
    struct Fake {
        n: u64,
        fail_every: u64,
        hang_at: Option<u64>,
        seen: Arc<Mutex<Vec<Vec<u8>>>>,
    }

    impl Fake {
        fn new(seen: &Arc<Mutex<Vec<Vec<u8>>>>) -> Fake {
            Fake {
                n: 0,
                fail_every: 0,
                hang_at: None,
                seen: seen.clone(),
            }
        }
    }

    #[derive(Debug, thiserror::Error)]
    #[error("refused write {0}")]
    struct Refused(u64);

    impl Writer for Fake {
        type Error = Refused;

        async fn write(&mut self, key: &[u8], _value: &[u8]) -> Result<(), Refused> {
            self.n += 1;
            self.seen.lock().unwrap().push(key.to_vec());
            if self.hang_at == Some(self.n) {
                std::future::pending::<()>().await;
            }
            if self.fail_every > 0 && self.n.is_multiple_of(self.fail_every) {
                return Err(Refused(self.n));
            }
            tokio::task::yield_now().await;
            Ok(())
        }
    }

    fn plan(warmup: Duration, length: Duration, max_writes: Option<u64>) -> LoopPlan {
        let start = Instant::now();
        LoopPlan {
            measure_from: start + warmup,
            until: start + length,
            max_writes,
            stuck_after: Duration::from_millis(50),
            value: Bytes::from_static(b"v"),
            done: Arc::default(),
        }
    }

    #[test]
    fn keys_are_split_without_overlap() {
        let shares: Vec<Range<u64>> = (0..3).map(|c| key_share(c, 3, 10)).collect();
        assert_eq!(shares, vec![0..3, 3..6, 6..10]);
        assert_eq!(key_share(0, 1, 7), 0..7);
    }

    #[tokio::test]
    async fn loops_stop_at_their_count_and_keep_to_their_keys() {
        let seen = Arc::default();
        let writers = vec![Fake::new(&seen), Fake::new(&seen)];
        let p = plan(Duration::ZERO, Duration::from_secs(3600), Some(5));
        let row = run_row(writers, 4, &p).await;
        assert_eq!((row.writes, row.errors), (10, 0));
        assert_eq!(row.latency.summary().count, 10);
        assert_eq!(p.done.load(Ordering::Relaxed), 10);
        let seen = seen.lock().unwrap();
        let first = key(0).to_vec();
        let third = key(2).to_vec();
        // Each of the two loops cycles over its two keys.
        assert_eq!(seen.iter().filter(|k| **k == first).count(), 3);
        assert_eq!(seen.iter().filter(|k| **k == third).count(), 3);
        assert!(seen.iter().all(|k| *k <= key(3).to_vec()));
    }

    #[tokio::test]
    async fn failures_are_counted_and_a_stuck_write_ends_its_loop() {
        let seen = Arc::default();
        let mut failing = Fake::new(&seen);
        failing.fail_every = 2;
        let mut stuck = Fake::new(&seen);
        stuck.hang_at = Some(3);
        let p = plan(Duration::ZERO, Duration::from_secs(3600), Some(6));
        let row = run_row(vec![failing, stuck], 10, &p).await;
        // The failing loop: 3 of 6 refused; the stuck loop: 2 answered, then none.
        assert_eq!((row.writes, row.errors), (3 + 2, 3 + 1));
        assert!(row.first_error.is_some());
    }

    #[tokio::test]
    async fn warm_up_writes_are_not_measured_and_time_ends_the_loop() {
        let seen = Arc::default();
        let p = plan(Duration::from_secs(3600), Duration::from_millis(20), None);
        let row = run_row(vec![Fake::new(&seen)], 1, &p).await;
        assert_eq!(row.writes, 0);
        assert!(p.done.load(Ordering::Relaxed) > 0);
        assert_eq!(row.measured, Duration::ZERO);
        assert_eq!(row.writes_per_s(), 0.0);
    }

    #[tokio::test]
    async fn the_prefill_writes_every_key_once_and_stops_at_a_failure() {
        let seen: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let value = Bytes::from_static(b"v");
        let writers = vec![Fake::new(&seen), Fake::new(&seen), Fake::new(&seen)];
        prefill(writers, 7, &value, Duration::from_secs(1))
            .await
            .unwrap();
        let mut keys = seen.lock().unwrap().clone();
        keys.sort();
        assert_eq!(keys, (0..7).map(|i| key(i).to_vec()).collect::<Vec<_>>());
        let mut failing = Fake::new(&seen);
        failing.fail_every = 1;
        assert!(prefill(vec![failing], 3, &value, Duration::from_secs(1))
            .await
            .is_err());
    }
}
