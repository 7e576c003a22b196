//! Durable storage for a bucket, behind a small trait of our own.
//!
//! Layout:
//! - `lib.rs`   — the [`Store`] trait, records and batches (the contract the engine relies on);
//! - `fjall_store.rs` — the implementation on the fjall LSM engine;
//! - `codec.rs` — the on-disk encoding of records and vbucket metadata;
//! - `faulty.rs` — a wrapper that injects failed syncs, for crash and poison tests;
//! - `plan.rs`  — turns a [`FlushBatch`] into the final key-level writes of one commit;
//! - `fjall_scan.rs` — `by_seqno` range scans and the snapshot type;
//! - `poison.rs` — the "a sync failed, never write again" latch.
//!
//! Two namespaces of records per key (see [`RecordKind`]):
//! - **committed**: document versions (mutations and tombstones), what reads and non-sync
//!   streams see;
//! - **pending**: SyncWrite prepares and aborts, kept apart so that a prepare never hides or
//!   replaces a committed version.
//!
//! Four logical indexes, all per vbucket:
//! - **by_seqno**: `(vb, seqno) → full record` (key, kind, metadata, value), records of both
//!   namespaces. Backfill and warmup are range scans here, and values sit beside their seqno.
//! - **by_key**: `(vb, key) → seqno` of the key's committed record. Exactly one committed
//!   by_seqno entry exists per key: when a key is rewritten, the store removes the by_seqno
//!   entry of its previous committed version in the same batch.
//! - **pending_by_key**: `(vb, key) → seqno` of the key's pending record (its latest prepare
//!   or abort). At most one pending by_seqno entry exists per key, replaced the same way.
//! - **vb_meta**: `vb → VbMeta` (state, failover log, high/purge seqnos, max CAS).
//!
//! A write in one namespace never removes the other's record: a key may have one committed
//! and one pending record on disk at once.
//!
//! ## Telling a completed prepare from an in-flight one
//!
//! A prepare stays on disk after it completes, until the key's next prepare or abort replaces
//! it (committing writes the committed version and leaves the pending record alone). Whoever
//! reads the disk (the engine at warmup) applies this rule to a key's pending record at
//! seqno `P`:
//! - an [`RecordKind::Abort`]: nothing is in flight (the abort completed the prepare it names);
//! - a [`RecordKind::Prepare`] whose key has a committed record with a seqno above `P`: it
//!   was committed (a commit always takes a seqno above its prepare's, and nothing else
//!   writes the key while a prepare is in flight), so nothing is in flight;
//! - any other [`RecordKind::Prepare`]: it is in flight.
//!
//! So that the rule survives the purger, a purge that removes a key's committed tombstone at
//! seqno `T` also removes the key's pending record if its seqno is below `T` (complete by the
//! rule, and below the purge seqno a backfill needs neither it nor an abort).
//!
//! Durability contract: [`Store::commit`] applies one [`FlushBatch`] atomically and syncs once.
//! A failed sync is never retried: the store is poisoned and every later write fails with
//! [`StoreError::Poisoned`].
#![deny(unsafe_code)]
// A decoder never panics on what it reads: every index is checked (`get`, `split_at_checked`).
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

pub mod codec;
mod faulty;
mod fjall_scan;
mod fjall_store;
mod plan;
mod poison;

pub use faulty::{FailedSync, FaultyStore};
pub use fjall_store::{FjallStore, StoreMemory, VERIFY_HINTS_ENV};

use bytes::Bytes;
use sluice_types::{DurabilityLevel, FailoverLog, ItemMeta, Seqno, VbId, VbState};

/// One record as persisted: a document version, a prepare or an abort ([`RecordKind`]), with
/// its key, metadata and (possibly empty) value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemRecord {
    pub vb: VbId,
    pub key: Bytes,
    pub meta: ItemMeta,
    pub value: Bytes,
    pub kind: RecordKind,
}

