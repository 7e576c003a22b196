//! A vbucket's chain, as durability sees it: how many copies a majority is, and whether the
//! nodes placed in it can reach one.

/// A vbucket's chain: its active and its replica slots (`None` = a slot no node fills, e.g.
/// after a failover). An empty slot still counts in the chain's length, so losing a replica
/// does not lower the majority a write needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain<N> {
    pub active: N,
    pub replicas: Vec<Option<N>>,
}

/// The chain cannot reach a majority: a durable write to it is refused before it is made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("durability needs {needed} of {chain_len} copies and only {present} are placed")]
pub struct Impossible {
    pub needed: usize,
    pub chain_len: usize,
    pub present: usize,
}

// A chain always holds its active, so it is never empty: an `is_empty` would only say false.
#[allow(clippy::len_without_is_empty)]
impl<N: Copy + Eq> Chain<N> {
    pub fn new(active: N, replicas: Vec<Option<N>>) -> Self {
        Chain { active, replicas }
    }

    /// The active and every slot, filled or not.
    pub fn len(&self) -> usize {
        1 + self.replicas.len()
    }

    /// How many copies, the active's included, a durable write needs.
    pub fn majority(&self) -> usize {
        self.len() / 2 + 1
    }

    /// Whether `node` fills a replica slot. The active is never its own replica, even when a
    /// (stale) map names it in a slot.
    pub fn is_replica(&self, node: N) -> bool {
        node != self.active && self.replicas.contains(&Some(node))
    }

    /// The distinct nodes placed in replica slots, the active left out, in slot order. A map
    /// naming a node twice must not let it count twice.
    pub fn placed_replicas(&self) -> impl Iterator<Item = N> + '_ {
        self.replicas
            .iter()
            .enumerate()
            .filter_map(|(i, slot)| slot.map(|n| (i, n)))
            .filter(move |&(i, n)| {
                // Chains are a handful of slots: a look back is cheaper than a set.
                n != self.active && !self.replicas.iter().take(i).any(|s| *s == Some(n))
            })
            .map(|(_, n)| n)
    }

    /// Distinct nodes placed in the chain: the active and its placed replicas.
    pub fn present(&self) -> usize {
        1 + self.placed_replicas().count()
    }

    /// `Ok` when the placed nodes can make a majority.
    pub fn check_possible(&self) -> Result<(), Impossible> {
        let (needed, present) = (self.majority(), self.present());
        if present < needed {
            return Err(Impossible {
                needed,
                chain_len: self.len(),
                present,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn majority_counts_empty_slots() {
        let cases: &[(&[Option<u8>], usize)] = &[
            (&[], 1),
            (&[Some(1)], 2),
            (&[Some(1), None], 2),
            (&[Some(1), Some(2), None], 3),
        ];
        for &(replicas, majority) in cases {
            let c = Chain::new(0u8, replicas.to_vec());
            assert_eq!(c.majority(), majority, "{replicas:?}");
            assert_eq!(c.len(), 1 + replicas.len());
        }
    }

    #[test]
    fn duplicates_and_the_active_in_a_slot_count_once() {
        let c = Chain::new(0u8, vec![Some(0), Some(1)]);
        assert_eq!(c.present(), 2);
        assert!(!c.is_replica(0) && c.is_replica(1) && !c.is_replica(2));
        let c = Chain::new(0u8, vec![Some(1), Some(1), None]);
        assert_eq!(c.placed_replicas().collect::<Vec<_>>(), vec![1]);
        assert_eq!(
            c.check_possible(),
            Err(Impossible {
                needed: 3,
                chain_len: 4,
                present: 2
            })
        );
        let c = Chain::new(0u8, vec![Some(0)]);
        assert_eq!(
            c.check_possible(),
            Err(Impossible {
                needed: 2,
                chain_len: 2,
                present: 1
            })
        );
    }
}
