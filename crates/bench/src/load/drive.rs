//! One connection's load loop.
//!
//! Closed loop (no pacer): keep `pipeline` requests in flight; each answer releases the next
//! request at once. Latency counts from the actual send.
//!
//! Open loop (a [`Pacer`]): send each request at its scheduled time, as long as fewer than
//! `pipeline` are in flight. A request that could not go out on time (the pipeline was full,
//! or the task woke late) keeps its scheduled time, and its latency counts from there, so a
//! server stall shows up in the percentiles instead of silently lowering the offered load.
//!
//! Tokio's timer fires one to two milliseconds late (a 1 ms wheel, then the epoll timeout
//! rounded up), which would add that much to every open-loop latency. So a request may go out
//! up to [`SEND_AHEAD`] before its slot, and its latency counts from the earlier of its slot
//! and its actual send ([`latency_origin`]): a request sent early counts from its send, one
//! sent late (a full pipeline, a stalled server, a late wakeup) counts from its slot.
//!
//! Either way the loop stops sending at `window.end` (or earlier, at the window's [`Stop`])
//! and drains what is in flight; only answers that arrive inside `[measure_from, end]` are
//! counted.

use sluice_client::{Client, Opcode, Packet, Status};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::time::{sleep_until, timeout_at};

use crate::error::BenchError;
use crate::load::latency::Latency;
use crate::load::pacer::Pacer;
use crate::load::stop::Stop;
use crate::load::workload::{Mix, Op, Rng, Workload, SUBDOC_COUNTER_PATH, SUBDOC_GET_PATH};

/// How long after the end of a run the loop still waits for answers in flight.
pub const ANSWER_GRACE: Duration = Duration::from_secs(10);

/// How early an open-loop request may go out: two ticks of tokio's 1 ms timer wheel, which
/// measured against memcached at 2,000 and 50,000 ops/s kept the slot-based p50 within a few
/// µs of the send-based one.
pub const SEND_AHEAD: Duration = Duration::from_millis(2);

/// Slots due this close to the end are not counted as "behind schedule" when unsent: the
/// last wakeup may legitimately land past the end.
const BEHIND_SLACK: Duration = Duration::from_millis(10);

/// SET extras: flags 0, expiry 0 (never).
const SET_EXTRAS: [u8; 8] = [0; 8];
/// After a temporary failure (the server is out of memory for now) a connection sends
/// nothing for this long, as the SDKs back off, rather than hammering a server that is
/// trying to free memory.
pub const REFUSED_BACKOFF: Duration = Duration::from_millis(1);

/// When a run sends and when it counts.
#[derive(Debug, Clone)]
pub struct Window {
    pub measure_from: Instant,
    pub end: Instant,
    /// Ends the run before `end` when signalled.
    pub stop: Stop,
}

impl Window {
    /// `end`, or the stop instant if the run was stopped before it.
    pub fn end_now(&self) -> Instant {
        self.stop.end_by(self.end)
    }
}

/// What one connection saw during the measured part of a run.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Gets (hits and misses) plus successful sets.
    pub ops: u64,
    pub gets: u64,
    pub sets: u64,
    pub get_misses: u64,
    /// Temporary failures (ETMPFAIL): refused for now, followed by [`REFUSED_BACKOFF`].
    pub refused: u64,
    /// Answers with any other status (counted apart from `ops`).
    pub errors: u64,
    /// Open loop only: requests due before the end that were never sent.
    pub behind_schedule: u64,
    /// From the scheduled send time (open loop) or the actual send (closed loop).
    pub latency: Latency,
    /// From the actual send, always: the server's share without the generator's queueing.
    pub service: Latency,
}

impl Tally {
    pub fn merge(&mut self, other: &Tally) {
        self.ops += other.ops;
        self.gets += other.gets;
        self.sets += other.sets;
        self.get_misses += other.get_misses;
        self.refused += other.refused;
        self.errors += other.errors;
        self.behind_schedule += other.behind_schedule;
        self.latency.merge(&other.latency);
        self.service.merge(&other.service);
    }
}