/// What a record is. [`RecordKind::Committed`] records form the committed namespace, the
/// others the pending one (see the crate documentation): per (vb, key) the disk holds at most
/// one record of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecordKind {
    /// A committed document version (mutation or tombstone): what reads and non-sync
    /// streams see.
    #[default]
    Committed,
    /// A pending SyncWrite at `meta.seqno` (`meta.deleted` for a durable delete).
    Prepare(DurabilityLevel),
    /// The abort (at `meta.seqno`) of the prepare at `prepared`.
    Abort { prepared: Seqno },
}

impl RecordKind {
    /// Whether the record belongs to the pending namespace (a prepare or an abort).
    pub fn is_pending(self) -> bool {
        self != RecordKind::Committed
    }
}

/// Persisted state of one vbucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VbMeta {
    pub state: VbState,
    pub failover_log: FailoverLog,
    /// Highest seqno persisted for this vbucket.
    pub high_seqno: Seqno,
    /// Highest seqno of a tombstone purged from this vbucket.
    pub purge_seqno: Seqno,
    /// Largest CAS handed out, so the clock never goes backwards after a restart.
    pub max_cas: u64,
    /// The seqno of the newest prepare completed (committed or aborted) by a record persisted
    /// with this metadata: a disk snapshot's consumer counts every prepare at or below it as
    /// completed (its commit is deduplicated away on disk). 0 in metadata written before
    /// format 2.
    pub high_completed_seqno: Seqno,
}

/// What a caller knows of a key's committed entry on disk (its by_key seqno) before a commit
/// ([`FlushBatch::on_disk`]); hints describe the committed namespace only. A wrong hint would
/// leave the old version's by_seqno slot behind; a store that checks hints (see
/// [`VERIFY_HINTS_ENV`]) reads by_key anyway and fails as corrupt on a mismatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnDisk {
    /// Not known: the commit reads by_key.
    #[default]
    Unknown,
    /// The key has no entry on disk (never persisted, or its tombstone was purged).
    Absent,
    /// The key's version on disk has this seqno.
    At(Seqno),
}

impl OnDisk {
    /// The seqno by_key holds, if the hint says: `Some(None)` for a key known absent.
    pub fn known(self) -> Option<Option<Seqno>> {
        match self {
            OnDisk::Unknown => None,
            OnDisk::Absent => Some(None),
            OnDisk::At(seqno) => Some(Some(seqno)),
        }
    }
}

/// One atomic unit of durable change, written by the flusher.
#[derive(Debug, Default)]
pub struct FlushBatch {
    /// New records of any kind: committed versions (tombstones included), prepares and
    /// aborts. When a key appears more than once in one namespace (committed, or pending),
    /// only its record with the highest seqno is kept; each namespace's winner replaces the
    /// key's record of that namespace on disk and leaves the other namespace's alone.
    pub items: Vec<ItemRecord>,
    /// For each of `items`, in order, what the caller knows of the key's *committed* entry on
    /// disk, so the commit need not read by_key to find the by_seqno slot a committed record
    /// replaces. An empty list: nothing known for any item. For a pending record (prepare or
    /// abort) pass [`OnDisk::Unknown`]: the commit always reads pending_by_key for those, and
    /// ignores their hint (it would describe the other namespace).
    pub on_disk: Vec<OnDisk>,
    /// Committed tombstones to remove for good: (vb, key, seqno of the tombstone). A purge
    /// whose seqno is no longer the key's current committed one is ignored (the key was
    /// rewritten). A purge that applies also removes the key's pending record if that is
    /// older than the tombstone (see "Telling a completed prepare from an in-flight one").
    pub purges: Vec<(VbId, Bytes, Seqno)>,
    /// vbucket metadata to store with the same commit.
    pub vb_meta: Vec<(VbId, VbMeta)>,
}

