//! Bucket configuration, with the defaults a user gets without flags.

use sluice_types::limits::VALUE_BYTES_MAX_DEFAULT;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BucketType {
    /// Durable: persisted by the flusher, values evictable under memory pressure.
    Couchbase,
    /// Memory only: never touches disk; refuses writes with a temporary failure when full.
    Ephemeral,
}

/// See [`BucketConfig::flush_interval`]. Measured on 2 nodes replicating 5,000–10,000 sets/s:
/// without it each node committed about 1,000 times a second, 6 items each, and the syncs'
/// CPU and wake-ups tripled the replication latency's p99 (docs/benchmarks.md).
pub const FLUSH_INTERVAL_DEFAULT: Duration = Duration::from_millis(3);

#[derive(Debug, Clone)]
pub struct BucketConfig {
    pub name: String,
    pub bucket_type: BucketType,
    pub num_vbuckets: u16,
    pub quota_bytes: u64,
    pub value_bytes_max: usize,
    /// Above this share of the quota the item pager starts evicting.
    pub high_watermark: f64,
    /// The item pager stops once usage is below this share of the quota.
    pub low_watermark: f64,
    /// Share of the quota checkpoints may use.
    pub checkpoint_share: f64,
    /// An open checkpoint is closed past this many items.
    pub checkpoint_items_max: usize,
    /// Largest batch the flusher writes in one commit, in bytes.
    pub flush_batch_bytes_max: usize,
    /// The shortest time from the start of one flusher commit to the start of the next.
    /// Writes arriving meanwhile wait for the next commit, so a steady trickle is persisted
    /// in fewer, larger commits (fewer syncs) instead of one commit per handful of items. A
    /// write arriving while the flusher is idle is committed at once. Zero: no wait.
    pub flush_interval: Duration,
    /// How often the expiry pager runs.
    pub expiry_pager_interval: Duration,
    /// Tombstones older than this are purged.
    pub tombstone_purge_age: Duration,
    /// How `*_WITH_META` versions are judged against the ones here; fixed for the bucket's
    /// life.
    pub conflict_resolution: crate::conflict::ConflictResolution,
    /// What every CAS this node makes in the bucket ends in (see `hlc`): chosen at random
    /// when a node opens the bucket, so that two nodes rarely share one.
    pub cas_salt: u16,
}

impl BucketConfig {
    pub fn new(name: &str, bucket_type: BucketType) -> BucketConfig {
        BucketConfig {
            name: name.to_string(),
            bucket_type,
            num_vbuckets: 1024,
            quota_bytes: 256 * 1024 * 1024,
            value_bytes_max: VALUE_BYTES_MAX_DEFAULT,
            high_watermark: 0.85,
            low_watermark: 0.75,
            checkpoint_share: 0.2,
            checkpoint_items_max: 10_000,
            flush_batch_bytes_max: 8 * 1024 * 1024,
            flush_interval: FLUSH_INTERVAL_DEFAULT,
            expiry_pager_interval: Duration::from_secs(10),
            tombstone_purge_age: Duration::from_secs(24 * 3600),
            conflict_resolution: Default::default(),
            cas_salt: 0,
        }
    }

    pub fn is_persistent(&self) -> bool {
        self.bucket_type == BucketType::Couchbase
    }
}
