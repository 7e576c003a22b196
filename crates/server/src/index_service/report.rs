//! What the index service reports about each index, for STAT `index` and `/metrics`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use sluice_index::IndexDef;
use std::collections::BTreeMap;

use sluice_types::{Seqno, VbId, VbState};

use super::IndexService;
use crate::dcp::replication_stats::FeedStats;
use crate::node::Node;

/// One index's figures.
pub struct IndexReport {
    pub def: IndexDef,
    /// Entries, approximately (the store counts deletions until compaction).
    pub items: u64,
    pub disk_bytes: u64,
    /// Seqnos the index has yet to apply, over every active vbucket of the cluster (the
    /// seeds' "items remaining": per vbucket, high visible seqno minus the applied one).
    pub items_remaining: u64,
    /// Document changes applied since the node started.
    pub changes_applied: u64,
    /// Document changes applied per second, over the last second.
    pub changes_per_sec: u64,
    pub docs_skipped: u64,
    /// From the write (its CAS) to its apply in the index, once the index is online.
    pub lag: Arc<FeedStats>,
}

impl IndexService {
    /// The report of every index.
    pub fn reports(&self, node: &Node) -> Vec<IndexReport> {
        self.store
            .definitions()
            .into_iter()
            .filter_map(|def| {
                let stats = self.store.stats(def.id).ok()?;
                let applied = self.store.positions(def.id).ok()?;
                let items_remaining = node.buckets.get(&def.bucket).map_or(0, |b| {
                    // This node's active vbuckets as they are now; the others as the
                    // feeder's last read of the cluster found them (at most a second old).
                    let mut high: BTreeMap<VbId, Seqno> = (*self.seqnos.last(&def.bucket)).clone();
                    high.extend(b.engine.vb_visible_seqnos(Some(VbState::Active)));
                    high.into_iter()
                        .map(|(vb, high)| {
                            let at = applied.get(&vb).map_or(Seqno::ZERO, |p| p.seqno);
                            high.0.saturating_sub(at.0)
                        })
                        .sum()
                });
                Some(IndexReport {
                    lag: self.lag(def.id),
                    items: stats.items_approx,
                    disk_bytes: stats.disk_bytes,
                    items_remaining,
                    changes_applied: stats.changes_applied,
                    changes_per_sec: self.rate(def.id).load(Ordering::Relaxed),
                    docs_skipped: stats.docs_skipped,
                    def,
                })
            })
            .collect()
    }

    /// The index store's memory (all indexes of the node) as (name, bytes).
    pub fn memory(&self) -> [(&'static str, u64); 2] {
        let memory = self.store.memory();
        [
            ("index_memory_write_buffer_bytes", memory.write_buffer_bytes),
            ("index_memory_cache_bytes", memory.cache_bytes),
        ]
    }

    /// The node-wide feeder counters as (name, value).
    pub fn counters(&self) -> [(&'static str, u64); 5] {
        let s = &self.stats;
        [
            (
                "index_resumed_vbuckets",
                s.resumed_vbuckets.load(Ordering::Relaxed),
            ),
            (
                "index_rebuilt_vbuckets",
                s.rebuilt_vbuckets.load(Ordering::Relaxed),
            ),
            ("index_feeder_restarts", s.restarts.load(Ordering::Relaxed)),
            (
                "index_batches_applied",
                s.batches_applied.load(Ordering::Relaxed),
            ),
            (
                "index_changes_applied",
                s.changes_applied.load(Ordering::Relaxed),
            ),
        ]
    }
}
