//! [`Bucket`]: the engine's public API. Routes each call to its vbucket, enforces the memory
//! quota and the write-refusal state, and owns the background threads (flusher, pager).

use crate::clock::Clock;
use crate::collections::LiveCollections;
use crate::config::BucketConfig;
use crate::datatype;
use crate::error::EngineError;
use crate::item::{ArithmeticRequest, Document, Mutation, Observed, StoreRequest};
use crate::memory::{Memory, MemorySnapshot};
use crate::signal::Signal;
use crate::stats::BucketStats;
use crate::vb_uuids::VbUuids;
use crate::vbucket::{OpCtx, VBucket, VbInner};
use bytes::Bytes;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};
use sluice_storage::Store;
use sluice_types::{
    Cas, CollectionId, DurabilityLevel, FailoverLog, ItemMeta, Seqno, VbId, VbState, VbUuid,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// See [`Bucket::set_room_listener`].
pub type RoomListener = Box<dyn Fn() + Send + Sync>;

/// GET_META's answer: the metadata of the current version, tombstones included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetMetaResult {
    pub meta: ItemMeta,
}

/// OBSERVE_SEQNO's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObserveSeqnoResult {
    pub vb_uuid: VbUuid,
    pub persisted: Seqno,
    pub current: Seqno,
    /// Set when the client's uuid is an older entry (a failover happened): (uuid, last seqno).
    pub failed_over: Option<(VbUuid, Seqno)>,
}

pub struct Bucket {
    pub config: BucketConfig,
    pub(crate) vbuckets: Box<[VBucket]>,
    pub(crate) memory: Memory,
    pub(crate) store: Option<Arc<dyn Store>>,
    pub(crate) clock: Arc<dyn Clock>,
    pub stats: BucketStats,
    /// Set once a storage commit failed: the bucket refuses writes from then on.
    pub(crate) write_failure: Mutex<Option<String>>,
    pub(crate) writes_refused: AtomicBool,
    pub(crate) flusher_wake: Signal,
    pub(crate) pager_wake: Signal,
    /// Told whenever the flusher or the pager freed memory that refused writes wait for
    /// (see [`Bucket::set_room_listener`]).
    room_listener: std::sync::OnceLock<RoomListener>,
    /// Notified after every successful flush (SEQNO_PERSISTENCE waiters).
    pub(crate) persisted: Signal,
    pub(crate) shutdown: AtomicBool,
    pub(crate) threads: Mutex<Vec<JoinHandle<()>>>,
    /// Tombstone purges found by the pager, committed by the flusher with its next batch.
    pub(crate) pending_purges: Mutex<Vec<(VbId, Bytes, Seqno)>>,
    /// The vbuckets with items or metadata the flusher has not read yet.
    pub(crate) dirty: crate::dirty_vbuckets::DirtyVbuckets,
    /// Held by the flusher for a whole round, and by a vbucket reset.
    pub(crate) flush_lock: Mutex<()>,
    /// DCP producers to wake after a write.
    pub(crate) listeners: crate::listeners::Listeners,
    /// Where new failover-log branches get their uuids (see [`Bucket::open_with_rng`]).
    pub(crate) vb_uuids: Mutex<VbUuids>,
    /// Active vbuckets holding prepares they did not make (promoted, or warmed up), for the
    /// durability monitor to take over ([`Bucket::take_inherited_prepares`]).
    pub(crate) inherited_prepares: Mutex<std::collections::BTreeSet<VbId>>,
    /// See [`Bucket::warmed_up_whole`].
    warmed_up_whole: bool,
    /// The collections that exist (see `collections`); the flusher skips dropped ones.
    pub(crate) live_collections: Mutex<Arc<LiveCollections>>,
    /// Dropped collections whose documents are gone from disk (or were searched for and
    /// queued for the flusher): the sweep does not search again.
    pub(crate) collections_swept_on_disk: Mutex<std::collections::BTreeSet<CollectionId>>,
    /// Set by a new live set: the pager sweeps.
    pub(crate) collection_sweep_wanted: AtomicBool,
}

