//! [`Store`] on the fjall LSM engine: one fjall `Database` per bucket, one keyspace per index.
//!
//! Every write goes through one fjall write batch with `PersistMode::SyncAll`, which writes
//! the batch to the journal, fsyncs it, and only then applies it to the memtables. So one
//! [`Store::commit`] is one atomic journal entry plus one fsync, and readers never see data
//! that is not durable yet.

use crate::codec;
use crate::fjall_scan::{self, io, FjallSnapshot, RecordIter};
use crate::plan::{plan_commit, Namespace, WritePlan};
use crate::poison::Poison;
use crate::{FlushBatch, ItemRecord, OnDisk, Result, Store, StoreError, StoreSnapshot, VbMeta};
use bytes::Bytes;
use fjall::{
    CompressionType, Database, Keyspace, KeyspaceCreateOptions, KvSeparationOptions,
    OwnedWriteBatch, PersistMode, Readable, Snapshot,
};
use sluice_types::{Seqno, VbId};
use std::path::Path;
use std::sync::{Mutex, PoisonError};

const BY_SEQNO: &str = "by_seqno";
const BY_KEY: &str = "by_key";
/// Added with SyncWrites: a store written before opens with it empty, which is what it held.
const PENDING_BY_KEY: &str = "pending_by_key";
const VB_META: &str = "vb_meta";
/// Node-level flags that belong to no vbucket.
const NODE: &str = "node";

const CLEAN_SHUTDOWN_KEY: &[u8] = b"clean_shutdown";
/// How document keys are spelled on disk. Absent from stores written before collections,
/// whose keys carry no collection prefix; written when a store is created.
const KEY_FORMAT_KEY: &[u8] = b"key_format";
/// Keys are collection-qualified: a LEB128 collection id, then the document's key.
const KEY_FORMAT_COLLECTIONS: &[u8] = &[2];
const FLAG_CLEAN: &[u8] = &[1];
const FLAG_RUNNING: &[u8] = &[0];

/// Records at least this large keep their bytes in blob files (key-value separation).
const BLOB_THRESHOLD_BYTES: u32 = 512;

/// Smallest memtable a quota gets: below it, memtable flushes and the compactions they cause
/// come too often for the data they carry.
pub const MEMTABLE_BYTES_MIN: u64 = 2 * 1024 * 1024;

/// Largest memtable, whatever the quota. Larger is slower, not faster, for the flusher: every
/// write of a commit is a skiplist insert, and its search misses the cache more the more the
/// memtable holds. Commits shaped like the flusher's under a set-only load (7,000 rewrites of
/// 1 KiB values per commit over 500,000 keys, `flusher_shaped_cost` in
/// `tests/it/throughput.rs`) cost the committing thread 7.0–7.6 µs per item with 64 MiB
/// memtables (what a 2 GiB quota used to get), 5.9–6.4 with 16, 4.9–5.9 with 4 and 5.0–5.5
/// with 2; the whole process, flushes and compactions included, 11.6–12.5, 10.7–11.7,
/// 9.2–11.1 and 9.4–10.1 µs.
pub const MEMTABLE_BYTES_MAX: u64 = 4 * 1024 * 1024;

/// How many keyspaces a store opens, each with memtables of its own.
const KEYSPACES: u64 = 5;

/// How much memory the storage engine may use for itself, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreMemory {
    /// Block cache shared by all keyspaces.
    pub cache_bytes: u64,
    /// Largest memtable of one keyspace before it is written out (a full one may coexist
    /// with its successor while it flushes).
    pub memtable_bytes: u64,
}

impl Default for StoreMemory {
    fn default() -> StoreMemory {
        StoreMemory {
            cache_bytes: 32 * 1024 * 1024,
            memtable_bytes: MEMTABLE_BYTES_MAX,
        }
    }
}

impl StoreMemory {
    /// A budget derived from a bucket quota: an eighth for the cache (at least 4 MiB), and
    /// memtables of a sixty-fourth, between [`MEMTABLE_BYTES_MIN`] and [`MEMTABLE_BYTES_MAX`].
    pub fn for_quota(quota_bytes: u64) -> StoreMemory {
        StoreMemory {
            cache_bytes: (quota_bytes / 8).max(4 * 1024 * 1024),
            memtable_bytes: (quota_bytes / 64).clamp(MEMTABLE_BYTES_MIN, MEMTABLE_BYTES_MAX),
        }
    }

