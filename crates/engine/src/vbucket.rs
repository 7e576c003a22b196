//! One vbucket: state, hash table, seqnos, CAS clock, failover log and checkpoints, with the
//! rules every mutation follows. All of it sits behind one mutex (in [`VBucket`]); callers
//! hold it only for in-memory work.

use crate::checkpoint::{CheckpointManager, CursorId, QueueOp, QueuedItem};
use crate::collections::CollectionCounts;
use crate::collections::LiveCollections;
use crate::datatype;
use crate::error::EngineError;
use crate::hash_table::{HashTable, StoredValue};
use crate::hlc::Hlc;
use crate::item::{ArithmeticRequest, Document, Mutation, StoreKind, StoreRequest};
use crate::locks::Locks;
use crate::prepares::{Prepare, Prepares, SnapshotKind};
use crate::system_events::{self, is_system_key, SystemEvent};
use bytes::Bytes;
use parking_lot::Mutex;
use sluice_types::{
    Cas, Datatype, DurabilityLevel, Expiry, FailoverLog, ItemMeta, Seqno, VbId, VbState,
};
use std::sync::atomic::{AtomicU64, Ordering};

/// Per-operation facts that come from outside the vbucket.
#[derive(Debug, Clone, Copy)]
pub struct OpCtx {
    pub now_unix_ns: u64,
    pub now_unix_s: u32,
    /// Couchbase bucket: new versions are dirty until the flusher persists them.
    pub persistent: bool,
    pub value_bytes_max: usize,
    /// A durable write: the mutation becomes a prepare at this level (see `prepares`).
    pub durability: Option<DurabilityLevel>,
    /// What this node's CAS values end in (`hlc`).
    pub cas_salt: u16,
}

pub struct VBucket {
    pub id: VbId,
    pub inner: Mutex<VbInner>,
    /// Highest seqno the flusher has made durable (read without the lock).
    pub persisted_seqno: AtomicU64,
}

impl VBucket {
    pub fn new(id: VbId, inner: VbInner) -> VBucket {
        let persisted = inner.high_seqno.0;
        VBucket {
            id,
            inner: Mutex::new(inner),
            persisted_seqno: AtomicU64::new(persisted),
        }
    }

    pub fn persisted_seqno(&self) -> Seqno {
        Seqno(self.persisted_seqno.load(Ordering::Acquire))
    }
}

pub struct VbInner {
    pub id: VbId,
    pub state: VbState,
    pub ht: HashTable,
    pub high_seqno: Seqno,
    /// The seqno of the newest change a consumer without sync writes sees (a mutation,
    /// deletion, expiration or commit); above it are only prepares and aborts. What
    /// GET_ALL_VB_SEQNOS answers such a client, as Couchbase does.
    pub max_visible_seqno: Seqno,
    /// The newest prepare completed by a change the flusher has handed to storage: the
    /// high completed seqno written with the vbucket's metadata, which disk snapshots
    /// carry. Never above the in-memory one (`prepares`), which counts completions not yet
    /// flushed.
    pub flushed_high_completed: Seqno,
    pub purge_seqno: Seqno,
    pub failover: FailoverLog,
    pub hlc: Hlc,
    pub checkpoints: CheckpointManager,
    pub flusher_cursor: Option<CursorId>,
    /// Highest rev seqno of a tombstone dropped from memory, so a re-created key continues
    /// its revision history.
    pub max_deleted_rev: u64,
    /// State or failover log changed since the flusher last persisted vb_meta.
    pub meta_dirty: bool,
    /// Some clean items were dropped from memory entirely (metadata too), or never loaded at
    /// warmup: a key missing from the hash table may still exist on disk, so a miss must be
    /// answered by a disk read first ([`EngineError::NeedsFetch`]).
    pub keys_evicted: bool,
    /// Some persisted tombstone is on disk with no entry in the hash table (dropped once
    /// persisted, or not loaded at warmup). While neither this nor `keys_evicted` is set,
    /// memory has an entry for every key on disk, so an entry with no on-disk seqno has
    /// nothing on disk: the flusher says so and storage skips the by_key read for a new key.
    pub tombstones_only_on_disk: bool,
    /// Live documents, resident or not (the hash table may hold fewer).
    pub num_items: usize,
    /// Of those, the ones of each collection other than `_default`.
    pub collection_items: CollectionCounts,
    /// Memory deltas since the bucket last collected them (hash table, checkpoints).
    pub mem_delta: isize,
    pub checkpoint_delta: isize,
    /// Replicas: the producer's last snapshot marker (start, end).
    pub replica_snapshot: (Seqno, Seqno),
    /// Replicas: whether that snapshot came from the producer's disk (deduplicated).
    pub replica_snapshot_kind: SnapshotKind,
    /// Pending SyncWrites (never in `ht`: readers see committed versions only).
    pub prepares: Prepares,
    /// Documents locked by GET_LOCKED (active only, in memory only).
    pub locks: Locks,
}

