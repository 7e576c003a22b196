//! An early end for a timed run: a run still ends at its window's end by itself, or sooner
//! once someone calls [`Stop::now`] (the catch-up ends its write load when the last consumer
//! has caught up). Cheap to check: one atomic load.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

#[derive(Debug, Clone, Default)]
pub struct Stop(Arc<OnceLock<Instant>>);

impl Stop {
    pub fn new() -> Stop {
        Stop::default()
    }

    /// Ends the run now; later calls keep the first instant.
    pub fn now(&self) {
        let _ = self.0.set(Instant::now());
    }

    /// When the run was told to stop, if it was.
    pub fn at(&self) -> Option<Instant> {
        self.0.get().copied()
    }

    /// The earlier of `end` and the stop instant.
    pub fn end_by(&self, end: Instant) -> Instant {
        self.at().map_or(end, |s| s.min(end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_first_stop_wins_and_never_extends_the_end() {
        let stop = Stop::new();
        let end = Instant::now() + Duration::from_secs(60);
        assert_eq!(stop.end_by(end), end);
        stop.clone().now();
        let at = stop.at().expect("stopped");
        assert!(at < end);
        stop.now();
        assert_eq!(stop.at(), Some(at));
        assert_eq!(stop.end_by(end), at);
        let early = at - Duration::from_millis(1);
        assert_eq!(stop.end_by(early), early);
    }
}
