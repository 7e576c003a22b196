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
//! Three logical indexes, all per vbucket:
//! - **by_seqno**: `(vb, seqno) → full record` (key, metadata, value). Backfill is a range scan
//!   here, and values sit beside their seqno.
//! - **by_key**: `(vb, key) → seqno`. Exactly one by_seqno entry exists per key: when a key is
//!   rewritten, the store removes the by_seqno entry of its previous version in the same batch.
//! - **vb_meta**: `vb → VbMeta` (state, failover log, high/purge seqnos, max CAS).
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
use sluice_types::{FailoverLog, ItemMeta, Seqno, VbId, VbState};

/// One document version as persisted: key, metadata and (possibly empty) value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemRecord {
    pub vb: VbId,
    pub key: Bytes,
    pub meta: ItemMeta,
    pub value: Bytes,
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
}

/// What a caller knows of a key's entry on disk before a commit ([`FlushBatch::on_disk`]).
/// A wrong hint would leave the old version's by_seqno slot behind; a store that checks
/// hints (see [`VERIFY_HINTS_ENV`]) reads by_key anyway and fails as corrupt on a mismatch.
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
    /// New versions of documents (tombstones included). When a key appears more than once,
    /// only the version with the highest seqno is kept.
    pub items: Vec<ItemRecord>,
    /// For each of `items`, in order, what the caller knows of the key's entry on disk, so
    /// the commit need not read by_key to find the by_seqno slot it replaces. An empty list:
    /// nothing known for any item.
    pub on_disk: Vec<OnDisk>,
    /// Tombstones to remove for good: (vb, key, seqno of the tombstone). A purge whose
    /// seqno is no longer the key's current one is ignored (the key was rewritten).
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
    /// Records of `vb` with `start < seqno <= end`, in seqno order.
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
}

/// The durable store of one bucket.
pub trait Store: Send + Sync {
    /// Applies `batch` atomically and makes it durable with one sync.
    fn commit(&self, batch: &FlushBatch) -> Result<()>;
    /// The current version of a key (tombstones included), if any.
    fn get(&self, vb: VbId, key: &[u8]) -> Result<Option<ItemRecord>>;
    /// Every persisted vbucket's metadata.
    fn load_vb_meta(&self) -> Result<Vec<(VbId, VbMeta)>>;
    /// Every record of `vb` in seqno order (warmup).
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
    /// Removes everything stored for `vb` (records, key index, metadata) in one atomic,
    /// durable write: a replica that must roll back further than it can undo starts over.
    fn reset_vb(&self, vb: VbId) -> Result<()>;
}
