//! One phase of `bench clients`, as a JMeter thread group runs it: user `i` of `n` starts
//! `i × ramp / n` after the phase begins, makes a fresh smart client (TCP, HELLO,
//! SCRAM-SHA512, SELECT_BUCKET, GET_CLUSTER_CONFIG), makes one request (a set, or a get that
//! must return what the write phase stored), and hangs up. A sample is the user's whole
//! visit, from its scheduled start to its answer; its two parts (bootstrap and request) are
//! kept apart too.
//!
//! Users bootstrap from the servers in turn (user `i` first tries server `i mod M`), as
//! JMeter users spread over a list of hosts would, so no one node does every handshake.

use bytes::Bytes;
use serde::Serialize;
use sluice_client::{ClusterClient, ClusterOptions, StoreOptions};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::harness::local_cluster::seeds_from;
use crate::load::latency::Latency;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PhaseKind {
    Write,
    Read,
}

/// What one phase does.
#[derive(Clone)]
pub struct PhasePlan {
    pub kind: PhaseKind,
    pub users: u32,
    pub ramp: Duration,
    /// Keys are `{key_prefix}{user:06}`; the read phase reads the write phase's keys.
    pub key_prefix: String,
    /// What every write stores and every read must return.
    pub value: Bytes,
    pub seeds: Arc<Vec<String>>,
    pub options: ClusterOptions,
}

impl PhasePlan {
    fn key(&self, user: u32) -> Vec<u8> {
        format!("{}{user:06}", self.key_prefix).into_bytes()
    }

    /// When user `i` starts, from the phase's start.
    fn start_offset(&self, user: u32) -> Duration {
        self.ramp.mul_f64(f64::from(user) / f64::from(self.users))
    }

    /// The seeds in the order user `i` tries them.
    fn seeds_for(&self, user: u32) -> Vec<String> {
        seeds_from(&self.seeds, user as usize)
    }
}

/// What one phase measured.
#[derive(Debug, Clone)]
pub struct PhaseResult {
    /// Whole samples (bootstrap + request) of the users that succeeded.
    pub samples: Latency,
    pub bootstrap: Latency,
    pub request: Latency,
    pub count: u64,
    pub errors: u64,
    /// The first error, to show why samples failed.
    pub first_error: Option<String>,
    /// From the first user's start to the last user's answer (what JMeter divides by).
    pub span: Duration,
}

impl PhaseResult {
    /// Samples per second over the span, as JMeter's throughput.
    pub fn throughput(&self) -> f64 {
        let s = self.span.as_secs_f64();
        if s > 0.0 {
            self.count as f64 / s
        } else {
            0.0
        }
    }

    pub fn error_pct(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            100.0 * self.errors as f64 / self.count as f64
        }
    }
}

/// How one user's visit ended.
struct Visit {
    started: Instant,
    ended: Instant,
    outcome: Result<(Duration, Duration), String>,
}

/// Runs every user of the phase; `done` counts finished users (for the progress bar).
pub async fn run_phase(plan: &PhasePlan, done: Arc<AtomicU64>) -> PhaseResult {
    let t0 = Instant::now();
    let mut users = JoinSet::new();
    for i in 0..plan.users {
        let plan = plan.clone();
        let done = done.clone();
        users.spawn(async move {
            let started = t0 + plan.start_offset(i);
            tokio::time::sleep_until(started).await;
            let outcome = visit(&plan, i, started).await;
            done.fetch_add(1, Ordering::Relaxed);
            Visit {
                started,
                ended: Instant::now(),
                outcome,
            }
        });
    }
    let mut result = PhaseResult {
        samples: Latency::new(),
        bootstrap: Latency::new(),
        request: Latency::new(),
        count: 0,
        errors: 0,
        first_error: None,
        span: Duration::ZERO,
    };
    let (mut first, mut last) = (None::<Instant>, None::<Instant>);
    while let Some(joined) = users.join_next().await {
        let v = match joined {
            Ok(v) => v,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => panic!("a user task was cancelled: {e}"),
        };
        result.count += 1;
        first = Some(first.map_or(v.started, |f| f.min(v.started)));
        last = Some(last.map_or(v.ended, |l| l.max(v.ended)));
        match v.outcome {
            Ok((bootstrap, request)) => {
                result.samples.record(v.ended - v.started);
                result.bootstrap.record(bootstrap);
                result.request.record(request);
            }
            Err(e) => {
                result.errors += 1;
                result.first_error.get_or_insert(e);
            }
        }
    }
    if let (Some(f), Some(l)) = (first, last) {
        result.span = l - f;
    }
    result
}

