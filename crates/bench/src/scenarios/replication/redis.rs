//! Redis primary + replica as a `bench replication` target, measured as peer-baselines.md
//! measured it: pipelined RESP SETs on the primary, one connection per writer; latency samples
//! SET on the primary and busy-poll GET on the replica; the lag is the midpoint of two reads of
//! the primary's `master_repl_offset` minus the replica's own `slave_repl_offset`, in bytes,
//! turned into writes by the step's measured bytes per SET.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::io::AsyncWriteExt;
use tokio::sync::Mutex;

use crate::harness::redis_peer::RedisPair;
use crate::harness::resp::{encode, Reply, RespConn};
use crate::load::pacer::Pacer;
use crate::load::workload::key;
use crate::scenarios::replication::durable::DURABLE_TIMEOUT;
use crate::scenarios::replication::measure::{LagReading, WriteOutcome};
use crate::scenarios::replication::step::WritePlan;
use crate::scenarios::replication::target::TargetError;
use crate::scenarios::replication::values::Docs;

/// SETs per prefill pipeline round.
const PREFILL_BATCH: u64 = 1024;

pub struct RedisTarget {
    pub pair: RedisPair,
    /// Sample SETs go out here; their answers are read by a background task.
    sample_primary: Mutex<tokio::net::tcp::OwnedWriteHalf>,
    sample_replica: Mutex<RespConn>,
    probe_primary: Mutex<RespConn>,
    probe_replica: Mutex<RespConn>,
    /// The durable probe's SET + WAIT round trips.
    durable_primary: Mutex<RespConn>,
    sample_errors: Arc<AtomicU64>,
}

