//! The serving lease: how long this node may go on serving its active vbuckets on the word
//! of its last probe round, checked on every request against the clock.
//!
//! The fenced flag (`Node::set_fenced`) is set by a task, so it only changes while the
//! node runs. A node frozen (SIGSTOP, a stalled VM) past its failover wakes with the flag
//! down and every peer answering; until the new map reached it, it would serve its old
//! actives beside the promoted copies. The lease makes the clock decide instead: the
//! manager's fencing grants it for a while after each round of probes that found no
//! majority of voters unreachable or knowing a newer map, and a request that comes after
//! it ran out is refused (NOT_MY_VBUCKET) until a round renews it.
//!
//! A node outside a cluster (no voter but itself) needs no lease: nobody can fail it over.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

#[derive(Debug)]
pub struct Lease {
    /// Times are kept as nanoseconds since this instant.
    epoch: Instant,
    /// Whether requests need the lease at all (false until fencing first asks for it).
    required: AtomicBool,
    /// When the lease runs out.
    until_ns: AtomicU64,
}

impl Lease {
    /// A lease not (yet) required: the node serves.
    pub fn new(now: Instant) -> Lease {
        Lease {
            epoch: now,
            required: AtomicBool::new(false),
            until_ns: AtomicU64::new(0),
        }
    }

    fn ns(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    /// Serve until `until` (`None`: without a lease, as a node alone does). A grant never
    /// shortens an earlier one: rounds can finish out of the order they began in.
    pub fn grant(&self, until: Option<Instant>) {
        match until {
            Some(t) => {
                self.until_ns.fetch_max(self.ns(t), Ordering::AcqRel);
                self.required.store(true, Ordering::Release);
            }
            None => self.required.store(false, Ordering::Release),
        }
    }

    /// From now on requests need a lease, and none is held yet (a node joining or
    /// restarting into a cluster waits for its first round).
    pub fn require(&self) {
        self.required.store(true, Ordering::Release);
    }

    /// Whether the lease is required and ran out, read against the clock now. The clock is
    /// read only when a lease is required: every request asks.
    pub fn lapsed(&self) -> bool {
        self.required.load(Ordering::Acquire) && !self.holds(Instant::now())
    }

    /// Whether the node may serve its actives at `now`.
    pub fn holds(&self, now: Instant) -> bool {
        !self.required.load(Ordering::Acquire)
            || self.ns(now) < self.until_ns.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_lease_holds_until_it_runs_out_and_only_once_required() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let l = Lease::new(t0);
        assert!(l.holds(ms(10_000)), "not required yet");
        l.require();
        assert!(!l.holds(ms(0)), "required and never granted");
        l.grant(Some(ms(1000)));
        assert!(l.holds(ms(999)));
        assert!(!l.holds(ms(1000)));
        // A round that began earlier and finished later does not shorten it.
        l.grant(Some(ms(800)));
        assert!(l.holds(ms(900)));
        l.grant(Some(ms(3000)));
        assert!(l.holds(ms(2999)));
        assert!(!l.holds(ms(5000)), "frozen past its end");
        l.grant(None);
        assert!(l.holds(ms(5000)), "alone: no lease needed");
    }
}
