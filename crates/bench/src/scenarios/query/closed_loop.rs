//! A query phase's load: C clients, each a closed loop with one query outstanding, picking
//! its documents at random (seeded), until the phase ends. A query is timed from its send to
//! its last byte; those sent after the warm-up are recorded. A query that returns another
//! number of rows than it must (1 for a point lookup, 100 for a range page) is an error. A
//! query with no answer within [`QUERY_TIMEOUT`] ends its client's loop, so every loop stops
//! by itself.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

use crate::load::latency::Latency;
use crate::load::workload::Rng;
use crate::scenarios::query::docs::DocSet;

pub const QUERY_TIMEOUT: Duration = Duration::from_secs(30);
/// Rows of a range page.
pub const RANGE_ROWS: usize = 100;

/// One query of a phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Query {
    /// The document whose `email` is this.
    Point { email: String },
    /// The first [`RANGE_ROWS`] documents with `k >= lo`, in `k` order.
    Range { lo: i64 },
    /// The same page with its upper end given too: `k BETWEEN lo AND lo + 99` (every `k`
    /// of `0..n` exists, so it holds [`RANGE_ROWS`] documents).
    Bounded { lo: i64 },
}

impl Query {
    pub fn expected_rows(&self) -> usize {
        match self {
            Query::Point { .. } => 1,
            Query::Range { .. } | Query::Bounded { .. } => RANGE_ROWS,
        }
    }
}

/// Which queries a phase makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Point,
    Range,
    Bounded,
}

impl Shape {
    pub fn pick(self, set: &DocSet, rng: &mut Rng) -> Query {
        match self {
            Shape::Point => Query::Point {
                email: set.email(set.pick(rng.next_u64())),
            },
            Shape::Range => Query::Range {
                lo: set.range_start(rng.next_u64(), RANGE_ROWS as u64),
            },
            Shape::Bounded => Query::Bounded {
                lo: set.range_start(rng.next_u64(), RANGE_ROWS as u64),
            },
        }
    }
}

/// One client's connection: runs a query, returns its row count or what went wrong.
pub trait QueryClient: Send + 'static {
    /// What went wrong; the loop counts it and reports the first one's text.
    type Error: std::error::Error + Send + 'static;
    fn run(&mut self, q: &Query) -> impl Future<Output = Result<usize, Self::Error>> + Send;
}

#[derive(Clone)]
pub struct LoopPlan {
    pub shape: Shape,
    pub set: DocSet,
    pub seed: u64,
    pub measure_from: Instant,
    pub until: Instant,
    /// Queries answered so far (the progress bar's).
    pub done: Arc<AtomicU64>,
}

#[derive(Debug, Clone, Default)]
pub struct Measured {
    pub latency: Latency,
    /// Successful queries sent after the warm-up.
    pub queries: u64,
    /// Failed queries (wrong row count included), warm-up included.
    pub errors: u64,
    pub first_error: Option<String>,
    /// From the end of the warm-up to the last answer.
    pub span: Duration,
}

impl Measured {
    pub fn qps(&self) -> f64 {
        let s = self.span.as_secs_f64();
        if s > 0.0 {
            self.queries as f64 / s
        } else {
            0.0
        }
    }

    fn add(&mut self, o: Measured) {
        self.latency.merge(&o.latency);
        self.queries += o.queries;
        self.errors += o.errors;
        if self.first_error.is_none() {
            self.first_error = o.first_error;
        }
        self.span = self.span.max(o.span);
    }
}

/// Runs one loop per client until each stops; returns what they measured together.
pub async fn run_clients<C: QueryClient>(clients: Vec<C>, plan: &LoopPlan) -> Measured {
    let mut loops = JoinSet::new();
    for (i, c) in (0u64..).zip(clients) {
        loops.spawn(one_client(c, i, plan.clone()));
    }
    let mut all = Measured::default();
    while let Some(joined) = loops.join_next().await {
        match joined {
            Ok(m) => all.add(m),
            Err(e) => {
                all.errors += 1;
                all.first_error
                    .get_or_insert_with(|| format!("a client failed: {e}"));
            }
        }
    }
    all
}

async fn one_client<C: QueryClient>(mut client: C, i: u64, plan: LoopPlan) -> Measured {
    let mut out = Measured::default();
    let mut rng = Rng::new(plan.seed ^ (i + 1).wrapping_mul(0x9e37_79b9));
    loop {
        let sent = Instant::now();
        if sent >= plan.until {
            break;
        }
        let q = plan.shape.pick(&plan.set, &mut rng);
        let answer = tokio::time::timeout(QUERY_TIMEOUT, client.run(&q)).await;
        let answered = Instant::now();
        let failure = match answer {
            Ok(Ok(rows)) if rows == q.expected_rows() => None,
            Ok(Ok(rows)) => Some(format!(
                "{q:?} returned {rows} row(s), not {}",
                q.expected_rows()
            )),
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => {
                out.errors += 1;
                out.first_error
                    .get_or_insert(format!("{q:?}: no answer within {QUERY_TIMEOUT:?}"));
                break;
            }
        };
        plan.done.fetch_add(1, Ordering::Relaxed);
        match failure {
            None if sent >= plan.measure_from => {
                out.latency.record(answered - sent);
                out.queries += 1;
                out.span = answered - plan.measure_from;
            }
            None => {}
            Some(e) => {
                out.errors += 1;
                out.first_error.get_or_insert(e);
            }
        }
    }
    out
}