    /// The most this budget lets the storage engine hold: the cache plus, for each of the
    /// five keyspaces (by_seqno, by_key, pending_by_key, vb_meta, node), an active and a
    /// flushing memtable.
    pub fn bytes_max(&self) -> u64 {
        self.cache_bytes + KEYSPACES * 2 * self.memtable_bytes
    }
}

pub struct FjallStore {
    db: Database,
    by_seqno: Keyspace,
    by_key: Keyspace,
    pending_by_key: Keyspace,
    vb_meta: Keyspace,
    node: Keyspace,
    /// Serialises writers: `commit` reads the key indexes to find previous records, and that
    /// read must not race with another commit's write.
    write_lock: Mutex<()>,
    poison: Poison,
    /// Check every on-disk hint of a commit against by_key (see [`VERIFY_HINTS_ENV`]).
    verify_hints: bool,
}

/// Set (to anything but `0`) to have every commit check the caller's on-disk hints against
/// by_key and fail as corrupt on a mismatch. The test suite sets it; it costs the read the
/// hints save. Debug builds always check.
pub const VERIFY_HINTS_ENV: &str = "SLUICE_VERIFY_DISK_HINTS";

fn verify_hints_wanted() -> bool {
    cfg!(debug_assertions)
        || std::env::var(VERIFY_HINTS_ENV).is_ok_and(|v| !v.is_empty() && v != "0")
}

impl FjallStore {
    /// Opens (or creates) the store in `dir` with the default memory budget. Fails if
    /// another process holds it open.
    pub fn open(dir: &Path) -> Result<FjallStore> {
        Self::open_with(dir, StoreMemory::default())
    }

    /// Turns the check of every on-disk hint against by_key on or off (see
    /// [`VERIFY_HINTS_ENV`] for the default).
    pub fn with_hint_checks(mut self, on: bool) -> FjallStore {
        self.verify_hints = on;
        self
    }

    /// Opens (or creates) the store in `dir`, bounding the engine's own memory (block cache
    /// and memtables) by `memory`.
    pub fn open_with(dir: &Path, memory: StoreMemory) -> Result<FjallStore> {
        // One background worker: memtable flushes and compactions run in bursts, and with
        // two they could take both cores from the connection threads for tens of ms.
        let db = Database::builder(dir)
            .cache_size(memory.cache_bytes)
            .worker_threads(1)
            .open()
            .map_err(io)?;
        let keyspace = |name: &str| {
            let memtable = memory.memtable_bytes;
            // Records carry the document value: keep large ones in blob files so compaction
            // moves pointers instead of rewriting values (it dominated the CPU of a
            // write-heavy load with 1 KiB values).
            let separate = name == BY_SEQNO;
            db.keyspace(name, move || {
                let opts = KeyspaceCreateOptions::default().max_memtable_size(memtable);
                if separate {
                    // No compression of blobs: document values are often compressed already
                    // (Snappy) and LZ4 showed up as background CPU.
                    opts.with_kv_separation(Some(
                        KvSeparationOptions::default()
                            .separation_threshold(BLOB_THRESHOLD_BYTES)
                            .compression(CompressionType::None),
                    ))
                } else {
                    opts
                }
            })
            .map_err(io)
        };
        let store = FjallStore {
            by_seqno: keyspace(BY_SEQNO)?,
            by_key: keyspace(BY_KEY)?,
            pending_by_key: keyspace(PENDING_BY_KEY)?,
            vb_meta: keyspace(VB_META)?,
            node: keyspace(NODE)?,
            db,
            write_lock: Mutex::new(()),
            poison: Poison::default(),
            verify_hints: verify_hints_wanted(),
        };
        store.check_key_format()?;
        Ok(store)
    }

    /// A new store records that its keys are collection-qualified. A store holding
    /// documents without that record was written before collections: its keys would be
    /// read as if their first byte named a collection, so it is refused, not misread.
    fn check_key_format(&self) -> Result<()> {
        match self.node.get(KEY_FORMAT_KEY).map_err(io)? {
            Some(v) if v.as_ref() == KEY_FORMAT_COLLECTIONS => Ok(()),
            Some(v) => Err(StoreError::Corrupt(format!(
                "unknown key format {:?}",
                v.as_ref()
            ))),
            None if self.by_key.is_empty().map_err(io)?
                && self.by_seqno.is_empty().map_err(io)? =>
            {
                let mut batch = OwnedWriteBatch::with_capacity(self.db.clone(), 1);
                batch.insert(&self.node, KEY_FORMAT_KEY, KEY_FORMAT_COLLECTIONS);
                self.write_durably(batch)
            }
            None => Err(StoreError::Corrupt(
                "this data directory was written by a Sluice without collections (its keys \
                 carry no collection prefix) and cannot be read by this one; start from an \
                 empty data directory"
                    .into(),
            )),
        }
    }