struct Pending {
    opaque: u32,
    op: Op,
    scheduled: Instant,
    sent: Instant,
}

/// One connection's moving parts during a run.
struct Conn<'a> {
    client: &'a mut Client,
    work: &'a Workload,
    pipeline: usize,
    pacer: Option<Pacer>,
    rng: Rng,
    pending: VecDeque<Pending>,
    /// Backing off after a temporary failure: nothing is sent before this.
    hold_until: Option<Instant>,
}

/// Drives one connection through `window`. `completed` counts every answer (warmup included)
/// for the progress bar.
pub async fn drive(
    client: &mut Client,
    work: &Workload,
    window: Window,
    pipeline: usize,
    pacer: Option<Pacer>,
    rng: Rng,
    completed: &AtomicU64,
) -> Result<Tally, BenchError> {
    let mut conn = Conn {
        client,
        work,
        pipeline,
        pacer,
        rng,
        pending: VecDeque::with_capacity(pipeline),
        hold_until: None,
    };
    let mut tally = Tally::default();
    let answer_deadline = (window.end + ANSWER_GRACE).into();
    loop {
        let now = Instant::now();
        let end = window.end_now();
        let sending = now < end;
        let held = conn.hold_until.filter(|t| now < *t);
        if sending && held.is_none() {
            conn.send_what_is_due(now).await?;
        }
        // With room in the pipeline, the next slot may come before the next answer; a
        // connection backing off wakes when the back-off ends.
        let wake = match (&conn.pacer, held) {
            (_, Some(t)) if sending => Some(t.min(end)),
            (Some(p), _) if sending && conn.pending.len() < conn.pipeline => Some(wake_for(p, end)),
            _ => None,
        };
        if conn.pending.is_empty() {
            match wake {
                Some(at) => {
                    sleep_until(at.into()).await;
                    continue;
                }
                None => break,
            }
        }
        let answer = match wake {
            Some(at) => tokio::select! {
                r = timeout_at(answer_deadline, conn.client.read_response()) => r,
                _ = sleep_until(at.into()) => continue,
            },
            None => timeout_at(answer_deadline, conn.client.read_response()).await,
        };
        let resp = answer.map_err(|_| BenchError::NoAnswer(ANSWER_GRACE))??;
        let done = Instant::now();
        completed.fetch_add(1, Ordering::Relaxed);
        let Some(p) = conn.pending.pop_front() else {
            unreachable!("an answer is only awaited with a request pending")
        };
        if resp.opaque != p.opaque {
            return Err(BenchError::OutOfStep {
                expected: p.opaque,
                got: resp.opaque,
            });
        }
        if resp.status_code == Status::Etmpfail.code() {
            conn.hold_until = Some(done + REFUSED_BACKOFF);
        }
        if done >= window.measure_from && done <= window.end_now() {
            count(&mut tally, &p, resp.status_code, done);
        }
    }
    if let Some(p) = &conn.pacer {
        tally.behind_schedule = p.behind(window.end_now() - BEHIND_SLACK);
    }
    Ok(tally)
}

impl Conn<'_> {
    /// Fills the pipeline: at once (closed loop) or with the slots due by now (open loop),
    /// then sends them in one write.
    async fn send_what_is_due(&mut self, now: Instant) -> Result<(), BenchError> {
        let mut queued = false;
        while self.pending.len() < self.pipeline {
            let scheduled = match self.pacer.as_mut() {
                None => now,
                Some(p) => match p.take_due(now + SEND_AHEAD) {
                    Some(due) => latency_origin(due, now),
                    None => break,
                },
            };
            let (op, index) = self.work.next(&mut self.rng);
            let opaque = queue(self.client, self.work, op, index);
            self.pending.push_back(Pending {
                opaque,
                op,
                scheduled,
                sent: now,
            });
            queued = true;
        }
        if queued {
            self.client.flush().await?;
        }
        Ok(())
    }
}

/// Where an open-loop request's latency starts: its slot, unless it went out before it.
fn latency_origin(slot: Instant, sent: Instant) -> Instant {
    slot.min(sent)
}

