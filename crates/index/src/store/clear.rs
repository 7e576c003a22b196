//! Clearing one vbucket of an index: what the feeder does when the producer rolls the
//! vbucket back. The index keeps no history, so it cannot take back just the changes above
//! the rollback point; it drops the vbucket's entries and streams that vbucket again from
//! zero, leaving every other vbucket (and so most of the index) as it is.

use fjall::PersistMode;
use sluice_types::VbId;

use super::{keys, lock, IndexId, IndexStore, OpenIndex};
use crate::error::Result;

/// Entries removed per batch: a vbucket can hold millions, and one batch holds them all in
/// memory until it commits.
const CLEAR_BATCH: usize = 4096;

impl IndexStore {
    /// Removes every entry of `vb` from index `id` and forgets its position, so the next
    /// stream of `vb` starts from zero. Returns how many documents it removed.
    ///
    /// The position is dropped first, with a mark that a clear is under way: a crash
    /// between batches leaves the mark, and [`IndexStore::open`] finishes the clear, so the
    /// feeder never resumes from a position whose entries are half gone.
    pub fn clear_vb(&self, id: IndexId, vb: VbId) -> Result<u64> {
        let open = self.index(id)?;
        let _write = lock(&open.write);
        let mut batch = self.db.batch();
        batch.insert(&self.meta, keys::clearing(id, vb), []);
        batch.remove(&self.meta, keys::position(id, vb));
        batch.durability(Some(PersistMode::Buffer)).commit()?;
        lock(&open.positions).remove(&vb);
        self.clear_entries(id, &open, vb)
    }

    fn clear_entries(&self, id: IndexId, open: &OpenIndex, vb: VbId) -> Result<u64> {
        let mut removed = 0u64;
        loop {
            let chunk = open
                .back
                .prefix(keys::back_prefix(vb))
                .take(CLEAR_BATCH)
                .map(|g| g.into_inner())
                .collect::<std::result::Result<Vec<_>, _>>()?;
            let mut batch = self.db.batch();
            if chunk.is_empty() {
                batch.remove(&self.meta, keys::clearing(id, vb));
                batch.durability(Some(PersistMode::Buffer)).commit()?;
                return Ok(removed);
            }
            for (back, entry) in chunk {
                batch.remove(&open.entries, entry);
                batch.remove(&open.back, back);
                removed += 1;
            }
            batch.durability(Some(PersistMode::Buffer)).commit()?;
        }
    }

    /// Finishes the clears a crash interrupted (see [`IndexStore::clear_vb`]).
    pub(super) fn finish_interrupted_clears(&self) -> Result<()> {
        let indexes: Vec<_> = self
            .indexes
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|(id, open)| (*id, open.clone()))
            .collect();
        for (id, open) in indexes {
            let vbs = self
                .meta
                .prefix(keys::clearing_prefix(id))
                .map(|g| g.key())
                .collect::<std::result::Result<Vec<_>, _>>()?;
            for key in vbs {
                if let Some(vb) = keys::vb_of(&key) {
                    self.clear_entries(id, &open, vb)?;
                }
            }
        }
        Ok(())
    }
}