    /// Whether a failed write has poisoned the store.
    pub fn is_poisoned(&self) -> bool {
        self.poison.is_poisoned()
    }

    /// Commits `batch` with one fsync. Any failure poisons the store: fjall may have written
    /// part of the journal entry, and a failed fsync must never be retried.
    fn write_durably(&self, batch: OwnedWriteBatch) -> Result<()> {
        batch
            .durability(Some(PersistMode::SyncAll))
            .commit()
            .map_err(|e| {
                let msg = format!("durable write failed: {e}");
                self.poison.poison(msg.clone());
                StoreError::Io(msg)
            })
    }

    fn to_batch(&self, plan: WritePlan) -> OwnedWriteBatch {
        let len = plan.by_seqno.len()
            + plan.by_key.len()
            + plan.pending_by_key.len()
            + plan.vb_meta.len();
        let mut batch = OwnedWriteBatch::with_capacity(self.db.clone(), len);
        for (k, v) in plan.by_seqno {
            match v {
                Some(record) => batch.insert(&self.by_seqno, k, record),
                None => batch.remove(&self.by_seqno, k),
            }
        }
        for (index, entries) in [
            (&self.by_key, plan.by_key),
            (&self.pending_by_key, plan.pending_by_key),
        ] {
            for (k, v) in entries {
                match v {
                    Some(seqno) => batch.insert(index, k, seqno),
                    None => batch.remove(index, k),
                }
            }
        }
        for (k, v) in plan.vb_meta {
            batch.insert(&self.vb_meta, k, v);
        }
        batch
    }

    fn set_node_flag(&self, value: &[u8]) -> Result<()> {
        let mut batch = self.db.batch();
        batch.insert(&self.node, CLEAN_SHUTDOWN_KEY, value);
        self.write_durably(batch)
    }

    /// A store that never held data: nothing can have been lost, so it counts as clean.
    fn is_fresh(&self) -> Result<bool> {
        Ok(self.by_seqno.is_empty().map_err(io)? && self.vb_meta.is_empty().map_err(io)?)
    }

    /// A snapshot that holds every commit entirely or not at all.
    ///
    /// fjall's `Database::snapshot` alone does not promise that: a flush or compaction
    /// finishing in the background moves the visible seqno past a batch that is still being
    /// applied to the memtables, and a snapshot opened then sees part of that batch, with
    /// later reads of the same snapshot seeing more of it (a backfill lost documents this
    /// way; `tests/it/snapshot_concurrent.rs`). Every commit here holds the write lock, so a
    /// snapshot opened under it falls between two commits.
    fn consistent_snapshot(&self) -> Snapshot {
        let _writer = self.lock_writes();
        self.db.snapshot()
    }

    /// The key index of a namespace, and its name for errors.
    fn index(&self, ns: Namespace) -> (&Keyspace, &'static str) {
        match ns {
            Namespace::Committed => (&self.by_key, BY_KEY),
            Namespace::Pending => (&self.pending_by_key, PENDING_BY_KEY),
        }
    }

    /// The key's seqno in the namespace's index, as committed on disk.
    fn indexed_seqno(&self, ns: Namespace, dk: &[u8]) -> Result<Option<Seqno>> {
        let (index, _) = self.index(ns);
        let seqno = index.get(dk).map_err(io)?;
        seqno.map(|v| codec::decode_seqno(&v)).transpose()
    }

    /// The seqno a commit replaces for `dk` in `ns`: the caller's hint if it knows one (a
    /// committed-namespace hint; checked against by_key when checks are on), else a read.
    fn replaced_seqno(&self, ns: Namespace, dk: &[u8], hint: OnDisk) -> Result<Option<Seqno>> {
        let known = hint.known();
        if let (Some(seqno), false) = (known, self.verify_hints) {
            return Ok(seqno);
        }
        let on_disk = self.indexed_seqno(ns, dk)?;
        if known.is_some_and(|seqno| seqno != on_disk) {
            return Err(StoreError::Corrupt(format!(
                "the caller said by_key holds seqno {hint:?} for {dk:?}; it holds {on_disk:?}"
            )));
        }
        Ok(on_disk)
    }