/// A new version to write, before seqno, CAS and rev are assigned.
struct NewVersion {
    flags: u32,
    expiry: Expiry,
    datatype: Datatype,
    value: Bytes,
    deleted: bool,
    op: QueueOp,
    /// A commit keeps its prepare's CAS, a version made elsewhere (`*_WITH_META`) its own;
    /// everything else takes a new one.
    cas: Option<Cas>,
    /// A version made elsewhere keeps its revision; everything else counts one more than
    /// the key's last.
    rev_seqno: Option<u64>,
}

/// How a stored version reached its state: deletions and expirations are told apart by the
/// tombstone's expiry (see `write_tombstone`).
pub fn tombstone_op(meta: &ItemMeta) -> QueueOp {
    match (meta.deleted, meta.expiry) {
        (false, _) => QueueOp::Mutation,
        (true, Expiry::NEVER) => QueueOp::Deletion,
        (true, _) => QueueOp::Expiration,
    }
}

impl VbInner {
    pub fn new(
        id: VbId,
        state: VbState,
        failover: FailoverLog,
        high_seqno: Seqno,
        max_cas: u64,
        checkpoint_items_max: usize,
    ) -> VbInner {
        VbInner {
            id,
            state,
            ht: HashTable::default(),
            high_seqno,
            // Warmup reads the real one from the records; a new vbucket has none.
            max_visible_seqno: high_seqno,
            flushed_high_completed: Seqno::ZERO,
            purge_seqno: Seqno::ZERO,
            failover,
            hlc: Hlc::starting_after(max_cas),
            checkpoints: CheckpointManager::new(high_seqno, checkpoint_items_max),
            flusher_cursor: None,
            max_deleted_rev: 0,
            meta_dirty: false,
            keys_evicted: false,
            tombstones_only_on_disk: false,
            num_items: 0,
            collection_items: CollectionCounts::default(),
            mem_delta: 0,
            checkpoint_delta: 0,
            replica_snapshot: (Seqno::ZERO, Seqno::ZERO),
            replica_snapshot_kind: SnapshotKind::Memory,
            prepares: Prepares::default(),
            locks: Locks::default(),
        }
    }

    pub fn take_deltas(&mut self) -> (isize, isize) {
        (
            std::mem::take(&mut self.mem_delta),
            std::mem::take(&mut self.checkpoint_delta),
        )
    }

    fn require_active(&self) -> Result<(), EngineError> {
        if self.state == VbState::Active {
            Ok(())
        } else {
            Err(EngineError::NotMyVbucket)
        }
    }

    /// A write of `key` while a SyncWrite of it is pending would race its commit: refused
    /// (retryable) until it completes.
    fn require_not_pending(&self, key: &[u8]) -> Result<(), EngineError> {
        match self.prepares.get(key) {
            Some(p) if p.maybe_visible => Err(EngineError::SyncWriteReCommitInProgress),
            Some(_) => Err(EngineError::SyncWriteInProgress),
            None => Ok(()),
        }
    }