/// When to wake for the next slot: [`SEND_AHEAD`] before it, and no later than the end.
fn wake_for(p: &Pacer, end: Instant) -> Instant {
    let due = p.next_due();
    due.checked_sub(SEND_AHEAD).unwrap_or(due).min(end)
}

/// Single-path extras: `u16 path_len, u8 path_flags`.
const SUBDOC_GET_EXTRAS: [u8; 3] = [0, SUBDOC_GET_PATH.len() as u8, 0];
const SUBDOC_COUNTER_EXTRAS: [u8; 3] = [0, SUBDOC_COUNTER_PATH.len() as u8, 0];
/// The counter's path, then its delta.
const SUBDOC_COUNTER_BODY: &[u8] = b"n1";
const _: () = assert!(SUBDOC_COUNTER_PATH.len() == 1 && SUBDOC_COUNTER_BODY[0] == b'n');

fn queue(client: &mut Client, work: &Workload, op: Op, index: u64) -> u32 {
    let wk = work.wire_key(index);
    let k = wk.bytes();
    let vb = client.vbucket_of(&wk.logical).0;
    let packet = match (work.mix, op) {
        (Mix::Subdoc, Op::Get) => Packet::request(Opcode::SubdocGet.byte(), vb, 0)
            .extras(&SUBDOC_GET_EXTRAS)
            .key(k)
            .value(SUBDOC_GET_PATH),
        (Mix::Subdoc, Op::Set) => Packet::request(Opcode::SubdocCounter.byte(), vb, 0)
            .extras(&SUBDOC_COUNTER_EXTRAS)
            .key(k)
            .value(SUBDOC_COUNTER_BODY),
        (_, Op::Get) => Packet::request(Opcode::Get.byte(), vb, 0).key(k),
        (_, Op::Set) => Packet::request(Opcode::Set.byte(), vb, 0)
            .extras(&SET_EXTRAS)
            .key(k)
            .value(&work.value),
    };
    client.queue_request(packet)
}

fn count(tally: &mut Tally, p: &Pending, status: u16, done: Instant) {
    let ok = status == Status::Success.code();
    match p.op {
        Op::Get if ok => tally.gets += 1,
        Op::Get if status == Status::KeyEnoent.code() => {
            tally.gets += 1;
            tally.get_misses += 1;
        }
        Op::Set if ok => tally.sets += 1,
        _ if status == Status::Etmpfail.code() => {
            tally.refused += 1;
            return;
        }
        _ => {
            tally.errors += 1;
            return;
        }
    }
    tally.ops += 1;
    tally.latency.record(done - p.scheduled);
    tally.service.record(done - p.sent);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn late_requests_count_from_their_slot_early_ones_from_their_send() {
        let slot = Instant::now();
        let late = slot + Duration::from_millis(5);
        let early = slot - Duration::from_micros(300);
        assert_eq!(
            latency_origin(slot, late),
            slot,
            "the 5 ms of lateness is counted"
        );
        assert_eq!(
            latency_origin(slot, early),
            early,
            "no credit for sending early"
        );
    }

    #[test]
    fn answers_are_counted_by_status() {
        let now = Instant::now();
        let pending = |op| Pending {
            opaque: 1,
            op,
            scheduled: now,
            sent: now,
        };
        let mut t = Tally::default();
        count(&mut t, &pending(Op::Set), Status::Success.code(), now);
        count(&mut t, &pending(Op::Get), Status::KeyEnoent.code(), now);
        count(&mut t, &pending(Op::Set), Status::Etmpfail.code(), now);
        count(&mut t, &pending(Op::Set), Status::E2big.code(), now);
        assert_eq!((t.ops, t.sets, t.gets, t.get_misses), (2, 1, 1, 1));
        assert_eq!(
            (t.refused, t.errors),
            (1, 1),
            "a temporary failure is not an error"
        );
        assert_eq!(
            t.latency.summary().count,
            2,
            "only answered operations have latency"
        );
    }
}
