//! A set of vbuckets as a bitmap: one bit per vbucket number.
//!
//! Checked once per vbucket on hot paths (a `request_plus` query asks, for each of a
//! bucket's vbuckets, whether its index feed is confirmed), where a hash set's hashing and
//! probing cost more than the check it guards. 1,024 vbuckets take 128 bytes.

use crate::VbId;

/// A set of [`VbId`]s. Grows to the highest vbucket inserted; never shrinks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VbSet {
    words: Vec<u64>,
}

impl VbSet {
    pub fn new() -> VbSet {
        VbSet::default()
    }

    /// Adds `vb`; whether it was absent.
    pub fn insert(&mut self, vb: VbId) -> bool {
        let (word, bit) = Self::place(vb);
        if self.words.len() <= word {
            self.words.resize(word + 1, 0);
        }
        let was = self.words[word] & bit != 0;
        self.words[word] |= bit;
        !was
    }

    /// Removes `vb`; whether it was present.
    pub fn remove(&mut self, vb: VbId) -> bool {
        let (word, bit) = Self::place(vb);
        match self.words.get_mut(word) {
            Some(w) => {
                let was = *w & bit != 0;
                *w &= !bit;
                was
            }
            None => false,
        }
    }

    pub fn contains(&self, vb: VbId) -> bool {
        let (word, bit) = Self::place(vb);
        self.words.get(word).is_some_and(|w| w & bit != 0)
    }

    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    /// The members, in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = VbId> + '_ {
        self.words.iter().enumerate().flat_map(|(i, w)| {
            let mut w = *w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let bit = w.trailing_zeros();
                w &= w - 1;
                let n = i * 64 + bit as usize;
                Some(VbId(
                    u16::try_from(n).expect("a bit stands for a u16 vbucket"),
                ))
            })
        })
    }

    fn place(vb: VbId) -> (usize, u64) {
        (usize::from(vb.0) / 64, 1u64 << (vb.0 % 64))
    }
}

impl FromIterator<VbId> for VbSet {
    fn from_iter<I: IntoIterator<Item = VbId>>(iter: I) -> VbSet {
        let mut set = VbSet::new();
        for vb in iter {
            set.insert(vb);
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn behaves_as_an_ordered_set() {
        // A fixed pseudo-random walk of inserts and removes, checked against BTreeSet.
        let mut set = VbSet::new();
        let mut model = BTreeSet::new();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let vb = VbId((x % 1500) as u16);
            if x & (1 << 40) == 0 {
                assert_eq!(set.insert(vb), model.insert(vb));
            } else {
                assert_eq!(set.remove(vb), model.remove(&vb));
            }
            assert!(set.contains(vb) == model.contains(&vb));
        }
        assert_eq!(set.len(), model.len());
        assert!(set.iter().eq(model.iter().copied()));
        assert_eq!(set.is_empty(), model.is_empty());
    }

    #[test]
    fn edges() {
        let mut set = VbSet::new();
        assert!(set.is_empty() && !set.contains(VbId(0)) && !set.remove(VbId(7)));
        for vb in [0, 63, 64, 1023, u16::MAX] {
            assert!(set.insert(VbId(vb)));
            assert!(!set.insert(VbId(vb)));
        }
        assert_eq!(
            set.iter().map(|v| v.0).collect::<Vec<_>>(),
            vec![0, 63, 64, 1023, u16::MAX]
        );
        assert!(!set.contains(VbId(1)) && !set.contains(VbId(65)));
        for vb in [0, 63, 64, 1023, u16::MAX] {
            assert!(set.remove(VbId(vb)));
        }
        assert!(set.is_empty());
        assert_eq!(set.len(), 0);
        let from: VbSet = [VbId(5), VbId(3), VbId(5)].into_iter().collect();
        assert_eq!(from.len(), 2);
    }
}
