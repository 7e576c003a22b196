//! The pager's decisions, with no bucket, clock or thread: what to do next, given the time
//! and what the memory counters say. The thread ([`super::run`]) reads the clock and the
//! counters, asks [`PagerSchedule::step`] and carries out the answer; a simulation can drive
//! the same schedule with time it advances itself.
//!
//! One pass, cheapest relief first, timers last; a stage that is not due is skipped:
//!
//! ```text
//! Recover ─▶ Evict ─▶ Expire ─▶ Purge ─▶ Pause ─▶ Wait ─▶ (next pass)
//! ```
//!
//! - **Recover**: a checkpoint-recovery pass while checkpoint memory is past its threshold;
//! - **Evict**: above the high watermark (judged after recovery, which may have freed enough);
//! - **Expire**: once `expiry_pager_interval` has passed since the last expiry *ended*;
//! - **Purge**: the tombstone purge, every half `tombstone_purge_age` (at least a second),
//!   timed the same way;
//! - **Pause**: only after a recovery that freed nothing while still needed (see
//!   [`FUTILE_RECOVERY_PAUSE`]);
//! - **Wait**: always; the pass ends here.

use std::time::{Duration, Instant};

/// The wait between passes when nothing wakes the pager.
pub const TICK: Duration = Duration::from_millis(250);
/// Pause after a checkpoint-recovery pass that freed nothing. Every write above the recovery
/// threshold wakes the pager, so without it a flusher that lags behind the writes keeps the
/// pager spinning over every vbucket's lock (measured: a fifth of a core, and thousands of
/// tiny checkpoints) while only the flusher can make room.
pub const FUTILE_RECOVERY_PAUSE: Duration = Duration::from_millis(20);
/// The tombstone purge never runs more often than this, whatever the purge age.
const PURGE_INTERVAL_MIN: Duration = Duration::from_secs(1);

/// What the pager does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PagerAction {
    /// One checkpoint-recovery pass; report the bytes it freed with
    /// [`PagerSchedule::recovered`] before the next step.
    RecoverCheckpoints,
    /// Evict clean values, then clean items, until usage is below the low watermark. That
    /// stop is checked by the eviction itself vbucket by vbucket, since writes go on meanwhile.
    Evict,
    /// Expire the items whose time has passed.
    RunExpiry,
    /// Purge the tombstones older than the purge age.
    PurgeTombstones,
    /// Sleep this long, deaf to wake-ups (writes would only wake the pager for nothing).
    Pause(Duration),
    /// The pass is over: wait this long or until woken, then start the next one.
    Wait(Duration),
}

/// What the memory counters say at a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryPressure {
    /// Checkpoint memory is past the recovery threshold
    /// ([`crate::checkpoint_recovery::needed`]).
    pub recovery_needed: bool,
    /// Memory use is past the high watermark.
    pub above_high_watermark: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Recover,
    Evict,
    Expire,
    Purge,
    Pause,
    Wait,
}

impl Stage {
    fn next(self) -> Stage {
        match self {
            Stage::Recover => Stage::Evict,
            Stage::Evict => Stage::Expire,
            Stage::Expire => Stage::Purge,
            Stage::Purge => Stage::Pause,
            Stage::Pause => Stage::Wait,
            Stage::Wait => Stage::Recover,
        }
    }
}

/// Timed work handed out by the last step. Its timer restarts at the next step's `now`, when
/// the work has ended: a slow pass then never runs again back to back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Timed {
    Expiry,
    Purge,
}

/// The pager's timers and where it is in its pass.
#[derive(Debug)]
pub struct PagerSchedule {
    expiry_interval: Duration,
    purge_interval: Duration,
    /// When the last expiry ended (the schedule's start before the first one).
    last_expiry: Instant,
    /// When the last tombstone purge ended (the schedule's start before the first one).
    last_purge: Instant,
    /// The stage the next step looks at first.
    stage: Stage,
    running: Option<Timed>,
    /// A recovery was handed out and its freed bytes are not reported yet.
    awaiting_recovery_report: bool,
    /// Bytes this pass's recovery freed (0 when it did not run).
    recovered_bytes: usize,
    /// Recovery is needed but freed nothing this pass: pause before the wait.
    futile: bool,
}

impl PagerSchedule {
    /// A schedule starting at `now`: the first expiry and purge are one interval away.
    pub fn new(
        now: Instant,
        expiry_interval: Duration,
        tombstone_purge_age: Duration,
    ) -> PagerSchedule {
        PagerSchedule {
            expiry_interval,
            purge_interval: (tombstone_purge_age / 2).max(PURGE_INTERVAL_MIN),
            last_expiry: now,
            last_purge: now,
            stage: Stage::Recover,
            running: None,
            awaiting_recovery_report: false,
            recovered_bytes: 0,
            futile: false,
        }
    }

    /// The next action. Call it after the previous action was carried out: `now` is taken as
    /// the time that action ended, and `memory` is read after it.
    pub fn step(&mut self, now: Instant, memory: MemoryPressure) -> PagerAction {
        assert!(
            !self.awaiting_recovery_report,
            "a recovery's freed bytes are reported before the next step"
        );
        match self.running.take() {
            Some(Timed::Expiry) => self.last_expiry = now,
            Some(Timed::Purge) => self.last_purge = now,
            None => {}
        }
        // At most one trip round the stages: Wait always answers.
        loop {
            let stage = self.stage;
            self.stage = stage.next();
            if let Some(action) = self.at(stage, now, memory) {
                return action;
            }
        }
    }

    /// Reports what the recovery handed out by the last step freed.
    pub fn recovered(&mut self, freed_bytes: usize) {
        assert!(
            self.awaiting_recovery_report,
            "only a recovery the schedule asked for is reported"
        );
        self.awaiting_recovery_report = false;
        self.recovered_bytes = freed_bytes;
    }

    /// The action of `stage`, if it is due.
    fn at(&mut self, stage: Stage, now: Instant, memory: MemoryPressure) -> Option<PagerAction> {
        match stage {
            Stage::Recover => {
                self.recovered_bytes = 0;
                self.awaiting_recovery_report = memory.recovery_needed;
                memory
                    .recovery_needed
                    .then_some(PagerAction::RecoverCheckpoints)
            }
            Stage::Evict => {
                self.futile = self.recovered_bytes == 0 && memory.recovery_needed;
                memory.above_high_watermark.then_some(PagerAction::Evict)
            }
            Stage::Expire => self
                .start_if_due(Timed::Expiry, now)
                .then_some(PagerAction::RunExpiry),
            Stage::Purge => self
                .start_if_due(Timed::Purge, now)
                .then_some(PagerAction::PurgeTombstones),
            Stage::Pause => self
                .futile
                .then_some(PagerAction::Pause(FUTILE_RECOVERY_PAUSE)),
            Stage::Wait => Some(PagerAction::Wait(TICK)),
        }
    }

    fn start_if_due(&mut self, timed: Timed, now: Instant) -> bool {
        let (last, interval) = match timed {
            Timed::Expiry => (self.last_expiry, self.expiry_interval),
            Timed::Purge => (self.last_purge, self.purge_interval),
        };
        let due = now.saturating_duration_since(last) >= interval;
        if due {
            self.running = Some(timed);
        }
        due
    }
}

#[cfg(test)]
mod tests;
