//! DCP_NOOP on an idle producer connection, and dead-connection detection.
//!
//! With noops enabled, once the connection has been quiet towards the client for one
//! interval the producer sends a DCP_NOOP. If that noop is still unanswered after another
//! interval, the client is gone (or stuck) and the connection is closed.

use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoopAction {
    Nothing,
    SendNoop,
    Disconnect,
}

#[derive(Debug)]
pub struct NoopTimer {
    enabled: bool,
    interval: Duration,
    last_sent: Instant,
    outstanding_since: Option<Instant>,
}

pub const NOOP_INTERVAL_DEFAULT: Duration = Duration::from_secs(120);

impl NoopTimer {
    pub fn new(now: Instant) -> Self {
        NoopTimer {
            enabled: false,
            interval: NOOP_INTERVAL_DEFAULT,
            last_sent: now,
            outstanding_since: None,
        }
    }

    pub fn enable(&mut self, on: bool, now: Instant) {
        self.enabled = on;
        self.last_sent = now;
        self.outstanding_since = None;
    }

    /// Takes effect whether noops are enabled before or after it is set.
    pub fn set_interval(&mut self, interval: Duration) {
        self.interval = interval;
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    fn interval(&self) -> Option<Duration> {
        self.enabled.then_some(self.interval)
    }

    /// Anything sent counts as traffic: the client knows we are alive.
    pub fn on_sent(&mut self, now: Instant) {
        self.last_sent = now;
    }

    pub fn on_response(&mut self) {
        self.outstanding_since = None;
    }

    /// When to call [`Self::tick`] next.
    pub fn next_deadline(&self) -> Option<Instant> {
        let i = self.interval()?;
        Some(match self.outstanding_since {
            Some(t) => t + i,
            None => self.last_sent + i,
        })
    }

    pub fn tick(&mut self, now: Instant) -> NoopAction {
        let Some(interval) = self.interval() else {
            return NoopAction::Nothing;
        };
        if let Some(t) = self.outstanding_since {
            return if now >= t + interval {
                NoopAction::Disconnect
            } else {
                NoopAction::Nothing
            };
        }
        if now >= self.last_sent + interval {
            self.outstanding_since = Some(now);
            self.last_sent = now;
            NoopAction::SendNoop
        } else {
            NoopAction::Nothing
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_connection_gets_a_noop_then_is_closed_if_it_never_answers() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut n = NoopTimer::new(t0);
        assert_eq!(n.tick(t0 + 10 * s), NoopAction::Nothing, "off by default");
        n.set_interval(2 * s);
        n.enable(true, t0);
        assert_eq!(n.tick(t0 + s), NoopAction::Nothing);
        n.on_sent(t0 + s);
        assert_eq!(
            n.tick(t0 + 2 * s),
            NoopAction::Nothing,
            "traffic resets the timer"
        );
        assert_eq!(n.tick(t0 + 3 * s), NoopAction::SendNoop);
        assert_eq!(n.tick(t0 + 4 * s), NoopAction::Nothing);
        n.on_response();
        assert_eq!(n.tick(t0 + 5 * s), NoopAction::SendNoop);
        assert_eq!(n.next_deadline(), Some(t0 + 7 * s));
        assert_eq!(n.tick(t0 + 7 * s), NoopAction::Disconnect);
    }
}
