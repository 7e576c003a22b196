//! The per-vbucket hybrid logical clock that produces CAS values.
//!
//! A CAS is the wall clock in nanoseconds with the low 16 bits cleared, or just past the
//! previous CAS when the wall clock has not moved past it. That keeps CAS strictly
//! increasing within a vbucket and close to real time, which cross-cluster last-write-wins
//! relies on.
//!
//! Every CAS a node makes also ends in that node's salt (`CAS % CAS_SALT_MODULUS == salt`,
//! chosen at random per bucket when a node opens it). Two nodes writing the same key in the
//! same 65 µs tick (two clusters replicating both ways, say) then make different CAS values
//! unless their salts collide, so conflict resolution has a winner and both clusters settle
//! on it. Couchbase's clock has no salt: there, two such writes can tie on every field and
//! each cluster keeps its own. A CAS then moves at most `CAS_SALT_MODULUS - 1` ns past
//! where Couchbase's would be; within one tick a vbucket makes up to 16 CAS values before
//! it runs ahead of the wall clock (as Couchbase's does after 65,536).

use sluice_types::Cas;

/// CAS values a node makes are congruent to its salt modulo this.
pub const CAS_SALT_MODULUS: u64 = 4096;

#[derive(Debug, Clone, Copy, Default)]
pub struct Hlc {
    last: u64,
}

impl Hlc {
    /// Starts past every CAS already handed out (from storage at warmup).
    pub fn starting_after(max_cas: u64) -> Hlc {
        Hlc { last: max_cas }
    }

    /// The next CAS: past the last one, at least the wall clock's tick, ending in `salt`
    /// (below [`CAS_SALT_MODULUS`]).
    pub fn next(&mut self, now_unix_ns: u64, salt: u16) -> Cas {
        let salt = u64::from(salt) % CAS_SALT_MODULUS;
        let floor = (now_unix_ns & !0xffff).max(self.last + 1);
        let mut cas = (floor & !(CAS_SALT_MODULUS - 1)) | salt;
        if cas < floor {
            cas += CAS_SALT_MODULUS;
        }
        self.last = cas;
        Cas(cas)
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
        let a = h.next(10_000_000, 0);
        let b = h.next(10_000_000, 0);
        let c = h.next(5, 0);
        assert!(a < b && b < c);
        assert_eq!(a.0 & 0xffff, 0);
        let d = h.next(20_000_000_000, 0);
        assert_eq!(d.0, 20_000_000_000 & !0xffff);
    }

    #[test]
    fn every_cas_ends_in_the_salt_so_two_salts_never_meet() {
        let (mut x, mut y) = (Hlc::default(), Hlc::default());
        let now = 1_800_000_000_000_000_000;
        let xs: Vec<u64> = (0..100).map(|_| x.next(now, 7).0).collect();
        let ys: Vec<u64> = (0..100).map(|_| y.next(now, 8).0).collect();
        assert!(xs.windows(2).all(|w| w[0] < w[1]));
        assert!(xs.iter().all(|c| c % CAS_SALT_MODULUS == 7));
        assert!(ys.iter().all(|c| c % CAS_SALT_MODULUS == 8));
        assert!(xs.iter().all(|c| !ys.contains(c)));
        // Close to the wall clock: the first CAS of a tick is within the salt of it.
        assert_eq!(xs[0], (now & !0xffff) + 7);
        // A CAS seen from elsewhere (another salt) is passed, and the salt kept.
        x.observe(xs[99] + 5000);
        let next = x.next(now, 7).0;
        assert!(next > xs[99] + 5000 && next % CAS_SALT_MODULUS == 7);
    }
}
