//! The "a sync failed, never write again" latch shared by the real and the faulty store.
//!
//! After a failed fsync the kernel may have dropped the dirty pages and cleared the error, so
//! a retry could report success for data that is gone. The only safe reaction is to stop
//! writing and let the process restart from what is really on disk.

use crate::{Result, StoreError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

#[derive(Debug, Default)]
pub(crate) struct Poison {
    poisoned: AtomicBool,
    /// The first failure's message; later failures keep it (the first one is the cause).
    reason: OnceLock<String>,
}

impl Poison {
    /// Latches the poison. The reason is saved before the flag is raised, so whoever sees the
    /// flag also sees a reason.
    pub(crate) fn poison(&self, reason: String) {
        let _ = self.reason.set(reason);
        self.poisoned.store(true, Ordering::Release);
    }

    pub(crate) fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// `Err(Poisoned)` once poisoned; the check every write starts with.
    pub(crate) fn check(&self) -> Result<()> {
        if self.is_poisoned() {
            let reason = self.reason.get().map_or("unknown", String::as_str);
            Err(StoreError::Poisoned(reason.to_string()))
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_reason_wins_and_stays() {
        let p = Poison::default();
        assert!(p.check().is_ok());
        p.poison("fsync: EIO".into());
        p.poison("second".into());
        match p.check() {
            Err(StoreError::Poisoned(r)) => assert_eq!(r, "fsync: EIO"),
            other => panic!("expected Poisoned, got {other:?}"),
        }
        assert!(p.is_poisoned());
    }
}