    /// A read of `key` must not show the committed value while an inherited prepare of it
    /// may already have been acknowledged (see `Prepare::maybe_visible`).
    fn require_readable(&self, key: &[u8]) -> Result<(), EngineError> {
        match self.prepares.get(key) {
            Some(p) if p.maybe_visible => Err(EngineError::SyncWriteReCommitInProgress),
            _ => Ok(()),
        }
    }

    /// The key's live version's metadata, with one probe of the table. Expires it first if
    /// its time has passed (then it is not live). When metadata was evicted and the key is not
    /// in memory, its state is on disk only: `NeedsFetch`.
    fn live_meta(&mut self, key: &[u8], ctx: &OpCtx) -> Result<Option<ItemMeta>, EngineError> {
        let meta = match self.ht.get(key) {
            None if self.keys_evicted => return Err(EngineError::NeedsFetch),
            None => return Ok(None),
            Some(sv) if sv.meta.deleted => return Ok(None),
            Some(sv) => sv.meta,
        };
        if meta.expiry.is_expired(ctx.now_unix_s) {
            self.expire(key, ctx);
            return Ok(None);
        }
        Ok(Some(meta))
    }

    /// The key's current version's metadata, live or a tombstone (an access-deleted
    /// write). `NeedsFetch` when memory holds nothing of the key but the disk may (metadata
    /// evicted, or tombstones kept on disk only).
    fn current_meta(&mut self, key: &[u8], ctx: &OpCtx) -> Result<Option<ItemMeta>, EngineError> {
        if let Some(live) = self.live_meta(key, ctx)? {
            return Ok(Some(live));
        }
        match self.ht.get(key) {
            None if self.tombstones_only_on_disk => Err(EngineError::NeedsFetch),
            None => Ok(None),
            // The placeholder a disk read that found nothing leaves.
            Some(sv) if sv.meta.seqno == Seqno::ZERO => Ok(None),
            Some(sv) => Ok(Some(sv.meta)),
        }
    }

    /// Like [`Self::live_meta`], with the value (`NeedsFetch` if it is evicted).
    fn live_value(
        &mut self,
        key: &[u8],
        ctx: &OpCtx,
    ) -> Result<Option<(ItemMeta, Bytes)>, EngineError> {
        let Some(meta) = self.live_meta(key, ctx)? else {
            return Ok(None);
        };
        let sv = self.ht.get(key).expect("live_meta found it");
        let value = sv.value.clone().ok_or(EngineError::NeedsFetch)?;
        Ok(Some((meta, value)))
    }

