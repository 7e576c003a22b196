//! One vbucket's documents: key → [`StoredValue`], with byte accounting.
//!
//! The table keeps metadata for every live document (and for tombstones until they are
//! persisted, or purged in an ephemeral bucket); values may be evicted (`value == None`) once
//! persisted. Every change reports its byte delta so the bucket's memory counter stays exact,
//! and counts it to the key's collection ([`CollectionBytes`]).

use crate::collections::CollectionBytes;
use crate::table_key::{TableKey, INLINE_KEY_BYTES};
use bytes::Bytes;
use hashbrown::HashMap;
use sluice_types::{ItemMeta, Seqno};

/// One document version in memory.
#[derive(Debug, Clone)]
pub struct StoredValue {
    pub meta: ItemMeta,
    /// `None` when evicted: the value is on disk only.
    pub value: Option<Bytes>,
    /// Not yet persisted. Only clean values may be evicted.
    pub dirty: bool,
    /// Read since the item pager last looked (a second-chance bit for eviction).
    pub referenced: bool,
    /// The seqno of this key's version on disk, when the engine knows it (`Seqno::ZERO`:
    /// not known). It lets the flusher tell storage which by_seqno slot a new version
    /// replaces, instead of storage reading by_key for every item it writes. Set by warmup
    /// and by the flusher after each commit; a new version inherits it (see
    /// [`HashTable::replace_with`]), since writing to memory does not change the disk.
    /// Entries made from a disk read leave it unknown: a concurrent delete may have changed
    /// the disk since the read. Zero means "nothing on disk" instead while the vbucket's
    /// memory covers its disk (see `VbInner::tombstones_only_on_disk`).
    pub disk_seqno: Seqno,
}

/// Bytes one entry's slot costs, the map's spare capacity included (measured, not exact).
/// A key that fits in the slot costs nothing more (see [`TableKey`]).
pub const SLOT_BYTES: usize = std::mem::size_of::<(TableKey, StoredValue)>() * 3 / 2;

/// The allocator's header on a key stored outside the slot.
const HEAP_KEY_HEADER_BYTES: usize = 16;

impl StoredValue {
    /// A live document whose value is in memory.
    pub fn is_resident_value(&self) -> bool {
        self.value.is_some() && !self.meta.deleted
    }

    pub fn resident_value_bytes(&self) -> usize {
        self.value.as_ref().map_or(0, |v| v.len())
    }
}

pub fn entry_bytes(key_len: usize, sv: &StoredValue) -> usize {
    let key_heap = if key_len > INLINE_KEY_BYTES {
        key_len + HEAP_KEY_HEADER_BYTES
    } else {
        0
    };
    SLOT_BYTES + key_heap + sv.resident_value_bytes()
}

#[derive(Debug, Default)]
pub struct HashTable {
    map: HashMap<TableKey, StoredValue>,
    resident_values: usize,
    collection_bytes: CollectionBytes,
}

