//! The index store: every index of a node in one fjall database.
//!
//! One database, so that one write batch can cover an index's entries, its back index and
//! the stream positions they reach: fjall applies a batch whole or not at all, also across
//! a crash, which is what lets the feeder resume from a saved position with no full
//! rebuild. Those batches are not fsynced (they reach the OS, so a killed process loses
//! nothing); after a machine crash an index may be behind its saved position's batch, never
//! ahead of it, and it catches up from the stream.
//!
//! Definitions are written with an fsync: an index a client was told exists must exist.

mod apply;
mod clear;
mod keys;
mod scan;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use fjall::config::{PartitioningPolicy, PinningPolicy};
use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use sluice_types::VbId;

use crate::definition::{IndexDef, IndexId, IndexState};
use crate::error::{IndexError, Result};
use crate::position::VbPosition;

pub use apply::{Applied, Change, VbChanges};
pub use scan::{ScanEntry, ScanPage};

pub struct IndexStore {
    db: Database,
    meta: Keyspace,
    indexes: RwLock<BTreeMap<IndexId, Arc<OpenIndex>>>,
    /// Serialises definition changes and id allocation.
    ddl: Mutex<()>,
    /// Bumped after every change of the definitions (a new index, a dropped one, a new
    /// state), so that a reader may keep what it derived from them until it moves.
    generation: AtomicU64,
}

struct OpenIndex {
    def: RwLock<IndexDef>,
    /// The definition's `primary`, which never changes: a scan reads it without cloning
    /// the definition.
    primary: bool,
    entries: Keyspace,
    back: Keyspace,
    /// What has been applied, per vbucket (absent: nothing).
    positions: Mutex<BTreeMap<VbId, VbPosition>>,
    /// Serialises this index's writers: an apply reads the back index, and that read must
    /// not race another write of the same document.
    write: Mutex<()>,
    counters: Counters,
}

/// Counted since the store opened.
#[derive(Default)]
struct Counters {
    changes: AtomicU64,
    skipped: AtomicU64,
}

/// What the stats of one index report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexStats {
    /// Entries, approximately (fjall counts tombstones until compaction drops them).
    pub items_approx: u64,
    pub disk_bytes: u64,
    /// Document changes applied since the store opened.
    pub changes_applied: u64,
    /// Documents left out because their values do not fit an entry.
    pub docs_skipped: u64,
}

/// The index store's memory, over every index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreMemory {
    pub write_buffer_bytes: u64,
    pub cache_bytes: u64,
}

