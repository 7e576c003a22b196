//! Fencing: when a node must stop serving its active vbuckets because the rest of the
//! cluster may have promoted their replicas. The decision, fed with reachability
//! observations and the time; the caller probes and applies it.
//!
//! The other side can promote only if it holds a majority of the metadata voters (a
//! failover is a Raft proposal). So this node fences itself once the voters it cannot reach
//! could form a majority on their own, and have been able to for [`Fence::after`]. That is
//! exactly when it is cut off: a 3-voter cluster fences a node that reaches neither peer,
//! not one with a single peer down; a 2-voter cluster never fences (neither side alone is a
//! majority, so neither can fail the other over).
//!
//! The bound: a probe round every `probe_every`, each probe failing after `probe_timeout`
//! at most, so the node is fenced at most `after + probe_timeout + probe_every` after it is
//! cut off ([`Fence::bound`]). An automatic failover needs a longer timeout than that, so
//! two copies of a vbucket never take writes at the same moment.

use std::time::{Duration, Instant};

/// Whether this node serves its actives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceState {
    Serving,
    Fenced,
}

/// One round of probes of the metadata voters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reachability {
    /// Voters in the metadata group, this node included if it is one.
    pub voters: usize,
    /// Voters other than this node that did not answer.
    pub unreachable: usize,
}

impl Reachability {
    /// Whether the voters this node cannot reach could form a majority without it.
    pub fn outvoted(&self) -> bool {
        self.voters > 0 && self.unreachable > self.voters / 2
    }
}

#[derive(Debug)]
pub struct Fence {
    after: Duration,
    /// When a round last showed the unreachable voters short of a majority.
    last_safe: Instant,
    state: FenceState,
}

impl Fence {
    /// A fence serving from `now`, that engages `after` the unreachable voters could
    /// outvote this node.
    pub fn new(after: Duration, now: Instant) -> Fence {
        Fence {
            after,
            last_safe: now,
            state: FenceState::Serving,
        }
    }

    /// The longest a cut-off node keeps serving, with probes every `probe_every` that give
    /// up after `probe_timeout`.
    pub fn bound(after: Duration, probe_every: Duration, probe_timeout: Duration) -> Duration {
        after + probe_every + probe_timeout
    }

    /// One round's outcome at `now`; returns the new state when it changed.
    pub fn observe(&mut self, r: Reachability, now: Instant) -> Option<FenceState> {
        if !r.outvoted() {
            self.last_safe = now;
        }
        let next = if now.saturating_duration_since(self.last_safe) >= self.after {
            FenceState::Fenced
        } else {
            FenceState::Serving
        };
        (next != self.state).then(|| {
            self.state = next;
            next
        })
    }

    pub fn state(&self) -> FenceState {
        self.state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AFTER: Duration = Duration::from_millis(1000);

    fn r(voters: usize, unreachable: usize) -> Reachability {
        Reachability {
            voters,
            unreachable,
        }
    }

    #[test]
    fn outvoted_when_the_unreachable_voters_are_a_majority() {
        // (voters, unreachable, outvoted)
        let rows = [
            (1, 0, false),
            (2, 1, false),
            (3, 1, false),
            (3, 2, true),
            (4, 2, false),
            (4, 3, true),
            (5, 2, false),
            (5, 3, true),
            (0, 0, false),
        ];
        for (voters, unreachable, want) in rows {
            assert_eq!(
                r(voters, unreachable).outvoted(),
                want,
                "{voters}/{unreachable}"
            );
        }
    }

    #[test]
    fn fences_after_the_delay_and_serves_again_at_once() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut f = Fence::new(AFTER, t0);
        // (time in ms, unreachable of 3 voters, transition expected)
        let script = [
            (200, 1, None),
            (400, 2, None), // cut off from here: the last safe round was at 200
            (1000, 2, None),
            (1199, 2, None),
            (1200, 2, Some(FenceState::Fenced)),
            (1400, 2, None),
            (1600, 1, Some(FenceState::Serving)),
            (1800, 2, None),
            (2599, 2, None),
            (2600, 2, Some(FenceState::Fenced)),
        ];
        for (at, unreachable, want) in script {
            assert_eq!(f.observe(r(3, unreachable), ms(at)), want, "at {at} ms");
        }
        assert_eq!(f.state(), FenceState::Fenced);
    }

    #[test]
    fn the_bound_adds_a_round_and_a_probe_timeout() {
        let b = Fence::bound(
            AFTER,
            Duration::from_millis(200),
            Duration::from_millis(300),
        );
        assert_eq!(b, Duration::from_millis(1500));
    }
}