impl HashTable {
    pub fn get(&self, key: &[u8]) -> Option<&StoredValue> {
        self.map.get(key)
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut StoredValue> {
        self.map.get_mut(key)
    }

    /// Replaces the key's entry with `make(previous)`, with one probe of the table; returns
    /// the byte delta (new − old).
    pub fn replace_with(
        &mut self,
        key: &[u8],
        make: impl FnOnce(Option<&StoredValue>) -> StoredValue,
    ) -> isize {
        let (delta, new_resident, old) = match self.map.entry_ref(key) {
            hashbrown::hash_map::EntryRef::Occupied(mut o) => {
                let mut sv = make(Some(o.get()));
                if sv.disk_seqno == Seqno::ZERO {
                    sv.disk_seqno = o.get().disk_seqno;
                }
                let new_bytes = entry_bytes(key.len(), &sv) as isize;
                let resident = sv.is_resident_value();
                let old = std::mem::replace(o.get_mut(), sv);
                let delta = new_bytes - entry_bytes(key.len(), &old) as isize;
                (delta, resident, Some(old))
            }
            hashbrown::hash_map::EntryRef::Vacant(v) => {
                let sv = make(None);
                let new_bytes = entry_bytes(key.len(), &sv) as isize;
                let resident = sv.is_resident_value();
                v.insert(sv);
                (new_bytes, resident, None)
            }
        };
        self.count_resident(new_resident, 1);
        if let Some(old) = old {
            self.count_resident(old.is_resident_value(), -1);
        }
        self.collection_bytes.add(key, delta);
        delta
    }

    /// Inserts or replaces; returns the byte delta (new − old).
    pub fn upsert(&mut self, key: &[u8], sv: StoredValue) -> isize {
        self.replace_with(key, |_| sv)
    }

    /// Removes the entry; returns the bytes freed.
    pub fn remove(&mut self, key: &[u8]) -> usize {
        match self.map.remove(key) {
            Some(old) => {
                self.count(&old, -1);
                let freed = entry_bytes(key.len(), &old);
                self.collection_bytes.add(key, -(freed as isize));
                freed
            }
            None => 0,
        }
    }

    /// Drops a clean value from memory; returns the bytes freed.
    pub fn evict_value(&mut self, key: &[u8]) -> usize {
        let Some(sv) = self.map.get_mut(key) else {
            return 0;
        };
        if sv.dirty || sv.meta.deleted {
            return 0;
        }
        match sv.value.take() {
            Some(v) => {
                self.resident_values -= 1;
                self.collection_bytes.add(key, -(v.len() as isize));
                v.len()
            }
            None => 0,
        }
    }

    /// Puts a value read from disk back; returns the bytes added.
    pub fn restore_value(&mut self, key: &[u8], value: Bytes) -> usize {
        let Some(sv) = self.map.get_mut(key) else {
            return 0;
        };
        if sv.value.is_some() {
            return 0;
        }
        let n = value.len();
        sv.value = Some(value);
        sv.referenced = true;
        self.resident_values += 1;
        self.collection_bytes.add(key, n as isize);
        n
    }

    fn count_resident(&mut self, resident: bool, sign: isize) {
        if resident {
            self.resident_values = self.resident_values.wrapping_add_signed(sign);
        }
    }

    fn count(&mut self, sv: &StoredValue, sign: isize) {
        self.count_resident(sv.is_resident_value(), sign);
    }

    pub fn resident_values(&self) -> usize {
        self.resident_values
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// The bytes each collection's entries take here.
    pub fn collection_bytes(&self) -> &CollectionBytes {
        &self.collection_bytes
    }

    /// Empties the table; returns the bytes it held.
    pub fn clear(&mut self) -> usize {
        self.resident_values = 0;
        self.collection_bytes.clear();
        self.map
            .drain()
            .map(|(k, sv)| entry_bytes(k.as_slice().len(), &sv))
            .sum()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &StoredValue)> {
        self.map.iter().map(|(k, v)| (k.as_slice(), v))
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&[u8], &mut StoredValue)> {
        self.map.iter_mut().map(|(k, v)| (k.as_slice(), v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_types::CollectionId;

    fn sv(value: &[u8], dirty: bool) -> StoredValue {
        StoredValue {
            meta: ItemMeta::default(),
            value: Some(Bytes::copy_from_slice(value)),
            dirty,
            referenced: false,
            disk_seqno: Seqno::ZERO,
        }
    }

    /// What each collection's entries take, counted from scratch.
    fn recount(t: &HashTable) -> Vec<(CollectionId, usize)> {
        let mut m = std::collections::BTreeMap::new();
        for (k, v) in t.iter() {
            let cid = sluice_types::collection::collection_of(k);
            *m.entry(cid).or_insert(0) += entry_bytes(k.len(), v);
        }
        m.into_iter().collect()
    }

    #[test]
    fn collection_bytes_follow_every_change() {
        let mut t = HashTable::default();
        let key = |cid: u32, i: u32| {
            let mut k = CollectionId(cid).prefix();
            // Long keys too: they live outside the slot.
            k.extend_from_slice(format!("key-{i}-{}", "x".repeat(i as usize % 40)).as_bytes());
            k
        };
        for i in 0..50u32 {
            for cid in [0, 8, 9] {
                let value = vec![b'v'; (i as usize * 7) % 100];
                t.upsert(&key(cid, i), sv(&value, false));
            }
        }
        assert_eq!(t.collection_bytes().iter().collect::<Vec<_>>(), recount(&t));
        for i in 0..50u32 {
            match i % 4 {
                0 => {
                    t.evict_value(&key(8, i));
                }
                1 => {
                    t.remove(&key(9, i));
                }
                2 => {
                    t.upsert(&key(0, i), sv(b"a much longer value than before", true));
                }
                _ => {
                    t.evict_value(&key(0, i));
                    t.restore_value(&key(0, i), Bytes::from_static(b"back"));
                }
            }
            assert_eq!(t.collection_bytes().iter().collect::<Vec<_>>(), recount(&t));
        }
        for i in 0..50u32 {
            t.remove(&key(8, i));
        }
        let left: Vec<_> = t.collection_bytes().iter().map(|(c, _)| c).collect();
        assert_eq!(left, vec![CollectionId::DEFAULT, CollectionId(9)]);
        t.clear();
        assert_eq!(t.collection_bytes().iter().count(), 0);
    }
}