impl Bucket {
    /// Opens a bucket: warms it up from `store` (a couchbase bucket) or starts empty
    /// (ephemeral, `store == None`), then starts the background threads. Vbucket uuids are
    /// drawn from the OS's randomness.
    pub fn open(
        config: BucketConfig,
        store: Option<Arc<dyn Store>>,
        clock: Arc<dyn Clock>,
    ) -> Result<Arc<Bucket>, EngineError> {
        Bucket::open_with_rng(config, store, clock, StdRng::from_entropy())
    }

    /// [`Bucket::open`], with every vbucket uuid (at warmup, and for each failover-log branch
    /// after) drawn from `rng`: a seeded `rng` makes them the same on every run. Reopening a
    /// data directory with the seed of an earlier open would draw that open's uuids again,
    /// and a new branch would repeat an old uuid: seed each open differently.
    pub fn open_with_rng(
        config: BucketConfig,
        store: Option<Arc<dyn Store>>,
        clock: Arc<dyn Clock>,
        rng: impl RngCore + Send + 'static,
    ) -> Result<Arc<Bucket>, EngineError> {
        assert!(config.num_vbuckets > 0, "a bucket has vbuckets");
        assert_eq!(
            config.is_persistent(),
            store.is_some(),
            "couchbase buckets have a store, ephemeral ones do not"
        );
        let memory = Memory::new(
            config.quota_bytes,
            config.high_watermark,
            config.low_watermark,
            config.checkpoint_share,
        );
        let mut vb_uuids = VbUuids::new(rng);
        let crate::warmup::WarmedUp { vbuckets, whole } =
            crate::warmup::warmup(&config, store.as_deref(), &memory, &mut vb_uuids)?;
        let dirty = crate::dirty_vbuckets::DirtyVbuckets::all_marked(vbuckets.len());
        // Prepares an active vbucket comes back with were made by an earlier life of this
        // node: inherited, like a promoted replica's.
        let inherited = vbuckets
            .iter()
            .filter(|v| {
                let mut inner = v.inner.lock();
                inner.state == VbState::Active && inner.prepares.inherit()
            })
            .map(|v| v.id)
            .collect();
        let bucket = Arc::new(Bucket {
            config,
            vbuckets: vbuckets.into_boxed_slice(),
            memory,
            store,
            clock,
            stats: BucketStats::default(),
            write_failure: Mutex::new(None),
            writes_refused: AtomicBool::new(false),
            flusher_wake: Signal::default(),
            pager_wake: Signal::default(),
            room_listener: std::sync::OnceLock::new(),
            persisted: Signal::default(),
            shutdown: AtomicBool::new(false),
            threads: Mutex::new(Vec::new()),
            pending_purges: Mutex::new(Vec::new()),
            live_collections: Mutex::new(Arc::new(LiveCollections::default())),
            collections_swept_on_disk: Mutex::new(Default::default()),
            collection_sweep_wanted: AtomicBool::new(false),
            listeners: Default::default(),
            flush_lock: Mutex::new(()),
            dirty,
            vb_uuids: Mutex::new(vb_uuids),
            inherited_prepares: Mutex::new(inherited),
            warmed_up_whole: whole,
        });
        let items: usize = bucket
            .vbuckets
            .iter()
            .map(|v| v.inner.lock().documents())
            .sum();
        BucketStats::add(&bucket.stats.items_warmed_up, items as u64);
        let mut threads = Vec::new();
        if bucket.store.is_some() {
            let b = bucket.clone();
            threads.push(spawn("sluice-flusher", move || crate::flusher::run(&b)));
        }
        let b = bucket.clone();
        threads.push(spawn("sluice-pager", move || crate::pager::run(&b)));
        *bucket.threads.lock() = threads;
        Ok(bucket)
    }

    /// Whether warmup brought back everything this bucket held when it last stopped: true
    /// for a couchbase bucket that stopped cleanly, false after a crash (what the flusher had
    /// not written yet is gone) and always for an ephemeral bucket (it keeps nothing). A
    /// cluster member that was not whole must not serve its active vbuckets as they are:
    /// a replica may hold acknowledged writes this copy lost.
    pub fn warmed_up_whole(&self) -> bool {
        self.warmed_up_whole
    }

