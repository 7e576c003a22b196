//! The bucket's memory quota and what is counted against it, in bytes.
//!
//! `used` covers hash-table entries (keys, metadata, resident values) and checkpoint items.
//! A value shared by the hash table and a checkpoint is counted in both, which overstates
//! usage while an item waits for the flusher: the quota errs on the safe side.

use std::sync::atomic::{AtomicI64, Ordering};

#[derive(Debug)]
pub struct Memory {
    pub quota_bytes: u64,
    pub high_watermark_bytes: u64,
    pub low_watermark_bytes: u64,
    pub checkpoint_bytes_max: u64,
    used: AtomicI64,
    checkpoint: AtomicI64,
}

/// A consistent-enough reading of the counters for stats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemorySnapshot {
    pub quota_bytes: u64,
    pub used_bytes: u64,
    pub high_watermark_bytes: u64,
    pub low_watermark_bytes: u64,
    pub checkpoint_bytes: u64,
    pub checkpoint_bytes_max: u64,
}

impl Memory {
    pub fn new(quota_bytes: u64, hwm: f64, lwm: f64, checkpoint_share: f64) -> Memory {
        assert!(
            0.0 < lwm && lwm < hwm && hwm <= 1.0,
            "watermarks are ordered"
        );
        Memory {
            quota_bytes,
            high_watermark_bytes: (quota_bytes as f64 * hwm) as u64,
            low_watermark_bytes: (quota_bytes as f64 * lwm) as u64,
            checkpoint_bytes_max: (quota_bytes as f64 * checkpoint_share) as u64,
            used: AtomicI64::new(0),
            checkpoint: AtomicI64::new(0),
        }
    }

    pub fn add(&self, delta: isize) {
        self.used.fetch_add(delta as i64, Ordering::Relaxed);
    }

    /// Records a checkpoint memory change (it is part of `used` too).
    pub fn add_checkpoint(&self, delta: isize) {
        self.checkpoint.fetch_add(delta as i64, Ordering::Relaxed);
        self.used.fetch_add(delta as i64, Ordering::Relaxed);
    }

    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed).max(0) as u64
    }

    pub fn checkpoint_used(&self) -> u64 {
        self.checkpoint.load(Ordering::Relaxed).max(0) as u64
    }

    pub fn above_high_watermark(&self) -> bool {
        self.used() > self.high_watermark_bytes
    }

    pub fn above_low_watermark(&self) -> bool {
        self.used() > self.low_watermark_bytes
    }

    /// Whether `incoming` more bytes would pass the quota.
    pub fn would_exceed_quota(&self, incoming: usize) -> bool {
        self.used() + incoming as u64 > self.quota_bytes
    }

    pub fn snapshot(&self) -> MemorySnapshot {
        MemorySnapshot {
            quota_bytes: self.quota_bytes,
            used_bytes: self.used(),
            high_watermark_bytes: self.high_watermark_bytes,
            low_watermark_bytes: self.low_watermark_bytes,
            checkpoint_bytes: self.checkpoint_used(),
            checkpoint_bytes_max: self.checkpoint_bytes_max,
        }
    }
}