    /// Assigns seqno, CAS and rev to a new version, stores it and queues it.
    fn write(&mut self, key: &[u8], v: NewVersion, ctx: &OpCtx) -> Mutation {
        // Only the holder (or an expiry) gets here for a locked key: the lock is over.
        self.locks.release(key);
        let seqno = self.high_seqno.next();
        self.high_seqno = seqno;
        // Every version written here is visible (prepares and aborts have their own paths).
        debug_assert!(v.op.visible(), "{:?} written as a visible version", v.op);
        self.max_visible_seqno = seqno;
        let cas = v
            .cas
            .unwrap_or_else(|| self.hlc.next(ctx.now_unix_ns, ctx.cas_salt));
        // Local CAS values stay above every CAS stored here, whoever made it.
        self.hlc.observe(cas.0);
        let mut meta = ItemMeta {
            seqno,
            rev_seqno: 0,
            cas,
            flags: v.flags,
            expiry: v.expiry,
            datatype: v.datatype,
            deleted: v.deleted,
            delete_time: if v.deleted { ctx.now_unix_s } else { 0 },
        };
        // System event records never leave memory: absent here, absent on disk.
        let keys_evicted = self.keys_evicted && !is_system_key(key);
        let max_deleted_rev = self.max_deleted_rev;
        let mut was_live = false;
        let mut had_entry = false;
        self.mem_delta += self.ht.replace_with(key, |old| {
            assert!(
                old.is_some() || !keys_evicted,
                "a non-resident key is read from disk before it is written"
            );
            meta.rev_seqno = v
                .rev_seqno
                .unwrap_or_else(|| old.map_or(max_deleted_rev, |o| o.meta.rev_seqno) + 1);
            was_live = old.is_some_and(|o| !o.meta.deleted);
            had_entry = old.is_some();
            StoredValue {
                meta,
                value: Some(v.value.clone()),
                dirty: ctx.persistent,
                referenced: true,
                disk_seqno: Seqno::ZERO,
            }
        });
        match (was_live, v.deleted) {
            (false, false) => {
                self.num_items += 1;
                self.collection_items.add(key, 1);
            }
            (true, true) => {
                self.num_items -= 1;
                self.collection_items.add(key, -1);
            }
            _ => {}
        }
        // No entry, every key on disk has one (`keys_evicted` is false, asserted above) and
        // no persisted tombstone lacks one: the disk has nothing of the key. It keeps having
        // nothing older than this version until this version's batch: only this version and
        // newer ones of the key are ever committed from here, and the flags only turn on for
        // clean (persisted) entries.
        let first_version = !had_entry && !self.tombstones_only_on_disk;
        self.queue_or_skip(QueuedItem {
            key: Bytes::copy_from_slice(key),
            meta,
            value: v.value,
            op: v.op,
            first_version,
        });
        Mutation {
            cas,
            seqno,
            vb_uuid: self.failover.latest().uuid,
        }
    }

    /// A mutation from a client: a committed version, or with durability a prepare.
    fn write_or_prepare(&mut self, key: &[u8], v: NewVersion, ctx: &OpCtx) -> Mutation {
        match ctx.durability {
            None => self.write(key, v, ctx),
            Some(level) => self.prepare(key, v, level, ctx),
        }
    }

    /// Records `v` as a prepare: a seqno, CAS and rev of its own, queued for streams and the
    /// flusher, invisible to readers until [`Self::commit`].
    fn prepare(
        &mut self,
        key: &[u8],
        v: NewVersion,
        level: DurabilityLevel,
        ctx: &OpCtx,
    ) -> Mutation {
        let seqno = self.high_seqno.next();
        self.high_seqno = seqno;
        let cas = self.hlc.next(ctx.now_unix_ns, ctx.cas_salt);
        let rev_seqno = self
            .ht
            .get(key)
            .map_or(self.max_deleted_rev, |sv| sv.meta.rev_seqno)
            + 1;
        let meta = ItemMeta {
            seqno,
            rev_seqno,
            cas,
            flags: v.flags,
            expiry: v.expiry,
            datatype: v.datatype,
            deleted: v.deleted,
            delete_time: if v.deleted { ctx.now_unix_s } else { 0 },
        };
        let key = Bytes::copy_from_slice(key);
        let p = Prepare {
            meta,
            value: v.value.clone(),
            level,
            maybe_visible: false,
        };
        self.mem_delta += self.prepares.insert(key.clone(), p);
        self.queue_or_skip(QueuedItem {
            key,
            meta,
            value: v.value,
            op: QueueOp::Prepare(level),
            first_version: false,
        });
        Mutation {
            cas,
            seqno,
            vb_uuid: self.failover.latest().uuid,
        }
    }

    /// Commits the pending prepare at `prepared`: its version becomes the key's committed
    /// one, at a new seqno, keeping the prepare's CAS.
    pub fn commit(&mut self, prepared: Seqno, ctx: &OpCtx) -> Result<Mutation, EngineError> {
        let (key, p) = self.take_prepare(prepared)?;
        let v = NewVersion {
            flags: p.meta.flags,
            expiry: p.meta.expiry,
            datatype: p.meta.datatype,
            value: p.value,
            deleted: p.meta.deleted,
            op: QueueOp::Commit { prepared },
            cas: Some(p.meta.cas),
            rev_seqno: None,
        };
        Ok(self.write(&key, v, ctx))
    }

