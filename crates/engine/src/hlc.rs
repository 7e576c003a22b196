//! The per-vbucket hybrid logical clock that produces CAS values.
//!
//! A CAS is the wall clock in nanoseconds with the low 16 bits cleared, or the previous CAS + 1
//! when the wall clock has not moved past it. That keeps CAS strictly increasing within a
//! vbucket and close to real time, which cross-cluster last-write-wins relies on.

use sluice_types::Cas;

#[derive(Debug, Clone, Copy, Default)]
pub struct Hlc {
    last: u64,
}

impl Hlc {
    /// Starts past every CAS already handed out (from storage at warmup).
    pub fn starting_after(max_cas: u64) -> Hlc {
        Hlc { last: max_cas }
    }

    pub fn next(&mut self, now_unix_ns: u64) -> Cas {
        let wall = now_unix_ns & !0xffff;
        self.last = if wall > self.last {
            wall
        } else {
            self.last + 1
        };
        Cas(self.last)
    }

    /// Moves the clock past a CAS seen from elsewhere (replication).
    pub fn observe(&mut self, cas: u64) {
        self.last = self.last.max(cas);
    }

    pub fn max_cas(&self) -> u64 {
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strictly_increasing_even_when_the_wall_clock_stalls_or_goes_back() {
        let mut h = Hlc::default();
        let a = h.next(10_000_000);
        let b = h.next(10_000_000);
        let c = h.next(5);
        assert!(a < b && b < c);
        assert_eq!(a.0 & 0xffff, 0);
        let d = h.next(20_000_000_000);
        assert_eq!(d.0, 20_000_000_000 & !0xffff);
    }
}