impl RedisTarget {
    pub async fn connect(pair: RedisPair) -> Result<RedisTarget, TargetError> {
        let (mut answers, writer) = RespConn::connect(pair.primary).await?.into_split();
        let sample_errors = Arc::new(AtomicU64::new(0));
        let errors = sample_errors.clone();
        tokio::spawn(async move {
            while let Ok(r) = answers.next().await {
                if !r.is_ok() {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        Ok(RedisTarget {
            sample_primary: Mutex::new(writer),
            sample_replica: Mutex::new(RespConn::connect(pair.replica).await?),
            probe_primary: Mutex::new(RespConn::connect(pair.primary).await?),
            probe_replica: Mutex::new(RespConn::connect(pair.replica).await?),
            durable_primary: Mutex::new(RespConn::connect(pair.primary).await?),
            pair,
            sample_errors,
        })
    }

    /// Writes keys `0..items` once, key `i` with document `i` of `docs` (as Sluice's).
    pub async fn prefill(
        &self,
        items: u64,
        docs: &Docs,
        done: &AtomicU64,
    ) -> Result<(), TargetError> {
        let mut conn = RespConn::connect(self.pair.primary).await?;
        let mut next = 0;
        let mut buf = Vec::new();
        while next < items {
            let end = (next + PREFILL_BATCH).min(items);
            buf.clear();
            for i in next..end {
                encode(&[b"SET", &key(i), &docs.doc(i)], &mut buf);
            }
            conn.send_raw(&buf).await?;
            for _ in next..end {
                let r = conn.read().await?;
                if !r.is_ok() {
                    return Err(TargetError::RedisPrefill { answer: r });
                }
            }
            done.fetch_add(end - next, Ordering::Relaxed);
            next = end;
        }
        Ok(())
    }

    /// One writer connection's share of a step.
    pub async fn write(&self, plan: WritePlan, first: u64) -> Result<WriteOutcome, TargetError> {
        let (mut answers, mut socket) = RespConn::connect(self.pair.primary).await?.into_split();
        let mut pacer = Pacer::new(plan.start, plan.rate, plan.writers, first);
        let mut out = WriteOutcome::default();
        let mut pending: VecDeque<Instant> = VecDeque::new();
        let mut buf = Vec::new();
        let mut k = 0u64;
        let account = |out: &mut WriteOutcome, due: Instant, r: &Reply| {
            plan.done.fetch_add(u64::from(r.is_ok()), Ordering::Relaxed);
            out.account(r.is_ok(), due, Instant::now(), plan.measure_from);
        };
        loop {
            let now = Instant::now();
            if now >= plan.until {
                break;
            }
            buf.clear();
            while pending.len() < plan.in_flight_max {
                let Some(due) = pacer.take_due(now) else {
                    break;
                };
                let slot = first + k * plan.writers;
                k += 1;
                encode(
                    &[b"SET", &key(slot % plan.items), &plan.docs.doc(slot)],
                    &mut buf,
                );
                pending.push_back(due);
            }
            if !buf.is_empty() {
                socket
                    .write_all(&buf)
                    .await
                    .map_err(TargetError::RedisWrite)?;
            }
            let wake = if pending.len() < plan.in_flight_max {
                pacer.next_due().min(plan.until)
            } else {
                plan.until
            };
            tokio::select! {
                r = answers.next(), if !pending.is_empty() => {
                    let due = pending.pop_front().expect("an answer to a sent SET");
                    account(&mut out, due, &r?);
                }
                _ = tokio::time::sleep_until(wake.into()) => {}
            }
        }
        out.behind = pacer.behind(plan.until);
        while let Some(due) = pending.pop_front() {
            let r = answers.next().await?;
            account(&mut out, due, &r);
        }
        Ok(out)
    }

    /// SET, then `WAIT 1 <timeout>`: true once the replica acknowledged it in time.
    pub async fn durable_set(&self, key: &[u8], value: &[u8]) -> Result<bool, TargetError> {
        let timeout_ms = DURABLE_TIMEOUT.as_millis().to_string();
        let mut conn = self.durable_primary.lock().await;
        if !conn.call(&[b"SET", key, value]).await?.is_ok() {
            return Ok(false);
        }
        let acked = conn.call(&[b"WAIT", b"1", timeout_ms.as_bytes()]).await?;
        Ok(matches!(acked, Reply::Integer(n) if n >= 1))
    }

    pub async fn send_sample(&self, key: &[u8], value: &[u8]) -> Result<(), TargetError> {
        let mut buf = Vec::with_capacity(value.len() + 64);
        encode(&[b"SET", key, value], &mut buf);
        self.sample_primary
            .lock()
            .await
            .write_all(&buf)
            .await
            .map_err(TargetError::RedisWrite)?;
        Ok(())
    }

    pub async fn visible(&self, key: &[u8], value: &[u8]) -> Result<bool, TargetError> {
        let r = self
            .sample_replica
            .lock()
            .await
            .call(&[b"GET", key])
            .await?;
        Ok(matches!(r, Reply::Bulk(Some(v)) if v == value))
    }

    pub fn sample_errors(&self) -> u64 {
        self.sample_errors.load(Ordering::Relaxed)
    }

    /// Lag in replication-stream bytes (midpoint of two primary reads around the replica's).
    pub async fn probe(&self) -> Result<LagReading, TargetError> {
        let mut p = self.probe_primary.lock().await;
        let mut r = self.probe_replica.lock().await;
        let m1 = RedisPair::primary_offset(&mut p).await?;
        let applied = RedisPair::replica_offset(&mut r).await?;
        let m2 = RedisPair::primary_offset(&mut p).await?;
        Ok(LagReading {
            behind: (m1 + m2) as f64 / 2.0 - applied as f64,
            bytes_total: m2,
            producer_remaining: None,
        })
    }

    /// (replication offset, SET calls) on the primary: two of these around a step give the
    /// bytes one SET adds to the replication stream.
    pub async fn offset_and_sets(&self) -> Result<(u64, u64), TargetError> {
        let mut p = self.probe_primary.lock().await;
        let offset = RedisPair::primary_offset(&mut p).await?;
        let sets = RedisPair::set_calls(&mut p).await?;
        Ok((offset, sets))
    }
}
