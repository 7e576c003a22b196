//! What memory knows of the disk: the flusher marking versions clean, tombstones purged,
//! keys read back from disk (or found absent), metadata put back at warmup, and whole
//! entries evicted. Memory holds no I/O here: the disk's answers come in as arguments.

use super::VbInner;
use crate::collections::LiveCollections;
use crate::hash_table::StoredValue;
use bytes::Bytes;
use sluice_storage::OnDisk;
use sluice_types::{ItemMeta, Seqno};

impl VbInner {
    /// Removes every entry of a collection `live` says was dropped (documents, tombstones,
    /// metadata of evicted ones) from memory. Returns how many entries went. What is on
    /// disk stays until the sweep's disk pass: until then memory lacks entries the disk
    /// has, which `tombstones_only_on_disk` records (no key is then assumed absent).
    pub fn drop_collections(&mut self, live: &LiveCollections, persistent: bool) -> usize {
        let gone: Vec<(Box<[u8]>, bool, u64)> = self
            .ht
            .iter()
            .filter(|(k, _)| live.drops_key(k))
            .map(|(k, sv)| (k.into(), !sv.meta.deleted, sv.meta.rev_seqno))
            .collect();
        if persistent && !gone.is_empty() {
            self.tombstones_only_on_disk = true;
        }
        for (key, was_live, rev) in &gone {
            self.mem_delta -= self.ht.remove(key) as isize;
            self.locks.release(key);
            self.max_deleted_rev = self.max_deleted_rev.max(*rev);
            if *was_live {
                self.num_items = self.num_items.saturating_sub(1);
                self.collection_items.add(key, -1);
            }
        }
        // Documents only on disk (metadata evicted) are counted but not in the table:
        // they go with the disk pass, and stop counting now.
        let on_disk_only = self.collection_items.take_dropped(live);
        self.num_items = self.num_items.saturating_sub(on_disk_only as usize);
        gone.len()
    }

    /// Drops in-memory tombstones deleted before `cutoff_s` that are already persisted (or
    /// never will be, in an ephemeral bucket). Returns (count, highest purged seqno).
    pub fn purge_tombstones(&mut self, cutoff_s: u32) -> (usize, Seqno) {
        let old: Vec<(Box<[u8]>, Seqno, u64)> = self
            .ht
            .iter()
            .filter(|(_, sv)| sv.meta.deleted && !sv.dirty && sv.meta.delete_time < cutoff_s)
            .map(|(k, sv)| (k.into(), sv.meta.seqno, sv.meta.rev_seqno))
            .collect();
        let mut high = Seqno::ZERO;
        // Harmless in an ephemeral bucket; in a durable one the tombstone is on disk until
        // the flusher purges it there.
        self.tombstones_only_on_disk |= !old.is_empty();
        for (key, seqno, rev) in &old {
            self.mem_delta -= self.ht.remove(key) as isize;
            self.max_deleted_rev = self.max_deleted_rev.max(*rev);
            high = high.max(*seqno);
        }
        if high > self.purge_seqno {
            self.purge_seqno = high;
        }
        (old.len(), high)
    }

    /// After a flush made `(key, seqno)` durable: marks the version clean, and drops a
    /// persisted tombstone from memory (its history lives on disk).
    pub fn mark_persisted(&mut self, key: &[u8], seqno: Seqno) {
        let Some(sv) = self.ht.get_mut(key) else {
            return;
        };
        // The commit left exactly this version on disk (a batch keeps a key's highest seqno,
        // and the flusher marks a vbucket's items in seqno order).
        sv.disk_seqno = sv.disk_seqno.max(seqno);
        if sv.meta.seqno != seqno {
            return; // a newer version is still dirty
        }
        sv.dirty = false;
        if sv.meta.deleted {
            self.max_deleted_rev = self.max_deleted_rev.max(sv.meta.rev_seqno);
            self.mem_delta -= self.ht.remove(key) as isize;
            self.tombstones_only_on_disk = true;
        }
    }

    /// Takes in what a disk read found for a key: its current version (tombstones included),
    /// or `None` when the key does not exist. A key absent from memory gets an entry (a
    /// "known absent" marker — a clean tombstone with seqno 0 — when the disk has nothing),
    /// so the retried operation can answer without another read. An entry written
    /// meanwhile is newer and is left alone; an evicted value of the same version is restored.
    pub fn fetched(&mut self, key: &[u8], record: Option<(ItemMeta, Bytes)>) {
        match (self.ht.get(key), record) {
            (None, Some((meta, value))) => {
                let sv = StoredValue {
                    meta,
                    value: Some(value),
                    dirty: false,
                    referenced: true,
                    disk_seqno: Seqno::ZERO,
                };
                self.mem_delta += self.ht.upsert(key, sv);
            }
            (None, None) => {
                let sv = StoredValue {
                    meta: ItemMeta {
                        deleted: true,
                        rev_seqno: self.max_deleted_rev,
                        ..ItemMeta::default()
                    },
                    value: Some(Bytes::new()),
                    dirty: false,
                    referenced: true,
                    disk_seqno: Seqno::ZERO,
                };
                self.mem_delta += self.ht.upsert(key, sv);
            }
            (Some(sv), Some((meta, value)))
                if sv.meta.seqno == meta.seqno && sv.value.is_none() =>
            {
                self.mem_delta += self.ht.restore_value(key, value) as isize;
            }
            _ => {}
        }
    }

    /// What memory knows of the key's entry on disk, for the flusher's hint to storage.
    pub fn on_disk(&self, key: &[u8]) -> OnDisk {
        match self.ht.get(key) {
            Some(sv) if sv.disk_seqno != Seqno::ZERO => OnDisk::At(sv.disk_seqno),
            Some(_) if !self.keys_evicted && !self.tombstones_only_on_disk => OnDisk::Absent,
            _ => OnDisk::Unknown,
        }
    }

    /// A purge removed the tombstone at `seqno` from disk: memory no longer knows what disk
    /// holds for the key, if it thought that tombstone was there.
    pub fn purged_from_disk(&mut self, key: &[u8], seqno: Seqno) {
        if let Some(sv) = self.ht.get_mut(key) {
            if sv.disk_seqno == seqno {
                sv.disk_seqno = Seqno::ZERO;
            }
        }
    }

    /// Puts a persisted version's metadata back (value not resident) if the key has no entry.
    pub fn insert_metadata(&mut self, key: &[u8], meta: ItemMeta) {
        if self.ht.get(key).is_none() {
            let sv = StoredValue {
                meta,
                value: None,
                dirty: false,
                referenced: false,
                disk_seqno: Seqno::ZERO,
            };
            self.mem_delta += self.ht.upsert(key, sv);
        }
    }

    /// Drops a clean entry from memory entirely (metadata and value); its state stays on disk.
    /// Returns the bytes freed (0 if the entry is dirty or missing).
    /// A key with a SyncWrite pending stays: its commit updates the entry in place.
    pub fn evict_key(&mut self, key: &[u8]) -> usize {
        if self.prepares.get(key).is_some() {
            return 0;
        }
        match self.ht.get(key) {
            Some(sv) if !sv.dirty => {
                self.keys_evicted = true;
                self.ht.remove(key)
            }
            _ => 0,
        }
    }
}