    /// Stops the background threads, flushes what is dirty and records a clean stop.
    pub fn shutdown(&self) -> Result<(), EngineError> {
        self.shutdown.store(true, Ordering::SeqCst);
        self.flusher_wake.notify();
        self.pager_wake.notify();
        let threads = std::mem::take(&mut *self.threads.lock());
        for t in threads {
            let _ = t.join();
        }
        if let Some(store) = &self.store {
            // The flusher drained everything before it exited, unless storage failed.
            if let Some(reason) = self.write_failure.lock().clone() {
                return Err(EngineError::WritesRefused(reason));
            }
            store
                .mark_clean_shutdown()
                .map_err(|e| EngineError::Storage(e.to_string()))?;
        }
        Ok(())
    }

    pub fn num_vbuckets(&self) -> u16 {
        self.config.num_vbuckets
    }

    pub(crate) fn ctx(&self) -> OpCtx {
        let now_unix_ns = self.clock.now_unix_ns();
        OpCtx {
            now_unix_ns,
            now_unix_s: (now_unix_ns / 1_000_000_000) as u32,
            persistent: self.config.is_persistent(),
            value_bytes_max: self.config.value_bytes_max,
            durability: None,
            cas_salt: self.config.cas_salt,
        }
    }

    fn vb(&self, vb: VbId) -> Result<&VBucket, EngineError> {
        self.vbuckets
            .get(usize::from(vb.0))
            .ok_or(EngineError::NotMyVbucket)
    }

    /// Runs `f` under the vbucket's lock, then books the memory it used.
    pub(crate) fn with_vb<T>(
        &self,
        vb: VbId,
        f: impl FnOnce(&mut VbInner) -> T,
    ) -> Result<T, EngineError> {
        let vbucket = self.vb(vb)?;
        let mut inner = vbucket.inner.lock();
        let high_before = inner.high_seqno;
        let out = f(&mut inner);
        let (mem, ckpt) = inner.take_deltas();
        let changed = inner.high_seqno != high_before;
        // Marked under the lock, after the change: see dirty_vbuckets for why no change is
        // missed. Every path that queues an item moves the high seqno.
        if self.store.is_some() && (changed || inner.meta_dirty) {
            self.dirty.mark(vb);
        }
        drop(inner);
        if changed {
            // Any path that writes (expiry on read included) wakes the streams.
            self.listeners.notify(vb);
        }
        // Reads change nothing: skip the shared counters' cache line entirely.
        if mem != 0 {
            self.memory.add(mem);
        }
        if ckpt != 0 {
            self.memory.add_checkpoint(ckpt);
        }
        Ok(out)
    }

    /// Whether a write of about `incoming` bytes may proceed now.
    pub(crate) fn admit_write(&self, incoming: usize) -> Result<(), EngineError> {
        if self.writes_refused.load(Ordering::Acquire) {
            let reason = self.write_failure.lock().clone().unwrap_or_default();
            return Err(EngineError::WritesRefused(reason));
        }
        let m = &self.memory;
        if crate::checkpoint_recovery::needed(self) {
            self.pager_wake.notify();
        }
        if m.checkpoint_used() > m.checkpoint_bytes_max() {
            // Checkpoints are drained by the flusher: give it a nudge.
            self.flusher_wake.notify();
        } else if self.config.is_persistent() && m.above_high_watermark() {
            self.pager_wake.notify();
        }
        if self.lacks_room_for(incoming) {
            BucketStats::bump(&self.stats.tmp_fails);
            return Err(EngineError::TempFail);
        }
        Ok(())
    }

    /// Whether a write of `incoming` bytes would be refused for want of memory now.
    fn lacks_room_for(&self, incoming: usize) -> bool {
        let m = &self.memory;
        if m.checkpoint_used() > m.checkpoint_bytes_max() {
            true
        } else if self.config.is_persistent() {
            m.would_exceed_quota(incoming)
        } else {
            // Ephemeral: nothing can be evicted, so stop at the high watermark.
            m.used() + incoming as u64 > m.high_watermark_bytes()
        }
    }

    /// Whether a small write would be admitted now, memory-wise: what a write refused with
    /// [`EngineError::TempFail`] checks before it is tried again. No side effects.
    pub fn has_room_for_writes(&self) -> bool {
        !self.lacks_room_for(0)
    }

