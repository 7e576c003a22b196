//! A vbucket's recent changes as an ordered list of checkpoints, read through cursors.
//!
//! ```text
//!   oldest                                           open (newest)
//!   [ckpt 7: closed] -> [ckpt 8: closed] -> [ckpt 9: open, dedups by key]
//!        ^ cursor "dcp:a"      ^ flusher
//! ```
//! - Every mutation is appended to the open checkpoint. A second write of the same key in the
//!   open checkpoint blanks the earlier slot (dedup): a cursor that has not read it yet sees only
//!   the newest version; one that has already read it is unaffected. SyncWrite prepares,
//!   commits and aborts are exempt both ways ([`QueueOp::deduplicates`]).
//! - A cursor is a position (checkpoint id, slot). Reading moves it forward and across closed
//!   checkpoints; it never moves past the end of the open checkpoint.
//! - A closed checkpoint that no cursor still points into is freed. With no cursor at all,
//!   closed checkpoints are freed at once.
//!
//! Invariants ([`CheckpointManager::check_invariants`], run after every change in debug
//! builds): seqnos increase along the list; only the newest checkpoint is open, and ids are
//! consecutive; every cursor points into a checkpoint that exists; `mem_bytes` equals the sum
//! over the slots still present.

use bytes::Bytes;
use hashbrown::HashMap;
use sluice_types::{CheckpointId, DurabilityLevel, ItemMeta, Seqno};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Why an item was queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueOp {
    Mutation,
    Deletion,
    Expiration,
    /// A SyncWrite's prepare (`meta.deleted` for a durable delete): invisible until its
    /// commit. The item carries the version the commit would make.
    Prepare(DurabilityLevel),
    /// The commit of the prepare at `prepared`: the committed version (a tombstone when
    /// `meta.deleted`), with the prepare's CAS and rev seqno at a new seqno.
    Commit {
        prepared: Seqno,
    },
    /// The abort of the prepare at `prepared`: nothing becomes visible. Key only.
    Abort {
        prepared: Seqno,
    },
}

impl QueueOp {
    /// Prepares, commits and aborts are never deduplicated, nor do they deduplicate
    /// anything: a sync-write consumer must see every prepare and the completion of each
    /// (see `prepares.rs`), so they keep their slots.
    pub fn deduplicates(self) -> bool {
        matches!(
            self,
            QueueOp::Mutation | QueueOp::Deletion | QueueOp::Expiration
        )
    }

    /// Whether consumers that did not enable sync writes see it (a commit they see as the
    /// mutation or deletion it made).
    pub fn visible(self) -> bool {
        !matches!(self, QueueOp::Prepare(_) | QueueOp::Abort { .. })
    }
}

/// One change, shared between the checkpoint and whoever reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedItem {
    pub key: Bytes,
    pub meta: ItemMeta,
    /// Empty for deletions and expirations.
    pub value: Bytes,
    pub op: QueueOp,
    /// Nothing of this key was in memory or on disk when this version was written, so the
    /// flusher can tell storage there is no older version to replace without looking the key
    /// up again (`OnDisk::Absent`; see `VbInner::write` for why that stays true). False when
    /// not known.
    pub first_version: bool,
}

/// Bytes a queued item costs beyond its key and value.
pub const QUEUED_ITEM_OVERHEAD_BYTES: usize = std::mem::size_of::<QueuedItem>() + 48;

