//! The background writer of the write-load phases: a fixed total rate (open loop, the
//! shared [`Pacer`] schedule dealt over a few connections), each connection sending what is
//! due as one pipelined batch and waiting for its answers. It stops at its plan's end or
//! when told to, whichever comes first, and says what rate it reached.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

use crate::load::pacer::Pacer;

/// Largest batch one connection sends at once (a writer far behind catches up in these).
const BATCH_MAX: u64 = 512;
/// A batch that takes longer than this ends its connection's loop as failed.
const BATCH_TIMEOUT: Duration = Duration::from_secs(30);

/// One connection's way of writing a batch of `(key, document)`s.
pub trait BatchWriter: Send + 'static {
    /// What went wrong; the loop counts the batch failed and reports the first one's text.
    type Error: std::error::Error + Send + 'static;
    fn write(
        &mut self,
        batch: Vec<(String, String)>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// What write `slot` (of the whole schedule) writes.
pub type ItemOf = Arc<dyn Fn(u64) -> (String, String) + Send + Sync>;

#[derive(Clone)]
pub struct WritePlan {
    pub rate_per_s: f64,
    pub start: Instant,
    /// Writes answered from here on count towards the achieved rate.
    pub measure_from: Instant,
    /// No batch is sent from here on (a hard bound: the loop ends even if never told).
    pub until: Instant,
    /// Set to end the writers early.
    pub stop: Arc<AtomicBool>,
    pub item: ItemOf,
}

#[derive(Debug, Clone, Default)]
pub struct WriteOutcome {
    /// Writes answered after `measure_from`.
    pub measured: u64,
    pub total: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    /// From `measure_from` to the last answer.
    pub span: Duration,
}

impl WriteOutcome {
    /// Achieved writes per second over the measured span.
    pub fn rate(&self) -> f64 {
        let s = self.span.as_secs_f64();
        if s > 0.0 {
            self.measured as f64 / s
        } else {
            0.0
        }
    }

    fn add(&mut self, o: WriteOutcome) {
        self.measured += o.measured;
        self.total += o.total;
        self.errors += o.errors;
        if self.first_error.is_none() {
            self.first_error = o.first_error;
        }
        self.span = self.span.max(o.span);
    }
}

/// The running writers; [`Writers::finish`] stops them and adds up what they did.
pub struct Writers {
    tasks: JoinSet<WriteOutcome>,
    stop: Arc<AtomicBool>,
}

impl Writers {
    pub fn start<W: BatchWriter>(conns: Vec<W>, plan: &WritePlan) -> Writers {
        let n = conns.len() as u64;
        let mut tasks = JoinSet::new();
        for (i, w) in (0u64..).zip(conns) {
            let pacer = Pacer::new(plan.start, plan.rate_per_s, n, i);
            tasks.spawn(one_writer(w, pacer, (i, n), plan.clone()));
        }
        Writers {
            tasks,
            stop: plan.stop.clone(),
        }
    }

    pub async fn finish(mut self) -> WriteOutcome {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = WriteOutcome::default();
        while let Some(joined) = self.tasks.join_next().await {
            match joined {
                Ok(o) => all.add(o),
                Err(e) => {
                    all.errors += 1;
                    all.first_error
                        .get_or_insert_with(|| format!("a writer failed: {e}"));
                }
            }
        }
        all
    }
}

async fn one_writer<W: BatchWriter>(
    mut w: W,
    mut pacer: Pacer,
    (first, stride): (u64, u64),
    plan: WritePlan,
) -> WriteOutcome {
    let mut out = WriteOutcome::default();
    // This connection's next slot number is `first + k * stride`.
    let mut k = 0u64;
    loop {
        let now = Instant::now();
        if now >= plan.until || plan.stop.load(Ordering::Relaxed) {
            break;
        }
        let mut batch = Vec::new();
        while (batch.len() as u64) < BATCH_MAX && pacer.take_due(now).is_some() {
            batch.push((plan.item)(first + k * stride));
            k += 1;
        }
        if batch.is_empty() {
            let next = pacer.next_due().min(plan.until);
            tokio::time::sleep_until(next.into()).await;
            continue;
        }
        let len = batch.len() as u64;
        match tokio::time::timeout(BATCH_TIMEOUT, w.write(batch)).await {
            Ok(Ok(())) => {
                out.total += len;
                let answered = Instant::now();
                if answered >= plan.measure_from {
                    out.measured += len;
                    out.span = answered - plan.measure_from;
                }
            }
            Ok(Err(e)) => {
                out.errors += len;
                out.first_error.get_or_insert_with(|| e.to_string());
            }
            Err(_) => {
                out.errors += len;
                out.first_error
                    .get_or_insert(format!("a batch had no answer within {BATCH_TIMEOUT:?}"));
                break;
            }
        }
    }
    out
}