impl FlushBatch {
    pub fn is_empty(&self) -> bool {
        self.items.is_empty() && self.purges.is_empty() && self.vb_meta.is_empty()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("storage I/O error: {0}")]
    Io(String),
    #[error("storage is poisoned after a failed sync and accepts no more writes: {0}")]
    Poisoned(String),
    #[error("corrupt record in storage: {0}")]
    Corrupt(String),
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// A consistent, point-in-time view used by DCP backfill: later commits are not visible.
pub trait StoreSnapshot: Send {
    /// Records of `vb` with `start < seqno <= end`, in seqno order: committed records,
    /// prepares and aborts together, each with its [`RecordKind`].
    fn scan_seqnos(
        &self,
        vb: VbId,
        start: Seqno,
        end: Seqno,
    ) -> Box<dyn Iterator<Item = Result<ItemRecord>> + Send + '_>;

    /// The highest seqno of `vb` this snapshot holds (its `vb_meta`, committed atomically
    /// with the records), or 0 if the vbucket has none. A backfill scans up to exactly this,
    /// so its snapshot is the vbucket's state at that seqno: a key rewritten by a later
    /// commit is outside the snapshot, not missing from it.
    fn high_seqno(&self, vb: VbId) -> Result<Seqno>;

    /// The seqno of the newest committed record of `vb` with `start < seqno <= end` (not a
    /// prepare, not an abort), if any: where a backfill's snapshot ends for a consumer that
    /// sees no prepares or aborts. Read from the end backwards; only outstanding prepares
    /// and aborts not yet purged lie above it, so few records are read.
    fn max_visible_seqno(&self, vb: VbId, start: Seqno, end: Seqno) -> Result<Option<Seqno>>;

    /// The high completed seqno of `vb` this snapshot holds ([`VbMeta::high_completed_seqno`],
    /// committed with the records up to [`Self::high_seqno`]), or 0.
    fn high_completed_seqno(&self, vb: VbId) -> Result<Seqno>;
}

/// The durable store of one bucket.
pub trait Store: Send + Sync {
    /// Applies `batch` atomically and makes it durable with one sync.
    fn commit(&self, batch: &FlushBatch) -> Result<()>;
    /// The current committed version of a key (tombstones included), if any. Never a
    /// prepare or an abort.
    fn get(&self, vb: VbId, key: &[u8]) -> Result<Option<ItemRecord>>;
    /// The key's pending record, if any: its latest prepare or abort, which may be complete
    /// already (see the crate documentation for how to tell).
    fn get_pending(&self, vb: VbId, key: &[u8]) -> Result<Option<ItemRecord>>;
    /// Every persisted vbucket's metadata.
    fn load_vb_meta(&self) -> Result<Vec<(VbId, VbMeta)>>;
    /// Every record of `vb` in seqno order (warmup), committed and pending, each with its
    /// [`RecordKind`].
    fn scan_vb(&self, vb: VbId) -> Box<dyn Iterator<Item = Result<ItemRecord>> + Send + '_>;
    /// A point-in-time view for backfill.
    fn snapshot(&self) -> Box<dyn StoreSnapshot>;
    /// Whether the previous process stopped cleanly; then marks the store as "running"
    /// (durably), so that a crash from now on is seen as unclean by the next open.
    fn take_clean_shutdown_flag(&self) -> Result<bool>;
    /// Records a clean stop (durably). Called after the final flush.
    fn mark_clean_shutdown(&self) -> Result<()>;
    /// Approximate bytes on disk.
    fn disk_bytes(&self) -> u64;
    /// Up to `limit` committed keys of `vb` that start with `prefix`, each with the seqno
    /// of its version on disk, in key order: what a dropped collection left behind.
    fn keys_with_prefix(
        &self,
        vb: VbId,
        prefix: &[u8],
        limit: usize,
    ) -> Result<Vec<(Bytes, Seqno)>>;
    /// Removes everything stored for `vb` (records of both namespaces, both key indexes,
    /// metadata) in one atomic,
    /// durable write: a replica that must roll back further than it can undo starts over.
    fn reset_vb(&self, vb: VbId) -> Result<()>;
}
