//! What a producer connection holds for each vbucket it has streamed, beside the
//! [`ActiveStream`](crate::stream::ActiveStream) itself: which stream is the current one, the
//! engine cursor it reads memory through, and whether it hands the vbucket over (takeover).
//!
//! One slot per vbucket, generic over the engine's cursor handle `C`, in place of parallel maps
//! that had to be kept in step by hand. Slots outlive their streams: a finished stream's id
//! stays until the next request, so a late backfill result is still recognised as stale.
//!
//! Invariant: a vbucket has at most one cursor, and only the current stream's.

use crate::backfill::StreamId;
use sluice_types::VbId;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug)]
struct StreamSlot<C> {
    id: StreamId,
    cursor: Option<C>,
}

#[derive(Debug)]
pub struct StreamSlots<C> {
    slots: BTreeMap<VbId, StreamSlot<C>>,
    /// The vbuckets whose current stream is a takeover: few, and looked at on every pass of
    /// the connection, so kept apart instead of found by a walk over every slot.
    takeovers: BTreeSet<VbId>,
    next_id: u64,
}

impl<C> Default for StreamSlots<C> {
    fn default() -> Self {
        StreamSlots {
            slots: BTreeMap::new(),
            takeovers: BTreeSet::new(),
            next_id: 1,
        }
    }
}

impl<C> StreamSlots<C> {
    /// A new stream of `vb` becomes current. Returns its id and the previous stream's cursor,
    /// which the caller releases before the new stream registers its own.
    pub fn open(&mut self, vb: VbId, takeover: bool) -> (StreamId, Option<C>) {
        let id = StreamId(self.next_id);
        self.next_id += 1;
        let old = self.slots.insert(vb, StreamSlot { id, cursor: None });
        if takeover {
            self.takeovers.insert(vb);
        } else {
            self.takeovers.remove(&vb);
        }
        (id, old.and_then(|s| s.cursor))
    }

    /// The current stream of `vb`, if it ever had one.
    pub fn id(&self, vb: VbId) -> Option<StreamId> {
        self.slots.get(&vb).map(|s| s.id)
    }

    pub fn has_cursor(&self, vb: VbId) -> bool {
        self.slots.get(&vb).is_some_and(|s| s.cursor.is_some())
    }

    pub fn cursor(&self, vb: VbId) -> Option<&C> {
        self.slots.get(&vb).and_then(|s| s.cursor.as_ref())
    }

    /// The current stream of `vb` registered `cursor`.
    pub fn set_cursor(&mut self, vb: VbId, cursor: C) {
        let slot = self
            .slots
            .get_mut(&vb)
            .expect("a cursor is registered for an opened stream");
        assert!(slot.cursor.is_none(), "one cursor per vbucket");
        slot.cursor = Some(cursor);
    }

    /// Takes `vb`'s cursor out (to release it, or because the engine dropped it).
    pub fn take_cursor(&mut self, vb: VbId) -> Option<C> {
        self.slots.get_mut(&vb).and_then(|s| s.cursor.take())
    }

    /// Every cursor, taken out (the connection is closing).
    pub fn drain_cursors(&mut self) -> Vec<(VbId, C)> {
        self.slots
            .iter_mut()
            .filter_map(|(vb, s)| s.cursor.take().map(|c| (*vb, c)))
            .collect()
    }

    /// Vbuckets whose current stream is a takeover (few: the rest need no look per pass;
    /// with none, nothing is allocated).
    pub fn takeovers(&self) -> Vec<VbId> {
        self.takeovers.iter().copied().collect()
    }

    /// `vb`'s takeover is over (its stream ended).
    pub fn end_takeover(&mut self, vb: VbId) {
        self.takeovers.remove(&vb);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_stream_gets_a_new_id_and_hands_back_the_old_cursor() {
        let mut s: StreamSlots<u32> = StreamSlots::default();
        let (a, old) = s.open(VbId(1), false);
        assert_eq!(old, None);
        s.set_cursor(VbId(1), 7);
        assert_eq!(s.cursor(VbId(1)), Some(&7));
        let (b, old) = s.open(VbId(1), true);
        assert_ne!(a, b);
        assert_eq!(old, Some(7), "the caller releases it");
        assert!(!s.has_cursor(VbId(1)));
        assert_eq!(s.id(VbId(1)), Some(b));
        assert_eq!(s.takeovers(), vec![VbId(1)]);
        s.end_takeover(VbId(1));
        assert!(s.takeovers().is_empty());
    }

    #[test]
    fn drained_cursors_are_gone() {
        let mut s: StreamSlots<u32> = StreamSlots::default();
        s.open(VbId(1), false);
        s.open(VbId(2), false);
        s.set_cursor(VbId(2), 5);
        assert_eq!(s.drain_cursors(), vec![(VbId(2), 5)]);
        assert_eq!(s.take_cursor(VbId(2)), None);
    }

    #[test]
    #[should_panic(expected = "one cursor per vbucket")]
    fn a_second_cursor_is_a_bug() {
        let mut s: StreamSlots<u32> = StreamSlots::default();
        s.open(VbId(1), false);
        s.set_cursor(VbId(1), 1);
        s.set_cursor(VbId(1), 2);
    }
}