    /// One lookup on `snap`: the namespace's key index, then the `by_seqno` record it
    /// points to, which must be that key's and of that namespace.
    fn get_in(&self, snap: &Snapshot, ns: Namespace, vb: VbId, key: &[u8]) -> Result<Lookup> {
        let (index, name) = self.index(ns);
        let Some(seqno) = snap.get(index, codec::doc_key_slice(vb, key)).map_err(io)? else {
            return Ok(Lookup::Absent);
        };
        let seqno = codec::decode_seqno(&seqno)?;
        let Some(record) = snap
            .get(&self.by_seqno, codec::seqno_key(vb, seqno))
            .map_err(io)?
        else {
            return Ok(Lookup::Torn(format!(
                "{name} points {vb} to missing seqno {seqno}"
            )));
        };
        let body = codec::decode_record(&record)?;
        if body.key != key || body.meta.seqno != seqno || Namespace::of(body.kind) != ns {
            return Ok(Lookup::Torn(format!(
                "by_seqno {vb}/{seqno} holds another record than {name} says ({:?})",
                body.kind
            )));
        }
        Ok(Lookup::Found(ItemRecord {
            vb,
            key: body.key,
            meta: body.meta,
            value: body.value,
            kind: body.kind,
        }))
    }

    /// A lookup in one namespace. Both reads use one snapshot, so a concurrent rewrite cannot
    /// remove the by_seqno slot between them. The cheap snapshot may catch a commit half
    /// applied (see `consistent_snapshot`); the two indexes then disagree, and the read is
    /// repeated on a snapshot that cannot.
    fn lookup(&self, ns: Namespace, vb: VbId, key: &[u8]) -> Result<Option<ItemRecord>> {
        match self.get_in(&self.db.snapshot(), ns, vb, key)? {
            Lookup::Found(record) => Ok(Some(record)),
            Lookup::Absent => Ok(None),
            Lookup::Torn(_) => match self.get_in(&self.consistent_snapshot(), ns, vb, key)? {
                Lookup::Found(record) => Ok(Some(record)),
                Lookup::Absent => Ok(None),
                Lookup::Torn(why) => Err(StoreError::Corrupt(why)),
            },
        }
    }

    fn lock_writes(&self) -> std::sync::MutexGuard<'_, ()> {
        // The guarded data is `()`: a panic in another writer leaves nothing inconsistent
        // (fjall batches are atomic), so a poisoned mutex is safe to reuse.
        self.write_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// What one snapshot says about a key.
enum Lookup {
    Found(ItemRecord),
    Absent,
    /// The two indexes disagree (why): a half-applied commit, or corruption if it persists.
    Torn(String),
}

impl Store for FjallStore {
    fn commit(&self, batch: &FlushBatch) -> Result<()> {
        let _writer = self.lock_writes();
        self.poison.check()?;
        if batch.is_empty() {
            return Ok(());
        }
        let plan = plan_commit(batch, |ns, dk, hint| self.replaced_seqno(ns, dk, hint))?;
        self.write_durably(self.to_batch(plan))
    }

    fn get(&self, vb: VbId, key: &[u8]) -> Result<Option<ItemRecord>> {
        self.lookup(Namespace::Committed, vb, key)
    }

    fn get_pending(&self, vb: VbId, key: &[u8]) -> Result<Option<ItemRecord>> {
        self.lookup(Namespace::Pending, vb, key)
    }

    fn load_vb_meta(&self) -> Result<Vec<(VbId, VbMeta)>> {
        self.vb_meta
            .iter()
            .map(|guard| {
                let (k, v) = guard.into_inner().map_err(io)?;
                Ok((codec::decode_vb_key(&k)?, codec::decode_vb_meta(&v)?))
            })
            .collect()
    }

    fn scan_vb(&self, vb: VbId) -> RecordIter<'_> {
        let range = codec::seqno_key(vb, Seqno::ZERO)..=codec::seqno_key(vb, Seqno::MAX);
        fjall_scan::records(self.by_seqno.range(range), vb)
    }

