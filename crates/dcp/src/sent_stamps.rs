//! Which encoded documents a socket write has taken: the producer's half of a replicated
//! write's stage timing ("sent": its bytes handed to the socket).
//!
//! The producer encodes messages into one output buffer and writes it out in as many
//! writes as the socket takes. Each document encoded is noted with the offset its bytes end
//! at and its CAS (the write's time on the active); once a write reaches that offset the
//! document is sent, and its CAS is handed back for the caller to time against its clock.
//!
//! ```text
//!   encoded ── note(end, cas) ──► pending (ordered by end) ── written(upto) ──► CAS out
//!                                   │
//!                                   └─ full: later documents are not noted (a sample)
//! ```
//!
//! Bounded: at most [`SentStamps::new`]'s `capacity` documents wait; under a backlog the
//! rest of a buffer goes untimed, so the timings are a sample, weighted to the front of each
//! buffer. Offsets are the buffer's: when the caller empties the buffer (everything
//! written), it calls [`SentStamps::rebase`], and nothing may still be pending then.

use std::collections::VecDeque;

#[derive(Debug)]
pub struct SentStamps {
    pending: VecDeque<(usize, u64)>,
    capacity: usize,
}

impl SentStamps {
    pub fn new(capacity: usize) -> SentStamps {
        assert!(capacity > 0, "a stamp queue holds something");
        SentStamps {
            pending: VecDeque::with_capacity(capacity.min(1024)),
            capacity,
        }
    }

    /// A document whose bytes end at `end` in the buffer, written on the active at `cas_ns`.
    /// Ends only grow while the buffer fills.
    pub fn note(&mut self, end: usize, cas_ns: u64) {
        if let Some(&(last, _)) = self.pending.back() {
            assert!(end > last, "documents are noted in buffer order");
        }
        if self.pending.len() < self.capacity {
            self.pending.push_back((end, cas_ns));
        }
    }

    /// The buffer's first `upto` bytes are written: the CAS of every document they complete,
    /// oldest first.
    pub fn written(&mut self, upto: usize) -> impl Iterator<Item = u64> + '_ {
        let done = self.pending.partition_point(|&(end, _)| end <= upto);
        self.pending.drain(..done).map(|(_, cas)| cas)
    }

    /// The buffer was emptied after everything in it was written: offsets start again at 0.
    pub fn rebase(&mut self) {
        assert!(
            self.pending.is_empty(),
            "a buffer is emptied only once all of it was written"
        );
    }

    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_is_sent_once_the_write_reaches_its_end() {
        let mut s = SentStamps::new(8);
        s.note(100, 1);
        s.note(250, 2);
        s.note(300, 3);
        assert_eq!(s.written(99).collect::<Vec<_>>(), Vec::<u64>::new());
        assert_eq!(s.written(250).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(s.pending(), 1);
        assert_eq!(s.written(300).collect::<Vec<_>>(), [3]);
        s.rebase();
        s.note(40, 4);
        assert_eq!(s.written(40).collect::<Vec<_>>(), [4]);
    }

    #[test]
    fn beyond_its_capacity_documents_go_untimed() {
        let mut s = SentStamps::new(2);
        s.note(10, 1);
        s.note(20, 2);
        s.note(30, 3);
        assert_eq!(s.written(30).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(s.pending(), 0);
    }

    #[test]
    #[should_panic(expected = "all of it was written")]
    fn emptying_a_buffer_with_unwritten_documents_is_a_bug() {
        let mut s = SentStamps::new(2);
        s.note(10, 1);
        s.rebase();
    }
}
