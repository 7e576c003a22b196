//! The flusher's decisions, with no bucket, clock or thread: its CPU share, where each round
//! starts, and what follows a round. The thread ([`super::run`]) reads the clock and the
//! backlog, asks [`FlusherSchedule::step`] and carries out the answer; a simulation can drive
//! the same schedule with time it advances itself.
//!
//! ```text
//!        ┌─────────────────────────────────────────────────────────────┐
//!        ▼                                                             │
//!   (SetShare) ─▶ Flush ─▶ committed ─▶ (Sleep: rest of the interval) ─┤
//!                   │                                                  │
//!                   ├────▶ empty ─────▶ Wait (until woken) ────────────┘
//!                   │        └── stopping ─▶ Stop
//!                   └────▶ failed ────▶ Stop
//! ```
//!
//! - the share changes only when the backlog crosses a threshold ([`share_for`]);
//! - each round starts one vbucket further on, so a round cut short by its byte budget does
//!   not favour the low vbuckets;
//! - after a commit the next round waits until `flush_interval` has passed since this one
//!   began (not when stopping: shutdown drains at once);
//! - whether the bucket is stopping is judged when the round begins.

use crate::background::Share;
use std::time::{Duration, Instant};

/// How long the flusher sleeps when there is nothing to do (it is woken on every write).
pub const IDLE_WAIT: Duration = Duration::from_millis(100);

/// The flusher takes a fair share of the CPU from this share of the checkpoint budget on
/// (writes are refused at the whole budget)...
const FAIR_SHARE_FROM: f64 = 0.5;
/// ...and goes back to the leftovers below this one.
const LEFTOVER_SHARE_BELOW: f64 = 0.2;

/// What the flusher does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlusherAction {
    /// Take this CPU share (the backlog crossed a threshold).
    SetShare(Share),
    /// One round, its vbuckets in order from `first_vb`; report how it went with
    /// [`FlusherSchedule::round_done`] before the next step.
    Flush { first_vb: usize },
    /// Sleep this long, deaf to wake-ups, so the next batch gathers (see
    /// `BucketConfig::flush_interval`).
    Sleep(Duration),
    /// Nothing was flushed: wait this long, or until a write wakes the flusher.
    Wait(Duration),
    /// The thread ends.
    Stop,
}

/// How a round went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoundOutcome {
    /// Something was committed.
    Committed,
    /// There was nothing to commit.
    Empty,
    /// Storage failed; the bucket refuses writes from now on.
    Failed,
}

/// What the flusher reads at a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlusherObservation {
    /// Checkpoint memory in use: what waits for the flusher.
    pub checkpoint_bytes: u64,
    pub checkpoint_bytes_max: u64,
    /// The bucket is shutting down: flush what is left, then stop.
    pub stopping: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Before a round: the share first, then the round.
    Share,
    Round,
    /// A round was handed out and its outcome is not reported yet.
    Running {
        began: Instant,
        stopping: bool,
    },
    Reported {
        began: Instant,
        stopping: bool,
        outcome: RoundOutcome,
    },
    Stopped,
}

/// The flusher's share, its rotation over the vbuckets, and where it is in its round.
#[derive(Debug)]
pub struct FlusherSchedule {
    flush_interval: Duration,
    num_vbuckets: usize,
    share: Share,
    next_first_vb: usize,
    stage: Stage,
}

impl FlusherSchedule {
    /// A schedule for a thread that starts with the leftover share (a batch thread's).
    pub fn new(flush_interval: Duration, num_vbuckets: usize) -> FlusherSchedule {
        assert!(num_vbuckets > 0, "a bucket has vbuckets");
        FlusherSchedule {
            flush_interval,
            num_vbuckets,
            share: Share::Leftover,
            next_first_vb: 0,
            stage: Stage::Share,
        }
    }

    /// The next action. Call it after the previous action was carried out, with the time
    /// and the backlog read then.
    pub fn step(&mut self, now: Instant, seen: FlusherObservation) -> FlusherAction {
        // At most: the end of a round, the share, the next round.
        loop {
            match self.stage {
                Stage::Share => {
                    self.stage = Stage::Round;
                    let wanted =
                        share_for(seen.checkpoint_bytes, seen.checkpoint_bytes_max, self.share);
                    if wanted != self.share {
                        self.share = wanted;
                        return FlusherAction::SetShare(wanted);
                    }
                }
                Stage::Round => {
                    let first_vb = self.next_first_vb;
                    self.next_first_vb = (first_vb + 1) % self.num_vbuckets;
                    self.stage = Stage::Running {
                        began: now,
                        stopping: seen.stopping,
                    };
                    return FlusherAction::Flush { first_vb };
                }
                Stage::Running { .. } => {
                    panic!("a round's outcome is reported before the next step")
                }
                Stage::Reported {
                    began,
                    stopping,
                    outcome,
                } => {
                    self.stage = Stage::Share;
                    if let Some(action) = self.after_round(now, began, stopping, outcome) {
                        return action;
                    }
                }
                Stage::Stopped => return FlusherAction::Stop,
            }
        }
    }

    /// Reports how the round handed out by the last step went.
    pub fn round_done(&mut self, outcome: RoundOutcome) {
        let Stage::Running { began, stopping } = self.stage else {
            panic!("only a round the schedule handed out is reported");
        };
        self.stage = Stage::Reported {
            began,
            stopping,
            outcome,
        };
    }

    /// What follows a round; None: the next round, at once.
    fn after_round(
        &mut self,
        now: Instant,
        began: Instant,
        stopping: bool,
        outcome: RoundOutcome,
    ) -> Option<FlusherAction> {
        match outcome {
            // Writes keep raising the flusher's wake-up meanwhile; the next round finds them.
            RoundOutcome::Committed if stopping => None,
            RoundOutcome::Committed => self
                .flush_interval
                .checked_sub(now.saturating_duration_since(began))
                .map(FlusherAction::Sleep),
            RoundOutcome::Empty if stopping => {
                self.stage = Stage::Stopped;
                Some(FlusherAction::Stop)
            }
            RoundOutcome::Empty => Some(FlusherAction::Wait(IDLE_WAIT)),
            RoundOutcome::Failed => {
                self.stage = Stage::Stopped;
                Some(FlusherAction::Stop)
            }
        }
    }
}

/// The flusher's CPU share for a backlog of `backlog` checkpoint bytes, with hysteresis: low
/// priority keeps request latency low while the flusher keeps up; once writes pile up
/// towards the budget (where they would be refused), persistence needs the CPU more.
fn share_for(backlog: u64, budget: u64, current: Share) -> Share {
    let share_of_budget = backlog as f64 / budget.max(1) as f64;
    match current {
        Share::Leftover if share_of_budget >= FAIR_SHARE_FROM => Share::Fair,
        Share::Fair if share_of_budget < LEFTOVER_SHARE_BELOW => Share::Leftover,
        same => same,
    }
}

#[cfg(test)]
mod tests;
