//! What a producer connection holds for each stream key it has streamed (a vbucket, or a
//! vbucket and stream id: [`StreamKey`]), beside the
//! [`ActiveStream`](crate::stream::ActiveStream) itself: which stream is the current one, the
//! engine cursor it reads memory through, and whether it hands the vbucket over (takeover).
//!
//! One slot per key, generic over the engine's cursor handle `C`, in place of parallel maps
//! that had to be kept in step by hand. Slots outlive their streams: a finished stream's id
//! stays until the next request, so a late backfill result is still recognised as stale.
//!
//! Invariant: a key has at most one cursor, and only its current stream's. Several keys of
//! one vbucket (stream ids) have a cursor each.

use crate::backfill::StreamId;
use crate::stream_key::StreamKey;
use sluice_types::VbId;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug)]
struct StreamSlot<C> {
    id: StreamId,
    cursor: Option<C>,
}

#[derive(Debug)]
pub struct StreamSlots<C> {
    slots: BTreeMap<StreamKey, StreamSlot<C>>,
    /// The vbuckets whose current stream is a takeover: few, and looked at on every pass of
    /// the connection, so kept apart instead of found by a walk over every slot.
    takeovers: BTreeSet<StreamKey>,
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
    /// A new stream of `key` becomes current. Returns its id and the previous stream's
    /// cursor, which the caller releases before the new stream registers its own.
    pub fn open(&mut self, key: StreamKey, takeover: bool) -> (StreamId, Option<C>) {
        let id = StreamId(self.next_id);
        self.next_id += 1;
        let old = self.slots.insert(key, StreamSlot { id, cursor: None });
        if takeover {
            self.takeovers.insert(key);
        } else {
            self.takeovers.remove(&key);
        }
        (id, old.and_then(|s| s.cursor))
    }

    /// The current stream of `key`, if it ever had one.
    pub fn id(&self, key: StreamKey) -> Option<StreamId> {
        self.slots.get(&key).map(|s| s.id)
    }

    pub fn has_cursor(&self, key: StreamKey) -> bool {
        self.slots.get(&key).is_some_and(|s| s.cursor.is_some())
    }

    /// Whether any stream of `vb` holds a cursor (its changes must still wake the connection).
    pub fn any_cursor(&self, vb: VbId) -> bool {
        self.slots
            .range(StreamKey::all_of(vb))
            .any(|(_, s)| s.cursor.is_some())
    }

    pub fn cursor(&self, key: StreamKey) -> Option<&C> {
        self.slots.get(&key).and_then(|s| s.cursor.as_ref())
    }

    /// The current stream of `key` registered `cursor`.
    pub fn set_cursor(&mut self, key: StreamKey, cursor: C) {
        let slot = self
            .slots
            .get_mut(&key)
            .expect("a cursor is registered for an opened stream");
        assert!(slot.cursor.is_none(), "one cursor per stream");
        slot.cursor = Some(cursor);
    }

    /// Takes `key`'s cursor out (to release it, or because the engine dropped it).
    pub fn take_cursor(&mut self, key: StreamKey) -> Option<C> {
        self.slots.get_mut(&key).and_then(|s| s.cursor.take())
    }

    /// Every cursor, taken out (the connection is closing).
    pub fn drain_cursors(&mut self) -> Vec<(StreamKey, C)> {
        self.slots
            .iter_mut()
            .filter_map(|(key, s)| s.cursor.take().map(|c| (*key, c)))
            .collect()
    }

    /// Keys whose current stream is a takeover (few: the rest need no look per pass; with
    /// none, nothing is allocated).
    pub fn takeovers(&self) -> Vec<StreamKey> {
        self.takeovers.iter().copied().collect()
    }

    /// `key`'s takeover is over (its stream ended).
    pub fn end_takeover(&mut self, key: StreamKey) {
        self.takeovers.remove(&key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(vb: u16) -> StreamKey {
        StreamKey::vb(VbId(vb))
    }

    #[test]
    fn a_new_stream_gets_a_new_id_and_hands_back_the_old_cursor() {
        let mut s: StreamSlots<u32> = StreamSlots::default();
        let (a, old) = s.open(k(1), false);
        assert_eq!(old, None);
        s.set_cursor(k(1), 7);
        assert_eq!(s.cursor(k(1)), Some(&7));
        let (b, old) = s.open(k(1), true);
        assert_ne!(a, b);
        assert_eq!(old, Some(7), "the caller releases it");
        assert!(!s.has_cursor(k(1)));
        assert_eq!(s.id(k(1)), Some(b));
        assert_eq!(s.takeovers(), vec![k(1)]);
        s.end_takeover(k(1));
        assert!(s.takeovers().is_empty());
    }

    #[test]
    fn drained_cursors_are_gone() {
        let mut s: StreamSlots<u32> = StreamSlots::default();
        s.open(k(1), false);
        s.open(k(2), false);
        s.set_cursor(k(2), 5);
        assert_eq!(s.drain_cursors(), vec![(k(2), 5)]);
        assert_eq!(s.take_cursor(k(2)), None);
    }

    #[test]
    fn streams_of_one_vbucket_hold_a_cursor_each() {
        let mut s: StreamSlots<u32> = StreamSlots::default();
        let (one, two) = (StreamKey::new(VbId(4), 1), StreamKey::new(VbId(4), 2));
        let (a, _) = s.open(one, false);
        let (b, _) = s.open(two, false);
        assert_ne!(a, b);
        s.set_cursor(one, 1);
        s.set_cursor(two, 2);
        assert_eq!(s.take_cursor(one), Some(1));
        assert!(s.any_cursor(VbId(4)), "stream 2 still reads");
        assert_eq!(s.take_cursor(two), Some(2));
        assert!(!s.any_cursor(VbId(4)));
    }

    #[test]
    #[should_panic(expected = "one cursor per stream")]
    fn a_second_cursor_is_a_bug() {
        let mut s: StreamSlots<u32> = StreamSlots::default();
        s.open(k(1), false);
        s.set_cursor(k(1), 1);
        s.set_cursor(k(1), 2);
    }
}