impl OpenIndex {
    /// The definition as it is now (its state changes).
    fn def(&self) -> IndexDef {
        self.def
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// How an index's keyspaces are laid out. Every query seeks one, so a seek's steps count:
/// fjall's defaults split the block index of a table at the deeper levels into two levels,
/// read through the block cache, and a settled index is one table at the last level (perf:
/// the upper level's search and the cache lookup of the lower block were a fifth of a
/// point lookup's scan). Here a table's block index is one block, kept in memory (about 1%
/// of the table), and the memtable is smaller than fjall's default (see
/// [`INDEX_MEMTABLE_BYTES`]). Fjall keeps these settings with the keyspace when it is
/// created; a keyspace made before keeps its own.
fn index_keyspace_options() -> KeyspaceCreateOptions {
    KeyspaceCreateOptions::default()
        .index_block_partitioning_policy(PartitioningPolicy::all(false))
        .index_block_pinning_policy(PinningPolicy::all(true))
        .max_memtable_size(INDEX_MEMTABLE_BYTES)
}

/// The memtable of an index keyspace (fjall's default is 64 MiB). A built index is
/// settled out of its memtable, but the writes that follow fill the next one, and every
/// lookup seeks through it: with 64 MiB, three bench runs on one server (1 M documents)
/// gave point lookups 30,949, 28,552 and 27,998 queries/s as each run's write phases left
/// more there; with 16 MiB, 30,139, 30,457 and 30,390.
const INDEX_MEMTABLE_BYTES: u64 = 16 << 20;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves nothing half-written in memory that
    // a later reader could misread (the store is written in whole batches).
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl IndexStore {
    /// Opens (or creates) the store in `dir`, with a block cache of `cache_bytes`. Clears
    /// that a crash interrupted are finished before this returns.
    pub fn open(dir: &Path, cache_bytes: u64) -> Result<IndexStore> {
        let db = Database::builder(dir)
            .cache_size(cache_bytes)
            .worker_threads(1)
            .open()?;
        let meta = db.keyspace(keys::META, KeyspaceCreateOptions::default)?;
        let store = IndexStore {
            db,
            meta,
            indexes: RwLock::new(BTreeMap::new()),
            ddl: Mutex::new(()),
            generation: AtomicU64::new(0),
        };
        let defs = store
            .meta
            .prefix(keys::def_prefix())
            .map(|g| {
                let (_, v) = g.into_inner()?;
                IndexDef::from_json(&v)
            })
            .collect::<Result<Vec<_>>>()?;
        for def in defs {
            let open = store.open_index(def)?;
            store
                .indexes
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(open.0, open.1);
        }
        store.finish_interrupted_clears()?;
        Ok(store)
    }

    fn open_index(&self, def: IndexDef) -> Result<(IndexId, Arc<OpenIndex>)> {
        let id = def.id;
        let entries = self
            .db
            .keyspace(&keys::entries_keyspace(id), index_keyspace_options)?;
        let back = self
            .db
            .keyspace(&keys::back_keyspace(id), index_keyspace_options)?;
        let mut positions = BTreeMap::new();
        for g in self.meta.prefix(keys::position_prefix(id)) {
            let (k, v) = g.into_inner()?;
            let vb = keys::vb_of(&k)
                .ok_or_else(|| IndexError::Corrupt(format!("position key {k:?}")))?;
            positions.insert(vb, VbPosition::decode(&v)?);
        }
        let open = OpenIndex {
            primary: def.primary,
            def: RwLock::new(def),
            entries,
            back,
            positions: Mutex::new(positions),
            write: Mutex::new(()),
            counters: Counters::default(),
        };
        Ok((id, Arc::new(open)))
    }

    fn index(&self, id: IndexId) -> Result<Arc<OpenIndex>> {
        self.indexes
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .cloned()
            .ok_or(IndexError::NoSuchIndex(id.0))
    }

    /// Defines a new index (its `id` is assigned here; what `def.id` held is ignored).
    /// Refused when the keyspace already has an index of that name.
    pub fn create(&self, mut def: IndexDef) -> Result<IndexDef> {
        let _ddl = lock(&self.ddl);
        let exists = self.definitions().into_iter().any(|d| {
            d.name == def.name
                && d.bucket == def.bucket
                && d.scope == def.scope
                && d.collection == def.collection
        });
        if exists {
            return Err(IndexError::Exists {
                keyspace: def.keyspace(),
                name: def.name,
            });
        }
        let next = match self.meta.get(keys::NEXT_ID)? {
            Some(v) => {
                let b: [u8; 4] = v.as_ref().try_into().map_err(|_| {
                    IndexError::Corrupt(format!("next index id of {} bytes", v.len()))
                })?;
                u32::from_be_bytes(b)
            }
            None => 1,
        };
        def.id = IndexId(next);
        let mut batch = self.db.batch();
        batch.insert(&self.meta, keys::NEXT_ID, (next + 1).to_be_bytes());
        batch.insert(&self.meta, keys::def(def.id), def.to_json());
        batch.durability(Some(PersistMode::SyncAll)).commit()?;
        let (id, open) = self.open_index(def.clone())?;
        self.indexes
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, open);
        self.generation.fetch_add(1, Ordering::Release);
        Ok(def)
    }

    /// Removes an index, its entries and its positions.
    pub fn drop_index(&self, id: IndexId) -> Result<()> {
        let _ddl = lock(&self.ddl);
        let open = self
            .indexes
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id)
            .ok_or(IndexError::NoSuchIndex(id.0))?;
        // Out of the map: readers of the definitions no longer see it.
        self.generation.fetch_add(1, Ordering::Release);
        // Wait out a writer of this index, then keep others out.
        let _write = lock(&open.write);
        let mut batch = self.db.batch();
        batch.remove(&self.meta, keys::def(id));
        for prefix in [keys::position_prefix(id), keys::clearing_prefix(id)] {
            for g in self.meta.prefix(prefix) {
                batch.remove(&self.meta, g.key()?);
            }
        }
        batch.durability(Some(PersistMode::SyncAll)).commit()?;
        self.db.delete_keyspace(open.entries.clone())?;
        self.db.delete_keyspace(open.back.clone())?;
        Ok(())
    }

