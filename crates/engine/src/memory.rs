//! The bucket's memory quota and what is counted against it, in bytes.
//!
//! `used` covers hash-table entries (keys, metadata, resident values) and checkpoint items.
//! A value shared by the hash table and a checkpoint is counted in both, which overstates
//! usage while an item waits for the flusher: the quota errs on the safe side.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// The quota and the limits derived from it are atomics: an administrator may change the
/// quota while the bucket serves (`set_quota`), and every reader sees either the old limits
/// or the new ones, each one a moment apart at worst.
#[derive(Debug)]
pub struct Memory {
    quota_bytes: AtomicU64,
    high_watermark_bytes: AtomicU64,
    low_watermark_bytes: AtomicU64,
    checkpoint_bytes_max: AtomicU64,
    /// The shares of the quota the three limits are (fixed for the bucket's life).
    hwm: f64,
    lwm: f64,
    checkpoint_share: f64,
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
        let memory = Memory {
            quota_bytes: AtomicU64::new(0),
            high_watermark_bytes: AtomicU64::new(0),
            low_watermark_bytes: AtomicU64::new(0),
            checkpoint_bytes_max: AtomicU64::new(0),
            hwm,
            lwm,
            checkpoint_share,
            used: AtomicI64::new(0),
            checkpoint: AtomicI64::new(0),
        };
        memory.set_quota(quota_bytes);
        memory
    }

    /// A new quota, and the watermarks and checkpoint budget that follow from it.
    pub fn set_quota(&self, quota_bytes: u64) {
        let share = |s: f64| (quota_bytes as f64 * s) as u64;
        // Smaller limits first when shrinking and last when growing, so a reader between
        // two stores never sees a watermark above the quota.
        let limits = [
            (&self.quota_bytes, quota_bytes),
            (&self.high_watermark_bytes, share(self.hwm)),
            (&self.low_watermark_bytes, share(self.lwm)),
            (&self.checkpoint_bytes_max, share(self.checkpoint_share)),
        ];
        let growing = quota_bytes >= self.quota_bytes();
        let order: Vec<_> = match growing {
            true => limits.iter().rev().collect(),
            false => limits.iter().collect(),
        };
        for (cell, value) in order {
            cell.store(*value, Ordering::Relaxed);
        }
    }

    pub fn quota_bytes(&self) -> u64 {
        self.quota_bytes.load(Ordering::Relaxed)
    }

    pub fn high_watermark_bytes(&self) -> u64 {
        self.high_watermark_bytes.load(Ordering::Relaxed)
    }

    pub fn low_watermark_bytes(&self) -> u64 {
        self.low_watermark_bytes.load(Ordering::Relaxed)
    }

    pub fn checkpoint_bytes_max(&self) -> u64 {
        self.checkpoint_bytes_max.load(Ordering::Relaxed)
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
        self.used() > self.high_watermark_bytes()
    }

    pub fn above_low_watermark(&self) -> bool {
        self.used() > self.low_watermark_bytes()
    }

    /// Whether `incoming` more bytes would pass the quota.
    pub fn would_exceed_quota(&self, incoming: usize) -> bool {
        self.used() + incoming as u64 > self.quota_bytes()
    }

    pub fn snapshot(&self) -> MemorySnapshot {
        MemorySnapshot {
            quota_bytes: self.quota_bytes(),
            used_bytes: self.used(),
            high_watermark_bytes: self.high_watermark_bytes(),
            low_watermark_bytes: self.low_watermark_bytes(),
            checkpoint_bytes: self.checkpoint_used(),
            checkpoint_bytes_max: self.checkpoint_bytes_max(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Memory;

    #[test]
    fn a_new_quota_moves_every_limit_with_it() {
        let m = Memory::new(1000, 0.85, 0.75, 0.5);
        assert_eq!(
            (
                m.quota_bytes(),
                m.high_watermark_bytes(),
                m.low_watermark_bytes()
            ),
            (1000, 850, 750)
        );
        m.add(800);
        assert!(!m.above_high_watermark() && !m.would_exceed_quota(100));
        m.set_quota(500);
        assert_eq!(
            (m.high_watermark_bytes(), m.checkpoint_bytes_max()),
            (425, 250)
        );
        assert!(m.above_high_watermark() && m.would_exceed_quota(0));
        m.set_quota(4000);
        assert!(!m.above_low_watermark());
        assert_eq!(m.snapshot().quota_bytes, 4000);
    }
}
