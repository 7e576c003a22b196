//! Which vbuckets have something for the flusher: a bitmap that writers mark and the flusher
//! takes whole. Before it, every flusher round locked and read all of the bucket's vbuckets
//! (1,024 by default) to find the few with new items: about 85 µs a round, paid thousands of
//! times a second at low write rates, where each round carries a handful of items.
//!
//! The protocol, so that no change is ever left unflushed: a writer marks its vbucket after
//! queueing under the vbucket's lock; the flusher clears the marks *before* it locks and
//! reads a vbucket. A write that lands after the clear sets the mark again, so at worst the
//! next round visits a vbucket with nothing new.

use sluice_types::VbId;
use std::sync::atomic::{AtomicU64, Ordering};

const WORD_BITS: usize = 64;

#[derive(Debug)]
pub struct DirtyVbuckets {
    words: Box<[AtomicU64]>,
    len: usize,
}

impl DirtyVbuckets {
    /// `len` vbuckets, every one marked: the first round visits them all (warmup may have
    /// left metadata to persist anywhere).
    pub fn all_marked(len: usize) -> DirtyVbuckets {
        let words = (0..len.div_ceil(WORD_BITS))
            .map(|w| {
                let bits_here = (len - w * WORD_BITS).min(WORD_BITS);
                AtomicU64::new(if bits_here == WORD_BITS {
                    u64::MAX
                } else {
                    (1u64 << bits_here) - 1
                })
            })
            .collect();
        DirtyVbuckets { words, len }
    }

    pub fn mark(&self, vb: VbId) {
        let i = usize::from(vb.0);
        debug_assert!(i < self.len, "vbucket {i} out of range {}", self.len);
        let bit = 1u64 << (i % WORD_BITS);
        let word = &self.words[i / WORD_BITS];
        // Most writes find the mark already set (the flusher has not come by yet): a load
        // keeps the cache line shared instead of taking it for a read-modify-write.
        if word.load(Ordering::Relaxed) & bit == 0 {
            word.fetch_or(bit, Ordering::Release);
        }
    }

    /// Clears every mark and returns the marked vbuckets in ascending order, rotated to start
    /// at `from` (so a round cut short by its byte budget does not favour the low vbuckets).
    pub fn take(&self, from: usize) -> Vec<VbId> {
        let mut out = Vec::new();
        for (w, word) in self.words.iter().enumerate() {
            let mut bits = word.swap(0, Ordering::Acquire);
            while bits != 0 {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                out.push(VbId((w * WORD_BITS + b) as u16));
            }
        }
        let split = out.partition_point(|vb| usize::from(vb.0) < from);
        out.rotate_left(split);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taken(d: &DirtyVbuckets, from: usize) -> Vec<u16> {
        d.take(from).into_iter().map(|v| v.0).collect()
    }

    #[test]
    fn starts_with_every_vbucket_marked_and_nothing_past_the_end() {
        let d = DirtyVbuckets::all_marked(70);
        assert_eq!(taken(&d, 0), (0..70).collect::<Vec<_>>());
        assert!(taken(&d, 0).is_empty());
    }

    #[test]
    fn take_clears_the_marks_and_rotates_to_the_start() {
        let d = DirtyVbuckets::all_marked(1024);
        taken(&d, 0);
        for vb in [3, 700, 64, 63, 1023, 3] {
            d.mark(VbId(vb));
        }
        assert_eq!(taken(&d, 64), vec![64, 700, 1023, 3, 63]);
        assert!(taken(&d, 0).is_empty());
        d.mark(VbId(5));
        assert_eq!(taken(&d, 1000), vec![5]);
    }

    #[test]
    fn a_mark_after_a_take_waits_for_the_next_one() {
        let d = DirtyVbuckets::all_marked(128);
        taken(&d, 0);
        d.mark(VbId(100));
        let first = d.take(0);
        d.mark(VbId(100));
        assert_eq!(first, vec![VbId(100)]);
        assert_eq!(taken(&d, 0), vec![100]);
    }
}