    /// Aborts the pending prepare at `prepared`: the key's committed version stays; the
    /// abort takes a seqno so that streams and the disk learn of it.
    pub fn abort(&mut self, prepared: Seqno) -> Result<Seqno, EngineError> {
        let (key, p) = self.take_prepare(prepared)?;
        let seqno = self.high_seqno.next();
        self.high_seqno = seqno;
        let meta = ItemMeta {
            seqno,
            rev_seqno: p.meta.rev_seqno,
            cas: p.meta.cas,
            deleted: true,
            ..ItemMeta::default()
        };
        self.queue_or_skip(QueuedItem {
            key,
            meta,
            value: Bytes::new(),
            op: QueueOp::Abort { prepared },
            first_version: false,
        });
        Ok(seqno)
    }

    /// Removes the pending prepare at `prepared` of this active vbucket, for its commit or
    /// abort.
    fn take_prepare(&mut self, prepared: Seqno) -> Result<(Bytes, Prepare), EngineError> {
        self.require_active()?;
        let missing = EngineError::NoSuchPrepare(prepared);
        let key = self
            .prepares
            .key_at(prepared)
            .cloned()
            .ok_or(missing.clone())?;
        let (p, delta) = self.prepares.complete(&key, prepared).ok_or(missing)?;
        self.mem_delta += delta;
        Ok((key, p))
    }

    /// Queues an item for the checkpoints' readers, or moves past its seqno when nobody
    /// will read it.
    pub(crate) fn queue_or_skip(&mut self, item: QueuedItem) {
        if self.checkpoints.has_readers() {
            self.checkpoint_delta += self.checkpoints.queue(item);
        } else {
            self.checkpoints.skip(item.meta.seqno);
        }
    }

    /// Expires a key whose time has passed, unless a SyncWrite of it is pending (its
    /// outcome decides; a committed write in between would contradict the prepare that
    /// replicas hold).
    fn expire(&mut self, key: &[u8], ctx: &OpCtx) {
        if self.prepares.get(key).is_none() {
            self.write_tombstone(key, ctx, QueueOp::Expiration);
        }
    }

    /// A tombstone records how the document went: an expiration keeps the expiry that
    /// passed (non-zero), a deletion has none. DCP backfills read it back from disk to send
    /// EXPIRATION rather than DELETION ([`tombstone_op`]).
    fn write_tombstone(&mut self, key: &[u8], ctx: &OpCtx, op: QueueOp) -> Mutation {
        let expiry = match op {
            QueueOp::Expiration => self
                .ht
                .get(key)
                .map_or(Expiry::NEVER, |sv| sv.meta.expiry)
                .max(Expiry(1)),
            _ => Expiry::NEVER,
        };
        let (value, datatype) = self.tombstone_value(key);
        self.write(
            key,
            NewVersion {
                flags: 0,
                expiry,
                datatype,
                value,
                deleted: true,
                op,
                cas: None,
                rev_seqno: None,
            },
            ctx,
        )
    }

    /// What a tombstone of `key` keeps: the system xattrs of its current version (those
    /// starting with `_`), as Couchbase keeps them for the applications that track deleted
    /// documents. Nothing when the version has none, or when its value is not in memory (an
    /// evicted document that expires loses them: see the README).
    fn tombstone_value(&self, key: &[u8]) -> (Bytes, Datatype) {
        let none = (Bytes::new(), Datatype::RAW);
        let Some(sv) = self.ht.get(key) else {
            return none;
        };
        let (Some(value), true) = (&sv.value, sv.meta.datatype.is_xattr()) else {
            return none;
        };
        let inflated;
        let value: &[u8] = match sv.meta.datatype.is_snappy() {
            true => match datatype::inflate(value) {
                Ok(v) => {
                    inflated = v;
                    &inflated
                }
                Err(_) => return none,
            },
            false => value,
        };
        let kept = sluice_subdoc::xattr::body_offset(value)
            .ok()
            .and_then(|end| sluice_subdoc::Xattrs::decode(&value[..end]).ok())
            .map(|x| x.system_only().encode())
            .unwrap_or_default();
        match kept.is_empty() {
            true => none,
            false => (Bytes::from(kept), Datatype(Datatype::XATTR)),
        }
    }

