//! Which of the loaded documents a consumer has received: one bit per key of the key space.
//! Without deletions every document must reach every consumer at least once before it is
//! caught up; a key received only after that (or never) is a gap in a snapshot.

use crate::load::workload::key_index;

#[derive(Debug, Clone)]
pub struct KeySet {
    bits: Vec<u64>,
    keys: u64,
    distinct: u64,
}

impl KeySet {
    /// For the keys `0..keys`.
    pub fn new(keys: u64) -> KeySet {
        KeySet {
            bits: vec![0; keys.div_ceil(64) as usize],
            keys,
            distinct: 0,
        }
    }

    /// Records `key`; keys outside the key space are ignored.
    pub fn insert(&mut self, key: &[u8]) {
        let Some(i) = key_index(key).filter(|i| *i < self.keys) else {
            return;
        };
        let (word, bit) = ((i / 64) as usize, 1u64 << (i % 64));
        if self.bits[word] & bit == 0 {
            self.bits[word] |= bit;
            self.distinct += 1;
        }
    }

    /// Keys of the key space not received.
    pub fn missing(&self) -> u64 {
        self.keys - self.distinct
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::workload::key;

    #[test]
    fn counts_distinct_keys_of_the_space() {
        let mut s = KeySet::new(130);
        assert_eq!(s.missing(), 130);
        for i in [0, 1, 1, 64, 129, 129, 500] {
            s.insert(&key(i));
        }
        s.insert(b"not a bench key");
        assert_eq!(s.missing(), 130 - 4);
        assert_eq!(KeySet::new(0).missing(), 0);
    }
}
