//! Time, injected, so tests and simulations control it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

pub trait Clock: Send + Sync {
    /// Wall-clock nanoseconds since the Unix epoch (for the hybrid logical clock).
    fn now_unix_ns(&self) -> u64;
    /// Wall-clock seconds since the Unix epoch (for expiry).
    fn now_unix_s(&self) -> u32 {
        (self.now_unix_ns() / 1_000_000_000) as u32
    }
}

#[derive(Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_unix_ns(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    }
}

/// A clock tests move by hand.
#[derive(Debug)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    pub fn new(unix_ns: u64) -> ManualClock {
        ManualClock(AtomicU64::new(unix_ns))
    }
    pub fn advance_s(&self, s: u64) {
        self.0.fetch_add(s * 1_000_000_000, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_unix_ns(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}