    /// Registers the one callback told when the flusher or the pager freed memory, so that
    /// writes refused with [`EngineError::TempFail`] can be retried at once instead of on a
    /// timer. It runs on those background threads: it must be cheap and never block. A
    /// second registration is ignored (returns false).
    pub fn set_room_listener(&self, listener: RoomListener) -> bool {
        self.room_listener.set(listener).is_ok()
    }

    /// Whether refused writes may succeed later without anyone deleting anything: the
    /// flusher and the pager free a durable bucket's memory; an ephemeral bucket stays full.
    pub fn frees_room_by_itself(&self) -> bool {
        self.config.is_persistent()
    }

    pub(crate) fn room_freed(&self) {
        if let Some(listener) = self.room_listener.get() {
            listener();
        }
    }

    pub(crate) fn after_write(&self) {
        if self.store.is_some() {
            self.flusher_wake.notify();
        }
    }

    /// Registers a DCP producer to be told about writes until it is dropped.
    pub fn add_change_listener(&self, l: &Arc<dyn crate::listeners::ChangeListener>) {
        self.listeners.add(l);
    }

    pub(crate) fn mutate<T>(
        &self,
        vb: VbId,
        incoming: usize,
        f: impl FnOnce(&mut VbInner, &OpCtx) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        self.admit_write(incoming)?;
        let ctx = self.ctx();
        let out = self.with_vb(vb, |inner| f(inner, &ctx))?;
        if out.is_ok() {
            self.after_write();
        }
        out
    }

    pub fn get(&self, vb: VbId, key: &[u8]) -> Result<Document, EngineError> {
        self.read(vb, key, |meta, value| Document {
            meta: *meta,
            value: value.clone(),
        })
    }

    /// A GET that hands the live document to `f` under the vbucket's lock instead of
    /// returning a copy. `f` must be short: it holds up every other operation on the vbucket.
    pub fn read<R>(
        &self,
        vb: VbId,
        key: &[u8],
        f: impl FnOnce(&ItemMeta, &Bytes) -> R,
    ) -> Result<R, EngineError> {
        BucketStats::bump(&self.stats.cmd_get);
        let ctx = self.ctx();
        let out = self.with_vb(vb, |inner| inner.read(key, &ctx, f))?;
        match &out {
            Ok(_) => BucketStats::bump(&self.stats.get_hits),
            Err(EngineError::KeyNotFound) => BucketStats::bump(&self.stats.get_misses),
            _ => {}
        }
        out
    }

