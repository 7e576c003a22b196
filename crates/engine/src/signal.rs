//! A wake-up flag with a timed wait, for the background threads.

use parking_lot::{Condvar, Mutex};
use std::time::Duration;

#[derive(Debug, Default)]
pub struct Signal {
    raised: Mutex<bool>,
    cv: Condvar,
}

impl Signal {
    pub fn notify(&self) {
        let mut r = self.raised.lock();
        if !*r {
            *r = true;
            self.cv.notify_all();
        }
    }

    /// Waits until notified or `timeout` passes; clears the flag. Returns whether notified.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        let mut r = self.raised.lock();
        if !*r {
            self.cv.wait_for(&mut r, timeout);
        }
        std::mem::take(&mut *r)
    }
}