    /// `datatype` is what [`datatype::classify`] decided for the value.
    pub fn store(
        &mut self,
        req: &StoreRequest<'_>,
        datatype: Datatype,
        ctx: &OpCtx,
    ) -> Result<Mutation, EngineError> {
        self.require_active()?;
        self.require_not_pending(req.key)?;
        let current = match req.access_deleted {
            true => self.current_meta(req.key, ctx)?,
            false => self.live_meta(req.key, ctx)?,
        };
        let cas = match current {
            Some(m) if !m.deleted => self.locks.admit(req.key, req.cas, ctx.now_unix_s)?,
            _ => req.cas,
        };
        match (req.kind, current) {
            (StoreKind::Add, Some(_)) => return Err(EngineError::KeyExists),
            (StoreKind::Replace, None) => return Err(EngineError::KeyNotFound),
            (_, None) if cas != Cas::ZERO => return Err(EngineError::KeyNotFound),
            (_, Some(m)) if cas != Cas::ZERO && m.cas != cas => return Err(EngineError::KeyExists),
            _ => {}
        }
        // A tombstone has no expiry to keep or to set: a non-zero one would make it read as
        // an expiration (`tombstone_op`).
        let expiry = match current {
            _ if req.store_deleted => Expiry::NEVER,
            Some(m) if req.preserve_ttl && !m.deleted => m.expiry,
            _ => Expiry::from_wire(req.expiry_wire, ctx.now_unix_s),
        };
        // Macros take the CAS and seqno the write below will get: nothing else can take
        // them in between, under this vbucket's lock.
        let (value, expected) = if req.macros.is_empty() {
            (Bytes::copy_from_slice(req.value), None)
        } else {
            let cas = {
                let mut h = self.hlc;
                h.next(ctx.now_unix_ns, ctx.cas_salt)
            };
            let seqno = self.high_seqno.next();
            let mut v = req.value.to_vec();
            crate::item::fill_macros(&mut v, req.macros, cas, seqno);
            (Bytes::from(v), Some((cas, seqno)))
        };
        let m = self.write_or_prepare(
            req.key,
            NewVersion {
                flags: req.flags,
                expiry,
                datatype,
                value,
                deleted: req.store_deleted,
                op: match req.store_deleted {
                    true => QueueOp::Deletion,
                    false => QueueOp::Mutation,
                },
                cas: None,
                rev_seqno: None,
            },
            ctx,
        );
        if let Some(expected) = expected {
            assert_eq!(
                (m.cas, m.seqno),
                expected,
                "macros took another CAS or seqno"
            );
        }
        Ok(m)
    }

    pub fn delete(&mut self, key: &[u8], cas: Cas, ctx: &OpCtx) -> Result<Mutation, EngineError> {
        self.require_active()?;
        self.require_not_pending(key)?;
        let live = self.live_meta(key, ctx)?.ok_or(EngineError::KeyNotFound)?;
        let cas = self.locks.admit(key, cas, ctx.now_unix_s)?;
        if cas != Cas::ZERO && live.cas != cas {
            return Err(EngineError::KeyExists);
        }
        // The tombstone keeps the system xattrs, so their value must be in memory.
        if live.datatype.is_xattr() && self.ht.get(key).is_some_and(|sv| sv.value.is_none()) {
            return Err(EngineError::NeedsFetch);
        }
        if ctx.durability.is_none() {
            return Ok(self.write_tombstone(key, ctx, QueueOp::Deletion));
        }
        let (value, datatype) = self.tombstone_value(key);
        Ok(self.write_or_prepare(
            key,
            NewVersion {
                flags: 0,
                expiry: Expiry::NEVER,
                datatype,
                value,
                deleted: true,
                op: QueueOp::Deletion,
                cas: None,
                rev_seqno: None,
            },
            ctx,
        ))
    }

