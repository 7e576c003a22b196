//! The bucket engine: everything a node knows about its data, with no sockets.
//!
//! Layout:
//! - `bucket`     — [`Bucket`]: the public API (get/store/delete/…), routing to vbuckets;
//!   `bucket_collections`: its collections calls (live set, records, sweep, counts);
//! - `vbucket`    — one vbucket: state, hash table, seqnos, failover log, mutation rules;
//! - `hash_table` — key → [`StoredValue`] with byte accounting; `table_key`: its keys;
//! - `checkpoint` — the ordered, deduplicating queue of changes and its cursors;
//! - `memory`     — the quota, watermarks and usage counters;
//! - `flusher`    — drains the flusher cursor into storage, one atomic batch + one sync:
//!   `flusher/schedule` decides (share, rotation, pacing), `flusher/round` is one round;
//! - `warmup`     — rebuilds vbuckets from storage at start;
//! - `pager`      — the item pager (evicts clean values), the expiry pager and the tombstone
//!   purger: `pager/schedule` decides what runs when, `pager/{evict,expiry,tombstones}` do it;
//! - `stream_source` — what DCP streams read: cursors and backfills;
//! - `checkpoint_recovery` — keeps checkpoint memory in budget (drops slow cursors);
//! - `listeners`  — wakes DCP producers when a vbucket changes;
//! - `replica`    — replica vbuckets: applying a producer's changes, resets;
//! - `prepares`   — a vbucket's pending SyncWrites and the rules a replica's changes follow;
//!   `sync_writes`: committing and aborting them on the active;
//! - `vb_uuids`   — where new vbucket uuids come from (a random source passed in);
//! - `collections` — which collections are live, per-collection counts, and (with
//!   `pager/collections`) removing what a dropped collection left behind;
//! - `system_events` — each vbucket's records of the scopes and collections made and
//!   dropped, in its seqno order (what DCP sends as SYSTEM_EVENTs);
//! - `hlc`, `clock`, `datatype`, `config`, `error`, `stats`, `item`.
//!
//! Time and randomness come in as parameters: the flusher's and the pager's schedules take
//! `now` and return actions, which their threads carry out; uuids are drawn from the RNG
//! given to [`Bucket::open_with_rng`] ([`Bucket::open`] seeds one from the OS).
//!
//! Locking: each vbucket has one mutex; nothing slow (no I/O) ever happens under it. Disk
//! reads for evicted values are done by the caller outside the lock ([`Bucket::fetch`]).
#![deny(unsafe_code)]

mod background;
mod bucket;
mod bucket_collections;
mod checkpoint;
mod checkpoint_recovery;
mod clock;
mod collections;
mod config;
mod conflict;
pub use conflict::{resolve as resolve_conflict, ConflictResolution, Resolution, VersionMeta};
mod datatype;
mod dirty_vbuckets;
mod error;
mod flusher;
mod hash_table;
mod hlc;
pub use hlc::CAS_SALT_MODULUS;
mod item;
mod listeners;
mod locks;
mod memory;
mod pager;
mod prepares;
mod replica;
mod signal;
mod stats;
mod stream_source;
mod sync_writes;
pub mod system_events;
mod table_key;
mod vb_uuids;
mod vbucket;
mod warmup;

pub use background::{mark_current_thread_as_batch, run_as_batch};
pub use bucket::{Bucket, GetMetaResult, ObserveSeqnoResult, RoomListener, VbDetails};
pub use bucket_collections::CollectionUsage;
pub use checkpoint::{CheckpointManager, CursorChunk, CursorId, QueueOp, QueuedItem};
pub use clock::{Clock, ManualClock, SystemClock};
pub use collections::{CollectionEntry, LiveCollections};
pub use config::{BucketConfig, BucketType, FLUSH_INTERVAL_DEFAULT};
pub use datatype::inflate;
pub use error::EngineError;
pub use hash_table::StoredValue;
pub use item::{
    ArithmeticRequest, Document, MacroField, MacroSlot, Mutation, Observed, StoreKind,
    StoreRequest, WithMetaKind, WithMetaRequest,
};
pub use listeners::ChangeListener;
pub use memory::MemorySnapshot;
pub use prepares::{PendingError, SnapshotKind};
pub use replica::{ReplicaChange, ReplicaPosition};
pub use sluice_proto_free::*;
pub use stats::BucketStats;
pub use stream_source::{Backfill, StreamInfo};
pub use sync_writes::PendingWrite;

/// Re-exports that keep the engine's API free of the wire crate.
mod sluice_proto_free {
    pub use sluice_types::{Cas, Datatype, Expiry, ItemMeta, Seqno, VbId, VbState, VbUuid};
}