impl QueuedItem {
    pub fn mem_bytes(&self) -> usize {
        self.key.len() + self.value.len() + QUEUED_ITEM_OVERHEAD_BYTES
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CursorId(pub u64);

#[derive(Debug)]
struct Checkpoint {
    id: CheckpointId,
    /// First seqno this checkpoint may hold (the marker start for a memory snapshot).
    snap_start: Seqno,
    /// Highest seqno queued into it so far.
    high_seqno: Seqno,
    items: Vec<Option<Arc<QueuedItem>>>,
    /// key → slot, while open (dedup).
    index: HashMap<Bytes, usize>,
    open: bool,
}

#[derive(Debug, Clone)]
struct Cursor {
    checkpoint_id: CheckpointId,
    /// Next slot to read.
    slot: usize,
}

/// Items read by one cursor from one checkpoint: a snapshot range and its items.
#[derive(Debug, Clone)]
pub struct CursorChunk {
    pub checkpoint_id: CheckpointId,
    pub snap_start: Seqno,
    pub snap_end: Seqno,
    pub items: Vec<Arc<QueuedItem>>,
}

#[derive(Debug)]
pub struct CheckpointManager {
    checkpoints: VecDeque<Checkpoint>,
    cursors: BTreeMap<CursorId, Cursor>,
    next_checkpoint_id: CheckpointId,
    next_cursor_id: u64,
    items_max: usize,
    mem_bytes: usize,
}

impl CheckpointManager {
    /// A manager whose first open checkpoint starts after `high_seqno`.
    pub fn new(high_seqno: Seqno, items_max: usize) -> CheckpointManager {
        assert!(items_max > 0);
        let mut m = CheckpointManager {
            checkpoints: VecDeque::new(),
            cursors: BTreeMap::new(),
            next_checkpoint_id: CheckpointId(1),
            next_cursor_id: 1,
            items_max,
            mem_bytes: 0,
        };
        m.open_checkpoint(high_seqno.next());
        m
    }

    fn open_checkpoint(&mut self, snap_start: Seqno) {
        let id = self.next_checkpoint_id;
        self.next_checkpoint_id = id.next();
        self.checkpoints.push_back(Checkpoint {
            id,
            snap_start,
            high_seqno: Seqno(snap_start.0.saturating_sub(1)),
            items: Vec::new(),
            index: HashMap::new(),
            open: true,
        });
    }

    fn open_mut(&mut self) -> &mut Checkpoint {
        self.checkpoints
            .back_mut()
            .expect("there is always an open checkpoint")
    }

    /// Appends a change; returns the checkpoint memory delta in bytes (may be negative when a
    /// dedup frees more than the new item costs, or a closed checkpoint is freed).
    pub fn queue(&mut self, item: QueuedItem) -> isize {
        let before = self.mem_bytes as isize;
        let seqno = item.meta.seqno;
        let open = self.open_mut();
        assert!(
            seqno > open.high_seqno,
            "seqnos increase: {seqno} after {}",
            open.high_seqno
        );
        let mut freed = 0;
        let added = item.mem_bytes();
        let slot = open.items.len();
        if item.op.deduplicates() {
            // One lookup: the key's older change in this checkpoint, if any, is replaced.
            let older = open.index.insert(item.key.clone(), slot);
            if let Some(old) = older.and_then(|s| open.items[s].take()) {
                freed = old.mem_bytes();
            }
        }
        open.items.push(Some(Arc::new(item)));
        open.high_seqno = seqno;
        let full = open.items.len() >= self.items_max;
        self.mem_bytes = self.mem_bytes + added - freed;
        if full {
            self.close_open_checkpoint();
        }
        self.debug_check();
        self.mem_bytes as isize - before
    }

    /// Whether a queued item would be kept: some cursor may read it, or the open checkpoint
    /// already holds items. When not, [`Self::skip`] records the seqno without an item.
    pub fn has_readers(&self) -> bool {
        !self.cursors.is_empty() || !self.checkpoints.back().is_some_and(|c| c.items.is_empty())
    }

    /// Moves past a seqno nobody will read (see [`Self::has_readers`]).
    pub fn skip(&mut self, seqno: Seqno) {
        debug_assert!(!self.has_readers());
        let open = self.open_mut();
        assert!(seqno > open.high_seqno, "seqnos increase");
        open.snap_start = seqno.next();
        open.high_seqno = seqno;
        self.debug_check();
    }

    /// Closes the open checkpoint (if it holds anything) and opens a new one; frees what no
    /// cursor needs. Returns the memory delta.
    pub fn close_open_checkpoint(&mut self) -> isize {
        let before = self.mem_bytes as isize;
        let open = self.open_mut();
        if open.items.is_empty() {
            return 0;
        }
        open.open = false;
        open.index = HashMap::new();
        let (closed_id, closed_len) = (open.id, open.items.len());
        let next_start = open.high_seqno.next();
        self.open_checkpoint(next_start);
        // Cursors that had read all of it belong to the new checkpoint now, so the closed
        // one can be freed without waiting for their next read.
        let new_id = self.checkpoints.back().expect("just opened").id;
        for c in self.cursors.values_mut() {
            if c.checkpoint_id == closed_id && c.slot >= closed_len {
                *c = Cursor {
                    checkpoint_id: new_id,
                    slot: 0,
                };
            }
        }
        self.free_unreferenced();
        self.debug_check();
        self.mem_bytes as isize - before
    }

    /// Closes the open checkpoint if every cursor has read all of it (or there are no
    /// cursors), which frees it at once. The flusher calls this after each read so that
    /// persisted items do not wait for the checkpoint to fill up. Returns the memory delta.
    pub fn close_if_fully_read(&mut self) -> isize {
        let open = self.checkpoints.back().expect("non-empty");
        let (id, len) = (open.id, open.items.len());
        let all_read = self
            .cursors
            .values()
            .all(|c| c.checkpoint_id == id && c.slot >= len);
        if len > 0 && all_read {
            self.close_open_checkpoint()
        } else {
            0
        }
    }

    /// Registers a cursor at the oldest item still in memory.
    pub fn register_cursor_at_oldest(&mut self) -> CursorId {
        let id = CursorId(self.next_cursor_id);
        self.next_cursor_id += 1;
        let first = self.checkpoints.front().expect("non-empty").id;
        self.cursors.insert(
            id,
            Cursor {
                checkpoint_id: first,
                slot: 0,
            },
        );
        id
    }

    /// Registers a cursor that will next read the first item with seqno > `after`, if the
    /// checkpoints still hold everything after it. `None` means a backfill from disk is needed.
    pub fn register_cursor_after(&mut self, after: Seqno) -> Option<CursorId> {
        let oldest = self.checkpoints.front().expect("non-empty");
        if after.next() < oldest.snap_start {
            return None;
        }
        let (checkpoint_id, slot) = self
            .checkpoints
            .iter()
            .find_map(|c| {
                let slot = c
                    .items
                    .iter()
                    .position(|i| i.as_ref().is_some_and(|i| i.meta.seqno > after));
                slot.map(|s| (c.id, s))
            })
            .unwrap_or_else(|| {
                let open = self.checkpoints.back().expect("non-empty");
                (open.id, open.items.len())
            });
        let id = CursorId(self.next_cursor_id);
        self.next_cursor_id += 1;
        self.cursors.insert(
            id,
            Cursor {
                checkpoint_id,
                slot,
            },
        );
        Some(id)
    }

    /// Removes a cursor; returns the memory freed as a (non-positive) delta.
    pub fn remove_cursor(&mut self, id: CursorId) -> isize {
        let before = self.mem_bytes as isize;
        self.cursors.remove(&id);
        self.free_unreferenced();
        self.debug_check();
        self.mem_bytes as isize - before
    }

    /// Whether `cursor` is still registered (it may have been dropped under memory pressure).
    pub fn has_cursor(&self, cursor: CursorId) -> bool {
        self.cursors.contains_key(&cursor)
    }

    /// Like [`Self::read`], for a cursor that may have been dropped: `None` then.
    pub fn try_read(
        &mut self,
        cursor: CursorId,
        bytes_max: usize,
    ) -> Option<(Vec<CursorChunk>, isize)> {
        self.has_cursor(cursor)
            .then(|| self.read(cursor, bytes_max))
    }

    /// Frees the items every cursor has already read in the oldest checkpoint (their slots
    /// stay, empty, so positions do not move). Returns the memory delta (non-positive).
    pub fn expel_read_items(&mut self) -> isize {
        let Some(front) = self.checkpoints.front() else {
            return 0;
        };
        let front_id = front.id;
        let Some(min_slot) = self
            .cursors
            .values()
            .map(|c| {
                if c.checkpoint_id == front_id {
                    c.slot
                } else {
                    usize::MAX
                }
            })
            .min()
        else {
            return 0;
        };
        let front = self.checkpoints.front_mut().expect("checked");
        let upto = min_slot.min(front.items.len());
        let mut freed = 0;
        let mut highest = None;
        for slot in &mut front.items[..upto] {
            if let Some(item) = slot.take() {
                freed += item.mem_bytes();
                highest = Some(item.meta.seqno);
            }
        }
        // What was expelled is no longer in memory: a cursor registered later must not start
        // in front of it (it would skip those changes), so the checkpoint now starts after.
        if let Some(h) = highest {
            front.snap_start = front.snap_start.max(h.next());
        }
        self.mem_bytes -= freed;
        self.debug_check();
        -(freed as isize)
    }

    /// The cursor furthest behind, other than `keep` (the flusher), if it points into the
    /// oldest checkpoint (dropping anyone else frees nothing).
    pub fn slowest_cursor(&self, keep: Option<CursorId>) -> Option<CursorId> {
        let front_id = self.checkpoints.front()?.id;
        self.cursors
            .iter()
            .filter(|(id, c)| Some(**id) != keep && c.checkpoint_id == front_id)
            .min_by_key(|(_, c)| c.slot)
            .map(|(id, _)| *id)
    }

    /// First seqno the checkpoints can still deliver: a stream that needs anything older must
    /// backfill it from disk.
    pub fn oldest_snap_start(&self) -> Seqno {
        self.checkpoints.front().expect("non-empty").snap_start
    }

    /// Reads up to `bytes_max` (at least one item if any) for `cursor`, grouped per checkpoint,
    /// and moves the cursor past them. Returns the chunks and the memory delta from freeing.
    pub fn read(&mut self, cursor: CursorId, bytes_max: usize) -> (Vec<CursorChunk>, isize) {
        let before = self.mem_bytes as isize;
        let mut pos = self
            .cursors
            .get(&cursor)
            .expect("registered cursor")
            .clone();
        let mut chunks = Vec::new();
        let mut bytes = 0usize;
        let front_id = self.checkpoints.front().expect("non-empty").id;
        loop {
            let idx = (pos.checkpoint_id.0 - front_id.0) as usize;
            let ckpt = &self.checkpoints[idx];
            let mut chunk = CursorChunk {
                checkpoint_id: ckpt.id,
                snap_start: ckpt.snap_start,
                snap_end: ckpt.high_seqno,
                items: Vec::new(),
            };
            // The open checkpoint is read to its end whatever the budget: dedup may have
            // moved a key's version past any point where the read could stop, and a snapshot
            // ending there would lack that key (closed checkpoints end at their own end).
            while pos.slot < ckpt.items.len() && (bytes < bytes_max || bytes == 0 || ckpt.open) {
                if let Some(item) = &ckpt.items[pos.slot] {
                    bytes += item.mem_bytes();
                    chunk.items.push(item.clone());
                }
                pos.slot += 1;
            }
            if let Some(last) = chunk.items.last() {
                if ckpt.open {
                    // The open checkpoint may still grow: the snapshot ends at what was read.
                    chunk.snap_end = last.meta.seqno;
                }
                chunks.push(chunk);
            }
            let at_end = pos.slot >= ckpt.items.len();
            if at_end && !ckpt.open {
                pos = Cursor {
                    checkpoint_id: ckpt.id.next(),
                    slot: 0,
                };
                continue;
            }
            break;
        }
        self.cursors.insert(cursor, pos);
        self.free_unreferenced();
        self.debug_check();
        (chunks, self.mem_bytes as isize - before)
    }

    /// Items this cursor has not read yet (approximate: blanked slots count).
    pub fn items_remaining(&self, cursor: CursorId) -> usize {
        let Some(pos) = self.cursors.get(&cursor) else {
            return 0;
        };
        self.checkpoints
            .iter()
            .filter(|c| c.id >= pos.checkpoint_id)
            .map(|c| {
                if c.id == pos.checkpoint_id {
                    c.items.len().saturating_sub(pos.slot)
                } else {
                    c.items.len()
                }
            })
            .sum()
    }

    /// Frees closed checkpoints at the front that no cursor points into.
    fn free_unreferenced(&mut self) {
        let min_cursor = self.cursors.values().map(|c| c.checkpoint_id).min();
        while self.checkpoints.len() > 1 {
            let front = self.checkpoints.front().expect("len > 1");
            if front.open || min_cursor.is_some_and(|m| m <= front.id) {
                break;
            }
            let freed: usize = front.items.iter().flatten().map(|i| i.mem_bytes()).sum();
            self.mem_bytes -= freed;
            self.checkpoints.pop_front();
        }
    }

    pub fn mem_bytes(&self) -> usize {
        self.mem_bytes
    }

    /// Panics unless the invariants of the module comment hold. O(items held).
    pub fn check_invariants(&self) {
        let front_id = self.checkpoints.front().expect("never empty").id;
        let newest = self.checkpoints.len() - 1;
        let mut last_seqno = None;
        let mut mem = 0;
        for (i, c) in self.checkpoints.iter().enumerate() {
            assert_eq!(c.open, i == newest, "only the newest checkpoint is open");
            assert_eq!(
                c.id,
                CheckpointId(front_id.0 + i as u64),
                "checkpoint ids are consecutive"
            );
            assert!(c.open || c.index.is_empty(), "only the open one dedups");
            for item in c.items.iter().flatten() {
                let seqno = item.meta.seqno;
                assert!(last_seqno < Some(seqno), "seqnos increase along the list");
                assert!(seqno <= c.high_seqno, "an item is within its checkpoint");
                last_seqno = Some(seqno);
                mem += item.mem_bytes();
            }
        }
        assert_eq!(
            mem, self.mem_bytes,
            "mem_bytes is the sum of the slots present"
        );
        for c in self.cursors.values() {
            let ckpt = c
                .checkpoint_id
                .0
                .checked_sub(front_id.0)
                .and_then(|i| self.checkpoints.get(i as usize))
                .expect("every cursor points into a checkpoint that exists");
            assert!(
                c.slot <= ckpt.items.len(),
                "a cursor is within its checkpoint"
            );
        }
    }

    /// [`Self::check_invariants`] after a change, in debug builds, while the manager holds
    /// few enough items that a full walk per change stays cheap.
    fn debug_check(&self) {
        const FULL_CHECK_ITEMS_MAX: usize = 4096;
        if cfg!(debug_assertions) {
            let items: usize = self.checkpoints.iter().map(|c| c.items.len()).sum();
            if items <= FULL_CHECK_ITEMS_MAX {
                self.check_invariants();
            }
        }
    }

    pub fn num_checkpoints(&self) -> usize {
        self.checkpoints.len()
    }

    /// Drops everything and starts over after `high_seqno` (bucket flush, rollback).
    /// Cursors move to the new open checkpoint. Returns the memory delta.
    pub fn reset(&mut self, high_seqno: Seqno) -> isize {
        let before = self.mem_bytes as isize;
        self.checkpoints.clear();
        self.mem_bytes = 0;
        self.open_checkpoint(high_seqno.next());
        let id = self.checkpoints.back().expect("just opened").id;
        for c in self.cursors.values_mut() {
            *c = Cursor {
                checkpoint_id: id,
                slot: 0,
            };
        }
        self.debug_check();
        -before
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(key: &str, seqno: u64) -> QueuedItem {
        QueuedItem {
            key: Bytes::copy_from_slice(key.as_bytes()),
            meta: ItemMeta {
                seqno: Seqno(seqno),
                ..Default::default()
            },
            value: Bytes::from_static(b"v"),
            op: QueueOp::Mutation,
            first_version: false,
        }
    }

    fn seqnos(chunks: &[CursorChunk]) -> Vec<u64> {
        chunks
            .iter()
            .flat_map(|c| c.items.iter().map(|i| i.meta.seqno.0))
            .collect()
    }

    #[test]
    #[should_panic(expected = "mem_bytes is the sum")]
    fn the_invariant_check_catches_a_miscount() {
        let mut m = CheckpointManager::new(Seqno(0), 10);
        m.queue(item("a", 1));
        m.mem_bytes += 1;
        m.check_invariants();
    }

    #[test]
    #[should_panic(expected = "every cursor points into a checkpoint that exists")]
    fn the_invariant_check_catches_a_dangling_cursor() {
        let mut m = CheckpointManager::new(Seqno(0), 10);
        let c = m.register_cursor_at_oldest();
        m.cursors.get_mut(&c).unwrap().checkpoint_id = CheckpointId(99);
        m.check_invariants();
    }

    #[test]
    fn dedup_hides_older_versions_from_unread_cursors_only() {
        let mut m = CheckpointManager::new(Seqno(0), 100);
        let early = m.register_cursor_at_oldest();
        m.queue(item("a", 1));
        m.queue(item("b", 2));
        let (chunks, _) = m.read(early, usize::MAX);
        assert_eq!(seqnos(&chunks), vec![1, 2]);
        let late = m.register_cursor_at_oldest();
        m.queue(item("a", 3));
        assert_eq!(seqnos(&m.read(early, usize::MAX).0), vec![3]);
        assert_eq!(seqnos(&m.read(late, usize::MAX).0), vec![2, 3]);
    }

    #[test]
    fn closed_checkpoints_are_freed_once_every_cursor_passed() {
        let mut m = CheckpointManager::new(Seqno(0), 2);
        let c = m.register_cursor_at_oldest();
        for s in 1..=5 {
            m.queue(item(&format!("k{s}"), s));
        }
        assert_eq!(m.num_checkpoints(), 3);
        let before = m.mem_bytes();
        let (chunks, delta) = m.read(c, usize::MAX);
        assert_eq!(seqnos(&chunks), vec![1, 2, 3, 4, 5]);
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks[0].snap_start, Seqno(1));
        assert_eq!(chunks[1].snap_start, Seqno(3));
        assert!(delta < 0);
        assert_eq!(
            m.num_checkpoints(),
            1,
            "the cursor moved into the open checkpoint"
        );
        assert!(m.mem_bytes() < before);
    }

    #[test]
    fn a_fully_read_open_checkpoint_is_closed_and_freed() {
        let mut m = CheckpointManager::new(Seqno(0), 1000);
        let c = m.register_cursor_at_oldest();
        m.queue(item("a", 1));
        m.queue(item("b", 2));
        assert_eq!(m.close_if_fully_read(), 0, "unread items keep it open");
        m.read(c, usize::MAX);
        assert!(m.close_if_fully_read() < 0);
        assert_eq!(m.mem_bytes(), 0);
        assert_eq!(m.num_checkpoints(), 1);
        m.queue(item("a", 3));
        assert_eq!(seqnos(&m.read(c, usize::MAX).0), vec![3]);
    }

    #[test]
    fn without_cursors_nothing_is_kept() {
        let mut m = CheckpointManager::new(Seqno(0), 2);
        for s in 1..=6 {
            m.queue(item(&format!("k{s}"), s));
        }
        assert_eq!(m.num_checkpoints(), 1);
        assert_eq!(m.mem_bytes(), 0);
        assert!(
            m.register_cursor_after(Seqno(5)).is_none(),
            "seqno 6 is not in memory"
        );
        let c = m.register_cursor_after(Seqno(6)).unwrap();
        m.queue(item("k7", 7));
        assert_eq!(seqnos(&m.read(c, usize::MAX).0), vec![7]);
    }

    #[test]
    fn register_after_a_seqno_or_ask_for_backfill() {
        let mut m = CheckpointManager::new(Seqno(0), 3);
        let keep = m.register_cursor_at_oldest();
        for s in 1..=7 {
            m.queue(item(&format!("k{s}"), s));
        }
        let c = m.register_cursor_after(Seqno(4)).unwrap();
        assert_eq!(seqnos(&m.read(c, usize::MAX).0), vec![5, 6, 7]);
        m.read(keep, usize::MAX);
        // Checkpoints 1..=3 and 4..=6 were freed; memory starts at 7.
        assert!(m.register_cursor_after(Seqno(2)).is_none());
        let c2 = m.register_cursor_after(Seqno(7)).unwrap();
        assert!(m.read(c2, usize::MAX).0.is_empty());
        m.queue(item("x", 8));
        assert_eq!(seqnos(&m.read(c2, usize::MAX).0), vec![8]);
    }

    #[test]
    fn read_respects_the_byte_budget_but_always_makes_progress() {
        let mut m = CheckpointManager::new(Seqno(0), 5);
        let c = m.register_cursor_at_oldest();
        for s in 1..=10 {
            m.queue(item(&format!("k{s}"), s));
        }
        // Closed checkpoints (1..=5, 6..=10) are read one budget at a time.
        let (chunks, _) = m.read(c, 1);
        assert_eq!(seqnos(&chunks), vec![1]);
        assert_eq!(
            chunks[0].snap_end,
            Seqno(5),
            "the snapshot is the whole checkpoint"
        );
        assert_eq!(m.items_remaining(c), 9);
    }

    #[test]
    fn the_open_checkpoint_is_read_to_its_end_so_no_snapshot_misses_a_moved_key() {
        let mut m = CheckpointManager::new(Seqno(0), 100);
        let c = m.register_cursor_at_oldest();
        m.queue(item("a", 1));
        m.queue(item("b", 2));
        m.queue(item("a", 3)); // blanks a@1
        let (chunks, _) = m.read(c, 1);
        // Stopping after b@2 would announce a snapshot ending at 2 without "a".
        assert_eq!(seqnos(&chunks), vec![2, 3]);
        assert_eq!(chunks[0].snap_end, Seqno(3));
    }

    #[test]
    fn expel_frees_what_every_cursor_read_and_slowest_is_the_one_behind() {
        let mut m = CheckpointManager::new(Seqno(0), 100);
        let flusher = m.register_cursor_at_oldest();
        let slow = m.register_cursor_at_oldest();
        for s in 1..=6 {
            m.queue(item(&format!("k{s}"), s));
        }
        m.close_open_checkpoint();
        m.read(flusher, usize::MAX);
        m.read(slow, 1); // slow has read seqno 1 only
        let before = m.mem_bytes();
        assert!(m.expel_read_items() < 0);
        assert_eq!(m.mem_bytes(), before - item("k1", 1).mem_bytes());
        assert_eq!(m.slowest_cursor(Some(flusher)), Some(slow));
        // Seqno 1 was expelled: a stream that still needs it must backfill it from disk.
        assert!(m.register_cursor_after(Seqno(0)).is_none());
        let late = m
            .register_cursor_after(Seqno(1))
            .expect("2.. are in memory");
        assert_eq!(seqnos(&m.read(late, usize::MAX).0), vec![2, 3, 4, 5, 6]);
        m.remove_cursor(late);
        assert_eq!(seqnos(&m.read(slow, usize::MAX).0), vec![2, 3, 4, 5, 6]);
        m.remove_cursor(slow);
        assert!(
            m.try_read(slow, 1).is_none(),
            "a dropped cursor reads nothing"
        );
        assert_eq!(m.mem_bytes(), 0);
    }
}