/// One user: bootstrap, one request, hang up. Ok holds (bootstrap, request) times.
async fn visit(
    plan: &PhasePlan,
    user: u32,
    started: Instant,
) -> Result<(Duration, Duration), String> {
    let client = ClusterClient::connect(&plan.seeds_for(user), plan.options.clone())
        .await
        .map_err(|e| format!("user {user}: bootstrap: {e}"))?;
    let connected = Instant::now();
    let key = plan.key(user);
    match plan.kind {
        PhaseKind::Write => {
            client
                .set(&key, &plan.value, StoreOptions::default())
                .await
                .map_err(|e| format!("user {user}: set: {e}"))?;
        }
        PhaseKind::Read => {
            let doc = client
                .get(&key)
                .await
                .map_err(|e| format!("user {user}: get: {e}"))?;
            if doc.value != plan.value {
                return Err(format!(
                    "user {user}: get returned {} bytes, not the {} written",
                    doc.value.len(),
                    plan.value.len()
                ));
            }
        }
    }
    let answered = Instant::now();
    Ok((connected - started, answered - connected))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(users: u32, ramp_ms: u64, seeds: &[&str]) -> PhasePlan {
        PhasePlan {
            kind: PhaseKind::Write,
            users,
            ramp: Duration::from_millis(ramp_ms),
            key_prefix: "run1:".into(),
            value: Bytes::from_static(b"v"),
            seeds: Arc::new(seeds.iter().map(|s| s.to_string()).collect()),
            options: ClusterOptions::sluice("u", "p", "b"),
        }
    }

    #[test]
    fn users_start_evenly_over_the_ramp() {
        let p = plan(4, 1000, &["a"]);
        let offsets: Vec<u64> = (0..4)
            .map(|i| p.start_offset(i).as_millis() as u64)
            .collect();
        assert_eq!(offsets, vec![0, 250, 500, 750]);
        assert_eq!(plan(3, 0, &["a"]).start_offset(2), Duration::ZERO);
    }

    #[test]
    fn users_bootstrap_from_the_servers_in_turn() {
        let p = plan(10, 0, &["a", "b", "c"]);
        assert_eq!(p.seeds_for(0), vec!["a", "b", "c"]);
        assert_eq!(p.seeds_for(1), vec!["b", "c", "a"]);
        assert_eq!(p.seeds_for(5), vec!["c", "a", "b"]);
        assert_eq!(p.key(7), b"run1:000007".to_vec());
    }

    #[test]
    fn throughput_and_errors_follow_jmeter() {
        let r = PhaseResult {
            samples: Latency::new(),
            bootstrap: Latency::new(),
            request: Latency::new(),
            count: 100,
            errors: 5,
            first_error: None,
            span: Duration::from_secs(4),
        };
        assert_eq!(r.throughput(), 25.0);
        assert_eq!(r.error_pct(), 5.0);
    }

    #[tokio::test]
    async fn a_user_that_cannot_connect_is_an_error_not_a_hang() {
        // Nothing listens on port 1 of loopback: every visit fails fast.
        let mut p = plan(3, 30, &["127.0.0.1:1"]);
        p.options.connect_timeout = Duration::from_millis(200);
        let r = run_phase(&p, Arc::new(AtomicU64::new(0))).await;
        assert_eq!((r.count, r.errors), (3, 3));
        assert!(r.first_error.unwrap().contains("bootstrap"));
        assert!(r.span >= Duration::from_millis(20), "{:?}", r.span);
    }
}