    pub fn definitions(&self) -> Vec<IndexDef> {
        self.indexes
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .map(|i| i.def())
            .collect()
    }

    pub fn definition(&self, id: IndexId) -> Result<IndexDef> {
        Ok(self.index(id)?.def())
    }

    /// Moves an index to `state` (durably: "online" is what lets queries use it).
    pub fn set_state(&self, id: IndexId, state: IndexState) -> Result<()> {
        let _ddl = lock(&self.ddl);
        let open = self.index(id)?;
        let mut def = open.def.write().unwrap_or_else(PoisonError::into_inner);
        let mut next = def.clone();
        next.state = state;
        let mut batch = self.db.batch();
        batch.insert(&self.meta, keys::def(id), next.to_json());
        batch.durability(Some(PersistMode::SyncAll)).commit()?;
        *def = next;
        self.generation.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// The definitions' generation: it moves after each change of them. Read it before
    /// [`IndexStore::definitions`]: what they give is then at least that new.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Moves index `id`'s entries (and its back index) out of their memtables into one
    /// sorted run on disk; blocks until done. Run once an index's build ends: the build
    /// writes its entries into a memtable (a skip list; [`INDEX_MEMTABLE_BYTES`] each)
    /// that a lookup's seek walks node by node, cache miss after cache miss (perf showed
    /// it as 12% of the server's time on point lookups over 200 000 documents), where a
    /// table is a binary search over its block index and one block. Writes go on
    /// meanwhile: they land in the new memtable.
    ///
    /// fjall hides both calls from its docs (it uses them in its tests); the workspace pins
    /// fjall's version, so a change of them shows at the upgrade.
    pub fn settle(&self, id: IndexId) -> Result<()> {
        let open = self.index(id)?;
        for keyspace in [&open.entries, &open.back] {
            keyspace.rotate_memtable_and_wait()?;
            keyspace.major_compact()?;
        }
        Ok(())
    }

    /// On-disk tables of index `id`'s entries (what `settle` brings down to one run).
    pub fn table_count(&self, id: IndexId) -> Result<usize> {
        Ok(self.index(id)?.entries.table_count())
    }

    /// How far the index has applied each vbucket (vbuckets it holds nothing of are absent).
    pub fn positions(&self, id: IndexId) -> Result<BTreeMap<VbId, VbPosition>> {
        Ok(lock(&self.index(id)?.positions).clone())
    }

    /// `f` of index `id`'s positions, read in place (a consistency check runs this on
    /// every applied group for every waiting query: no copy of a thousand positions).
    pub fn with_positions<T>(
        &self,
        id: IndexId,
        f: impl FnOnce(&BTreeMap<VbId, VbPosition>) -> T,
    ) -> Result<T> {
        Ok(f(&lock(&self.index(id)?.positions)))
    }

    /// What the whole store holds in memory: its memtables (written, not flushed yet) and
    /// its block cache. fjall marks both readings experimental (hidden from its docs); they
    /// are what its own write stalls and cache eviction go by.
    pub fn memory(&self) -> StoreMemory {
        StoreMemory {
            write_buffer_bytes: self.db.write_buffer_size(),
            cache_bytes: self.db.cache_size(),
        }
    }

    pub fn stats(&self, id: IndexId) -> Result<IndexStats> {
        let open = self.index(id)?;
        Ok(IndexStats {
            items_approx: open.entries.approximate_len() as u64,
            disk_bytes: open.entries.disk_space() + open.back.disk_space(),
            changes_applied: open.counters.changes.load(Ordering::Relaxed),
            docs_skipped: open.counters.skipped.load(Ordering::Relaxed),
        })
    }
}