    /// Reads a key's state back from disk (outside every lock) — an evicted value, or the
    /// whole entry when metadata was evicted — so that a retried operation finds it resident.
    pub fn fetch(&self, vb: VbId, key: &[u8]) -> Result<(), EngineError> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        BucketStats::bump(&self.stats.bg_fetches);
        let record = store
            .get(vb, key)
            .map_err(|e| EngineError::Storage(e.to_string()))?;
        self.with_vb(vb, |inner| {
            inner.fetched(key, record.map(|r| (r.meta, r.value)))
        })
    }

    pub fn get_meta(&self, vb: VbId, key: &[u8]) -> Result<GetMetaResult, EngineError> {
        let ctx = self.ctx();
        if let Some(meta) = self.with_vb(vb, |inner| inner.get_meta(key, &ctx))?? {
            return Ok(GetMetaResult { meta });
        }
        // Not in memory: a persisted tombstone, or a document whose metadata was evicted,
        // is on disk only.
        let Some(store) = &self.store else {
            return Err(EngineError::KeyNotFound);
        };
        match store.get(vb, key) {
            Ok(Some(r)) => Ok(GetMetaResult { meta: r.meta }),
            Ok(None) => Err(EngineError::KeyNotFound),
            Err(e) => Err(EngineError::Storage(e.to_string())),
        }
    }

    pub fn store(&self, vb: VbId, req: &StoreRequest<'_>) -> Result<Mutation, EngineError> {
        BucketStats::bump(&self.stats.cmd_set);
        let dt = datatype::classify(req.value, req.datatype, self.config.value_bytes_max)?;
        let out = self.mutate(vb, req.key.len() + req.value.len(), |inner, ctx| {
            let ctx = OpCtx {
                durability: req.durability,
                ..*ctx
            };
            inner.store(req, dt, &ctx)
        });
        self.count_prepare(req.durability, &out);
        if req.cas != Cas::ZERO {
            match &out {
                Ok(_) => BucketStats::bump(&self.stats.cas_hits),
                Err(EngineError::KeyExists) => BucketStats::bump(&self.stats.cas_badval),
                Err(EngineError::KeyNotFound) => BucketStats::bump(&self.stats.cas_misses),
                _ => {}
            }
        }
        out
    }

    /// DELETE; with `durability`, a durable delete (a prepared tombstone).
    pub fn delete(
        &self,
        vb: VbId,
        key: &[u8],
        cas: Cas,
        durability: Option<DurabilityLevel>,
    ) -> Result<Mutation, EngineError> {
        BucketStats::bump(&self.stats.cmd_delete);
        // Deletes free memory: they are admitted even above the quota.
        if self.writes_refused.load(Ordering::Acquire) {
            return Err(EngineError::WritesRefused(
                self.write_failure.lock().clone().unwrap_or_default(),
            ));
        }
        let ctx = OpCtx {
            durability,
            ..self.ctx()
        };
        let out = self.with_vb(vb, |inner| inner.delete(key, cas, &ctx))?;
        self.count_prepare(durability, &out);
        match &out {
            Ok(_) => self.after_write(),
            Err(EngineError::KeyNotFound) => BucketStats::bump(&self.stats.delete_misses),
            _ => {}
        }
        out
    }

    pub fn arithmetic(
        &self,
        vb: VbId,
        req: &ArithmeticRequest<'_>,
    ) -> Result<(u64, Mutation), EngineError> {
        let out = self.mutate(vb, req.key.len() + 20, |inner, ctx| {
            let ctx = OpCtx {
                durability: req.durability,
                ..*ctx
            };
            inner.arithmetic(req, &ctx)
        });
        self.count_prepare(req.durability, &out);
        let (hit, miss) = if req.increment {
            (&self.stats.incr_hits, &self.stats.incr_misses)
        } else {
            (&self.stats.decr_hits, &self.stats.decr_misses)
        };
        match &out {
            Ok(_) => BucketStats::bump(hit),
            Err(EngineError::KeyNotFound) => BucketStats::bump(miss),
            _ => {}
        }
        out
    }

    pub fn concat(
        &self,
        vb: VbId,
        key: &[u8],
        append: bool,
        value: &[u8],
        cas: Cas,
        durability: Option<DurabilityLevel>,
    ) -> Result<Mutation, EngineError> {
        if value.len() > self.config.value_bytes_max {
            return Err(EngineError::TooBig);
        }
        let out = self.mutate(vb, key.len() + value.len(), |inner, ctx| {
            let ctx = OpCtx { durability, ..*ctx };
            inner.concat(key, append, value, cas, &ctx)
        });
        self.count_prepare(durability, &out);
        out
    }

    /// TOUCH / GAT: sets a new expiry and returns the document.
    pub fn touch(
        &self,
        vb: VbId,
        key: &[u8],
        expiry_wire: u32,
    ) -> Result<(Document, Mutation), EngineError> {
        BucketStats::bump(&self.stats.cmd_touch);
        let out = self.mutate(vb, key.len(), |inner, ctx| {
            inner.touch(key, expiry_wire, ctx)
        });
        match &out {
            Ok(_) => BucketStats::bump(&self.stats.touch_hits),
            Err(EngineError::KeyNotFound) => BucketStats::bump(&self.stats.touch_misses),
            _ => {}
        }
        out
    }

    /// GET_LOCKED: the document, locked under a new CAS for `asked_s` seconds (0 or more
    /// than the maximum: the default; see `locks`). Only a write carrying that CAS may
    /// change it until then.
    pub fn get_locked(&self, vb: VbId, key: &[u8], asked_s: u32) -> Result<Document, EngineError> {
        BucketStats::bump(&self.stats.cmd_get);
        let ctx = self.ctx();
        let seconds = crate::locks::Locks::duration(asked_s);
        self.with_vb(vb, |inner| inner.get_locked(key, seconds, &ctx))?
    }

    /// The key's current version, live or deleted (tombstones read back from disk too).
    pub fn read_with_deleted(&self, vb: VbId, key: &[u8]) -> Result<Document, EngineError> {
        BucketStats::bump(&self.stats.cmd_get);
        let ctx = self.ctx();
        if let Some(doc) = self.with_vb(vb, |inner| inner.read_any(key, &ctx))?? {
            return Ok(doc);
        }
        Err(EngineError::KeyNotFound)
    }

    /// OBSERVE (legacy): whether the key's current version is persisted, and its CAS, on
    /// an active or replica vbucket here.
    pub fn observe(&self, vb: VbId, key: &[u8]) -> Result<Observed, EngineError> {
        let in_memory = self.with_vb(vb, |inner| inner.observe_meta(key))??;
        let meta = match (in_memory, &self.store) {
            (Some(m), _) => m,
            // Not in memory: on disk only (evicted metadata, a dropped tombstone), or nowhere.
            (None, Some(store)) => match store.get(vb, key) {
                Ok(Some(r)) => r.meta,
                Ok(None) => return Ok(Observed::NotFound),
                Err(e) => return Err(EngineError::Storage(e.to_string())),
            },
            (None, None) => return Ok(Observed::NotFound),
        };
        let persisted = self.store.is_some() && meta.seqno <= self.vb(vb)?.persisted_seqno();
        Ok(match (meta.deleted, persisted) {
            (false, false) => Observed::NotPersisted(meta.cas),
            (false, true) => Observed::Persisted(meta.cas),
            (true, false) => Observed::Deleted(meta.cas),
            (true, true) => Observed::NotFound,
        })
    }

    /// GET_RANDOM_KEY: a live, resident document of `collection` in an active vbucket,
    /// chosen by `pick` (the caller's randomness: which vbucket to start from, where in it);
    /// KeyNotFound when there is none. The key is the qualified one.
    pub fn random_document(
        &self,
        pick: u64,
        collection: CollectionId,
    ) -> Result<(Bytes, Document), EngineError> {
        let ctx = self.ctx();
        let n = self.num_vbuckets();
        let first = (pick % u64::from(n)) as u16;
        for i in 0..n {
            let vb = VbId((first + i) % n);
            if let Some(found) = self.with_vb(vb, |inner| {
                inner.random_resident(pick >> 16, collection, &ctx)
            })? {
                return Ok(found);
            }
        }
        Err(EngineError::KeyNotFound)
    }

    /// UNLOCK_KEY: releases the lock `cas` names.
    pub fn unlock(&self, vb: VbId, key: &[u8], cas: Cas) -> Result<(), EngineError> {
        let ctx = self.ctx();
        self.with_vb(vb, |inner| inner.unlock(key, cas, &ctx))?
    }

    /// FLUSH: deletes every document (each delete takes a seqno, so streams see it).
    pub fn flush_all(&self) -> Result<usize, EngineError> {
        let ctx = self.ctx();
        let mut n = 0;
        for vb in 0..self.num_vbuckets() {
            self.load_evicted_keys(VbId(vb))?;
            n += self.with_vb(VbId(vb), |inner| {
                if inner.state == VbState::Active {
                    inner.delete_all(&ctx)
                } else {
                    0
                }
            })?;
        }
        self.after_write();
        Ok(n)
    }

    /// Brings every key of `vb` that lives on disk only back into memory (FLUSH must delete
    /// them too). The disk scan runs outside the lock.
    fn load_evicted_keys(&self, vb: VbId) -> Result<(), EngineError> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        if !self.with_vb(vb, |inner| inner.keys_evicted)? {
            return Ok(());
        }
        let mut live = Vec::new();
        for record in store.scan_vb(vb) {
            let r = record.map_err(|e| EngineError::Storage(e.to_string()))?;
            // Prepares and aborts are not documents.
            if !r.meta.deleted && r.kind == sluice_storage::RecordKind::Committed {
                live.push((r.key, r.meta));
            }
        }
        self.with_vb(vb, |inner| {
            for (key, meta) in live {
                inner.insert_metadata(&key, meta);
            }
        })
    }

    /// (vb, high seqno) for every vbucket in `state` (None = any alive state).
    pub fn vb_seqnos(&self, state: Option<VbState>) -> Vec<(VbId, Seqno)> {
        self.vb_seqnos_of(state, |inner| inner.high_seqno)
    }

    /// [`Self::vb_seqnos`] with each vbucket's max visible seqno: where a consumer that
    /// sees no prepares or aborts is up to date.
    pub fn vb_visible_seqnos(&self, state: Option<VbState>) -> Vec<(VbId, Seqno)> {
        self.vb_seqnos_of(state, |inner| inner.max_visible_seqno)
    }

    /// `pick` of every vbucket in `state` (`None`: every vbucket but dead ones).
    fn vb_seqnos_of(
        &self,
        state: Option<VbState>,
        pick: impl Fn(&VbInner) -> Seqno,
    ) -> Vec<(VbId, Seqno)> {
        self.vbuckets
            .iter()
            .filter_map(|v| {
                let inner = v.inner.lock();
                let alive = inner.state != VbState::Dead;
                let wanted = state.map_or(alive, |s| inner.state == s);
                wanted.then(|| (v.id, pick(&inner)))
            })
            .collect()
    }

    /// The uuid of the vbucket's current history branch (its newest failover-log entry).
    pub fn vb_uuid(&self, vb: VbId) -> Result<VbUuid, EngineError> {
        self.with_vb(vb, |inner| inner.failover.latest().uuid)
    }

    /// A vbucket's state and high seqno, read together.
    pub fn vb_state_and_high(&self, vb: VbId) -> Result<(VbState, Seqno), EngineError> {
        self.with_vb(vb, |inner| (inner.state, inner.high_seqno))
    }

    pub fn vb_state(&self, vb: VbId) -> Result<VbState, EngineError> {
        self.with_vb(vb, |inner| inner.state)
    }

    pub fn failover_log(&self, vb: VbId) -> Result<FailoverLog, EngineError> {
        self.with_vb(vb, |inner| inner.failover.clone())
    }

    pub fn observe_seqno(&self, vb: VbId, uuid: VbUuid) -> Result<ObserveSeqnoResult, EngineError> {
        let persisted = self.vb(vb)?.persisted_seqno();
        self.with_vb(vb, |inner| {
            let entries = inner.failover.entries();
            let latest = entries[0];
            let pos = entries
                .iter()
                .position(|e| e.uuid == uuid)
                .ok_or(EngineError::UnknownUuid)?;
            let failed_over = (pos > 0).then(|| (uuid, entries[pos - 1].seqno));
            Ok(ObserveSeqnoResult {
                vb_uuid: latest.uuid,
                persisted: if self.store.is_some() {
                    persisted
                } else {
                    inner.high_seqno
                },
                current: inner.high_seqno,
                failed_over,
            })
        })?
    }

    /// Waits until `seqno` of `vb` is persisted, at most `timeout`. Blocking: call it from
    /// a thread that may block.
    pub fn wait_persisted(
        &self,
        vb: VbId,
        seqno: Seqno,
        timeout: Duration,
    ) -> Result<bool, EngineError> {
        let vbucket = self.vb(vb)?;
        if self.store.is_none() {
            return Ok(true);
        }
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if vbucket.persisted_seqno() >= seqno {
                return Ok(true);
            }
            if self.writes_refused.load(Ordering::Acquire) {
                return Err(EngineError::WritesRefused(
                    self.write_failure.lock().clone().unwrap_or_default(),
                ));
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            self.flusher_wake.notify();
            self.persisted
                .wait_timeout((deadline - now).min(Duration::from_millis(50)));
        }
    }

    pub fn persisted_seqno(&self, vb: VbId) -> Result<Seqno, EngineError> {
        Ok(self.vb(vb)?.persisted_seqno())
    }

    pub fn memory(&self) -> MemorySnapshot {
        self.memory.snapshot()
    }

    /// Changes the memory quota while the bucket serves (an administrator's edit). A smaller
    /// one wakes the pager, which evicts down to the new watermarks; writes are refused
    /// meanwhile as they would be at the old quota's limits. The storage engine's caches keep
    /// the size they were opened with.
    pub fn set_quota(&self, quota_bytes: u64) {
        let before = self.memory.quota_bytes();
        self.memory.set_quota(quota_bytes);
        tracing::info!(bucket = %self.config.name, before, quota_bytes, "memory quota changed");
        if quota_bytes < before {
            self.pager_wake.notify();
        }
        if let Some(listener) = self.room_listener.get() {
            listener();
        }
    }

    /// Why writes are refused, if they are.
    pub fn write_failure(&self) -> Option<String> {
        self.write_failure.lock().clone()
    }

    /// Bucket-wide gauges: (name, value), for STAT and metrics.
    pub fn gauges(&self) -> Vec<(&'static str, u64)> {
        let mut items = 0;
        let mut resident = 0;
        let mut in_memory = 0;
        let mut dirty_queue = 0;
        let mut checkpoints = 0;
        let mut active = 0;
        let mut keys_evicted = 0;
        for v in self.vbuckets.iter() {
            let inner = v.inner.lock();
            items += inner.documents();
            resident += inner.ht.resident_values();
            in_memory += inner.ht.len();
            checkpoints += inner.checkpoints.num_checkpoints();
            if inner.state == VbState::Active {
                active += 1;
            }
            if inner.keys_evicted {
                keys_evicted += 1;
            }
            if let Some(c) = inner.flusher_cursor {
                dirty_queue += inner.checkpoints.items_remaining(c);
            }
        }
        let m = self.memory.snapshot();
        let resident_ratio_pct = (resident * 100).checked_div(items).unwrap_or(100);
        vec![
            ("curr_items", items as u64),
            ("vb_active_num", active),
            ("ep_num_non_resident", (items - resident.min(items)) as u64),
            ("vb_active_perc_mem_resident", resident_ratio_pct as u64),
            ("ep_ht_entries", in_memory as u64),
            ("ep_vbuckets_metadata_evicted", keys_evicted),
            ("ep_diskqueue_items", dirty_queue as u64),
            ("ep_num_checkpoints", checkpoints as u64),
            ("mem_used", m.used_bytes),
            ("ep_max_size", m.quota_bytes),
            ("ep_mem_high_wat", m.high_watermark_bytes),
            ("ep_mem_low_wat", m.low_watermark_bytes),
            ("ep_checkpoint_memory", m.checkpoint_bytes),
            ("ep_checkpoint_memory_quota", m.checkpoint_bytes_max),
            (
                "ep_db_data_size",
                self.store.as_ref().map_or(0, |s| s.disk_bytes()),
            ),
            (
                "ep_write_failed",
                u64::from(self.writes_refused.load(Ordering::Relaxed)),
            ),
        ]
    }

    /// Per-vbucket details for `STAT vbucket-seqno` and friends.
    pub fn vb_details(&self) -> Vec<VbDetails> {
        self.vbuckets
            .iter()
            .map(|v| {
                let inner = v.inner.lock();
                VbDetails {
                    vb: v.id,
                    state: inner.state,
                    high_seqno: inner.high_seqno,
                    persisted_seqno: if self.store.is_some() {
                        v.persisted_seqno()
                    } else {
                        inner.high_seqno
                    },
                    purge_seqno: inner.purge_seqno,
                    uuid: inner.failover.latest().uuid,
                    items: inner.documents(),
                    failover_log: inner.failover.clone(),
                    high_prepared_seqno: inner.prepares.high_prepared_seqno(),
                    high_completed_seqno: inner.prepares.high_completed_seqno(),
                    sync_writes_pending: inner.prepares.len(),
                    sync_writes_pending_bytes: inner.prepares.mem_bytes(),
                }
            })
            .collect()
    }
}

/// One vbucket's state for stats.
#[derive(Debug, Clone)]
pub struct VbDetails {
    pub vb: VbId,
    pub state: VbState,
    pub high_seqno: Seqno,
    pub persisted_seqno: Seqno,
    pub purge_seqno: Seqno,
    pub uuid: VbUuid,
    pub items: usize,
    pub failover_log: FailoverLog,
    /// SyncWrites: the highest prepare seqno received or made, and the highest completed.
    pub high_prepared_seqno: Seqno,
    pub high_completed_seqno: Seqno,
    /// Prepares pending, and the memory they hold.
    pub sync_writes_pending: usize,
    pub sync_writes_pending_bytes: usize,
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(f)
        .expect("the OS can start a thread")
}

impl Drop for Bucket {
    fn drop(&mut self) {
        self.shutdown.store(true, Ordering::SeqCst);
    }
}