    /// The live value as plain bytes (inflated if stored compressed), or `NeedsFetch`.
    fn live_body(
        &mut self,
        key: &[u8],
        ctx: &OpCtx,
    ) -> Result<Option<(ItemMeta, Bytes)>, EngineError> {
        let Some((meta, value)) = self.live_value(key, ctx)? else {
            return Ok(None);
        };
        let value = if meta.datatype.is_snappy() {
            Bytes::from(datatype::inflate(&value)?)
        } else {
            value
        };
        Ok(Some((meta, value)))
    }

    pub fn arithmetic(
        &mut self,
        req: &ArithmeticRequest<'_>,
        ctx: &OpCtx,
    ) -> Result<(u64, Mutation), EngineError> {
        let ArithmeticRequest {
            key,
            increment,
            delta,
            initial,
            expiry_wire,
            cas,
            durability: _,
        } = *req;
        self.require_active()?;
        self.require_not_pending(key)?;
        // The counter is the body; an xattr section stays in front of it.
        let (new_value, flags, expiry, section) = match self.live_body(key, ctx)? {
            None if expiry_wire == u32::MAX || cas != Cas::ZERO => {
                return Err(EngineError::KeyNotFound)
            }
            None => (
                initial,
                0,
                Expiry::from_wire(expiry_wire, ctx.now_unix_s),
                Vec::new(),
            ),
            Some((meta, value)) => {
                let cas = self.locks.admit(key, cas, ctx.now_unix_s)?;
                if cas != Cas::ZERO && meta.cas != cas {
                    return Err(EngineError::KeyExists);
                }
                let (section, body) = datatype::split_xattrs(meta.datatype, &value);
                let current = parse_counter(body).ok_or(EngineError::DeltaBadValue)?;
                let next = if increment {
                    current.wrapping_add(delta)
                } else {
                    current.saturating_sub(delta)
                };
                (next, meta.flags, meta.expiry, section.to_vec())
            }
        };
        let datatype = match section.is_empty() {
            true => Datatype(Datatype::JSON),
            false => Datatype(Datatype::JSON | Datatype::XATTR),
        };
        let mut value = section;
        value.extend_from_slice(new_value.to_string().as_bytes());
        let m = self.write_or_prepare(
            key,
            NewVersion {
                flags,
                expiry,
                datatype,
                value: Bytes::from(value),
                deleted: false,
                op: QueueOp::Mutation,
                cas: None,
                rev_seqno: None,
            },
            ctx,
        );
        Ok((new_value, m))
    }

    pub fn concat(
        &mut self,
        key: &[u8],
        append: bool,
        extra: &[u8],
        cas: Cas,
        ctx: &OpCtx,
    ) -> Result<Mutation, EngineError> {
        self.require_active()?;
        self.require_not_pending(key)?;
        let (meta, value) = self.live_body(key, ctx)?.ok_or(EngineError::NotStored)?;
        let cas = self.locks.admit(key, cas, ctx.now_unix_s)?;
        if cas != Cas::ZERO && meta.cas != cas {
            return Err(EngineError::KeyExists);
        }
        if value.len() + extra.len() > ctx.value_bytes_max {
            return Err(EngineError::TooBig);
        }
        // The body grows; an xattr section stays in front of it.
        let (section, body) = datatype::split_xattrs(meta.datatype, &value);
        let mut joined = Vec::with_capacity(value.len() + extra.len());
        joined.extend_from_slice(section);
        if append {
            joined.extend_from_slice(body);
            joined.extend_from_slice(extra);
        } else {
            joined.extend_from_slice(extra);
            joined.extend_from_slice(body);
        }
        let base = meta.datatype.without(Datatype::SNAPPY | Datatype::JSON);
        let dt = if datatype::is_json(&joined[section.len()..]) {
            base.with(Datatype::JSON)
        } else {
            base
        };
        Ok(self.write_or_prepare(
            key,
            NewVersion {
                flags: meta.flags,
                expiry: meta.expiry,
                datatype: dt,
                value: Bytes::from(joined),
                deleted: false,
                op: QueueOp::Mutation,
                cas: None,
                rev_seqno: None,
            },
            ctx,
        ))
    }