    fn keys_with_prefix(
        &self,
        vb: VbId,
        prefix: &[u8],
        limit: usize,
    ) -> Result<Vec<(Bytes, Seqno)>> {
        let mut out = Vec::new();
        for guard in self.by_key.prefix(codec::doc_key(vb, prefix)).take(limit) {
            let (k, v) = guard.into_inner().map_err(io)?;
            let key = k
                .get(2..)
                .ok_or_else(|| StoreError::Corrupt("by_key entry without its vbucket".into()))?;
            out.push((Bytes::copy_from_slice(key), codec::decode_seqno(&v)?));
        }
        Ok(out)
    }

    fn snapshot(&self) -> Box<dyn StoreSnapshot> {
        Box::new(FjallSnapshot {
            snapshot: self.consistent_snapshot(),
            by_seqno: self.by_seqno.clone(),
            vb_meta: self.vb_meta.clone(),
        })
    }

    fn take_clean_shutdown_flag(&self) -> Result<bool> {
        let _writer = self.lock_writes();
        self.poison.check()?;
        let clean = match self.node.get(CLEAN_SHUTDOWN_KEY).map_err(io)? {
            Some(v) if &*v == FLAG_CLEAN => true,
            Some(v) if &*v == FLAG_RUNNING => false,
            Some(v) => {
                return Err(StoreError::Corrupt(format!(
                    "clean-shutdown flag has unexpected value {:?}",
                    &*v
                )))
            }
            // Data but no flag: written without the startup protocol; assume the worst.
            None => self.is_fresh()?,
        };
        self.set_node_flag(FLAG_RUNNING)?;
        Ok(clean)
    }

    fn mark_clean_shutdown(&self) -> Result<()> {
        let _writer = self.lock_writes();
        // A poisoned store lost writes: it must not claim a clean stop.
        self.poison.check()?;
        self.set_node_flag(FLAG_CLEAN)
    }

    fn reset_vb(&self, vb: VbId) -> Result<()> {
        let _writer = self.lock_writes();
        self.poison.check()?;
        let mut batch = self.db.batch();
        let seqnos = codec::seqno_key(vb, Seqno::ZERO)..=codec::seqno_key(vb, Seqno::MAX);
        for kv in self.by_seqno.range(seqnos) {
            batch.remove(&self.by_seqno, kv.key().map_err(io)?);
        }
        for index in [&self.by_key, &self.pending_by_key] {
            for kv in index.prefix(codec::vb_key(vb)) {
                batch.remove(index, kv.key().map_err(io)?);
            }
        }
        batch.remove(&self.vb_meta, codec::vb_key(vb));
        self.write_durably(batch)
    }

    fn disk_bytes(&self) -> u64 {
        // The journal part can fail to be measured (its lock); the tables part cannot.
        self.db.disk_space().unwrap_or_else(|_| {
            [
                &self.by_seqno,
                &self.by_key,
                &self.pending_by_key,
                &self.vb_meta,
                &self.node,
            ]
            .iter()
            .map(|ks| ks.disk_space())
            .sum()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    #[test]
    fn memtables_stay_small_whatever_the_quota() {
        for (quota_mib, memtable_mib) in [(16, 2), (128, 2), (256, 4), (2048, 4), (65536, 4)] {
            let m = StoreMemory::for_quota(quota_mib * MIB);
            assert_eq!(
                m.memtable_bytes,
                memtable_mib * MIB,
                "quota {quota_mib} MiB"
            );
        }
        assert_eq!(StoreMemory::for_quota(2048 * MIB).cache_bytes, 256 * MIB);
        assert_eq!(StoreMemory::for_quota(16 * MIB).cache_bytes, 4 * MIB);
    }

    #[test]
    fn a_store_with_documents_but_no_key_format_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = FjallStore::open(dir.path()).unwrap();
            assert_eq!(
                store.node.get(KEY_FORMAT_KEY).unwrap().as_deref(),
                Some(KEY_FORMAT_COLLECTIONS)
            );
            let mut batch = OwnedWriteBatch::with_capacity(store.db.clone(), 2);
            batch.insert(&store.by_key, codec::doc_key(VbId(0), b"old"), [0u8; 8]);
            batch.remove(&store.node, KEY_FORMAT_KEY);
            store.write_durably(batch).unwrap();
        }
        match FjallStore::open(dir.path()) {
            Err(StoreError::Corrupt(why)) => assert!(why.contains("without collections"), "{why}"),
            Err(e) => panic!("refused for another reason: {e}"),
            Ok(_) => panic!("a store from before collections opened"),
        }
    }
}
