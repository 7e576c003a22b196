//! Where new vbucket uuids come from: a random source passed in ([`Bucket::open_with_rng`]),
//! so that a bucket opened with the same seed draws the same uuids and a simulation can
//! replay a run. A node opens its buckets with the OS's randomness ([`Bucket::open`]): uuids
//! tell histories apart, so they must differ across nodes and restarts.
//!
//! [`Bucket::open`]: crate::Bucket::open
//! [`Bucket::open_with_rng`]: crate::Bucket::open_with_rng

use rand::RngCore;
use sluice_types::VbUuid;

pub struct VbUuids {
    rng: Box<dyn RngCore + Send>,
}

impl VbUuids {
    pub fn new(rng: impl RngCore + Send + 'static) -> VbUuids {
        VbUuids { rng: Box::new(rng) }
    }

    /// A random, non-zero vbucket uuid (a replica reports uuid 0 for "no history yet").
    pub fn next(&mut self) -> VbUuid {
        loop {
            let u = self.rng.next_u64();
            if u != 0 {
                return VbUuid(u);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn a_seed_gives_the_same_uuids_and_another_seed_others() {
        let draw = |seed: u64| {
            let mut uuids = VbUuids::new(StdRng::seed_from_u64(seed));
            (0..8).map(|_| uuids.next()).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
    }

    #[test]
    fn zero_is_never_drawn() {
        /// Zero twice, then one.
        struct Zeros(u64);
        impl RngCore for Zeros {
            fn next_u32(&mut self) -> u32 {
                self.next_u64() as u32
            }
            fn next_u64(&mut self) -> u64 {
                self.0 += 1;
                u64::from(self.0 > 2)
            }
            fn fill_bytes(&mut self, dest: &mut [u8]) {
                dest.fill(0);
            }
            fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
                self.fill_bytes(dest);
                Ok(())
            }
        }
        assert_eq!(VbUuids::new(Zeros(0)).next(), VbUuid(1));
    }
}