    /// TOUCH and GAT: a new version with a new expiry; returns the document as now stored.
    pub fn touch(
        &mut self,
        key: &[u8],
        expiry_wire: u32,
        ctx: &OpCtx,
    ) -> Result<(Document, Mutation), EngineError> {
        self.require_active()?;
        self.require_not_pending(key)?;
        let (meta, value) = self.live_value(key, ctx)?.ok_or(EngineError::KeyNotFound)?;
        self.locks.admit(key, Cas::ZERO, ctx.now_unix_s)?;
        let m = self.write(
            key,
            NewVersion {
                flags: meta.flags,
                expiry: Expiry::from_wire(expiry_wire, ctx.now_unix_s),
                datatype: meta.datatype,
                value: value.clone(),
                deleted: false,
                op: QueueOp::Mutation,
                cas: None,
                rev_seqno: None,
            },
            ctx,
        );
        let meta = self.ht.get(key).expect("just written").meta;
        Ok((Document { meta, value }, m))
    }

    /// Expires up to `max` items whose time has passed; returns how many.
    pub fn expire_due(&mut self, ctx: &OpCtx, max: usize) -> usize {
        if self.state != VbState::Active {
            return 0;
        }
        let due: Vec<Box<[u8]>> = self
            .ht
            .iter()
            .filter(|(k, sv)| {
                !sv.meta.deleted
                    && sv.meta.expiry.is_expired(ctx.now_unix_s)
                    && self.prepares.get(k).is_none()
            })
            .take(max)
            .map(|(k, _)| k.into())
            .collect();
        for key in &due {
            self.write_tombstone(key, ctx, QueueOp::Expiration);
        }
        due.len()
    }

    /// Live documents: items but the system event records.
    pub fn documents(&self) -> usize {
        self.num_items
            .saturating_sub(self.collection_items.system() as usize)
    }

    /// Writes the system event records this (active) vbucket lacks to agree with `live`.
    pub fn reconcile_system_events(&mut self, live: &LiveCollections, ctx: &OpCtx) -> usize {
        let writes = system_events::reconcile(live, |key| {
            let sv = self.ht.get(key)?;
            SystemEvent::decode(key, sv.value.as_deref()?)
        });
        for (key, event) in &writes {
            let v = NewVersion {
                flags: 0,
                expiry: Expiry::NEVER,
                datatype: Datatype::RAW,
                value: Bytes::from(event.encode()),
                deleted: false,
                op: QueueOp::Mutation,
                cas: None,
                rev_seqno: None,
            };
            self.write(key, v, ctx);
        }
        writes.len()
    }

    /// Deletes every live document (FLUSH); returns how many. A key with a SyncWrite pending
    /// is left to its outcome; the system event records stay.
    pub fn delete_all(&mut self, ctx: &OpCtx) -> usize {
        let keys: Vec<Box<[u8]>> = self
            .ht
            .iter()
            .filter(|(k, sv)| {
                !sv.meta.deleted && self.prepares.get(k).is_none() && !is_system_key(k)
            })
            .map(|(k, _)| k.into())
            .collect();
        for key in &keys {
            self.write_tombstone(key, ctx, QueueOp::Deletion);
        }
        keys.len()
    }
}

/// A counter is ASCII decimal digits that fit a u64 (memcached's rule).
fn parse_counter(body: &[u8]) -> Option<u64> {
    if body.is_empty() || body.len() > 20 || !body.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(body).ok()?.parse().ok()
}

mod reads;
mod residency;
#[cfg(test)]
mod sync_write_tests;
#[cfg(test)]
mod tests;
mod with_meta;
