//! The bucket's side of scopes and collections: the live set it is told (see
//! `collections`), the records each active vbucket writes of it (`system_events`), the
//! sweep's progress and the per-collection counts.

use crate::bucket::Bucket;
use crate::collections::LiveCollections;
use sluice_types::{CollectionId, VbId, VbState};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Bucket {
    /// Records which collections exist now. Documents of those dropped since are removed in
    /// the background, from memory and disk (see `collections`).
    /// Every active vbucket records the scopes and collections made or dropped since in
    /// its own seqno order (`system_events`).
    pub fn set_live_collections(&self, live: LiveCollections) {
        let mut current = self.live_collections.lock();
        if **current == live {
            return;
        }
        let live = Arc::new(live);
        *current = live.clone();
        drop(current);
        for vb in 0..self.num_vbuckets() {
            self.reconcile_system_events(VbId(vb), &live);
        }
        self.collection_sweep_wanted.store(true, Ordering::Release);
        self.pager_wake.notify();
    }

    /// Writes the system event records `vb` lacks, if it is active.
    pub(crate) fn reconcile_system_events(&self, vb: VbId, live: &LiveCollections) {
        let ctx = self.ctx();
        let _ = self.with_vb(vb, |inner| {
            if inner.state == VbState::Active {
                inner.reconcile_system_events(live, &ctx);
            }
        });
    }

    /// Whether every dropped collection's documents are gone from memory and disk (the
    /// sweep ran and the flusher committed what it found).
    pub fn collection_sweep_done(&self) -> bool {
        let live = self.live_collections();
        if self.collection_sweep_wanted.load(Ordering::Acquire) {
            return false;
        }
        if self.store.is_some() {
            // Held by the flusher for a whole round: once taken, purges it took are committed.
            let _round = self.flush_lock.lock();
            let swept = self.collections_swept_on_disk.lock();
            if !live.dropped().all(|c| swept.contains(&c)) || !self.pending_purges.lock().is_empty()
            {
                return false;
            }
        }
        !self
            .vbuckets
            .iter()
            .any(|v| v.inner.lock().collection_items.holds_dropped(&live))
    }

    pub fn live_collections(&self) -> Arc<LiveCollections> {
        self.live_collections.lock().clone()
    }

    /// Live documents per collection, over every vbucket here (replicas included, as
    /// `curr_items` counts them): the collections holding some, and always the default.
    pub fn collection_items(&self) -> std::collections::BTreeMap<CollectionId, u64> {
        self.collection_usage()
            .into_iter()
            .filter(|(cid, u)| u.items > 0 || *cid == CollectionId::DEFAULT)
            .map(|(cid, u)| (cid, u.items))
            .collect()
    }

    /// Each collection's share of this node, over every vbucket here: its live documents
    /// (the default collection's are the rest of `curr_items`) and the bytes its entries
    /// take in memory. System event records are no collection's.
    pub fn collection_usage(&self) -> std::collections::BTreeMap<CollectionId, CollectionUsage> {
        let mut out: std::collections::BTreeMap<CollectionId, CollectionUsage> =
            std::collections::BTreeMap::new();
        let mut total = 0u64;
        let mut others = 0u64;
        for v in self.vbuckets.iter() {
            let inner = v.inner.lock();
            total += inner.num_items as u64;
            others += inner.collection_items.total();
            for (cid, n) in inner.collection_items.iter() {
                out.entry(cid).or_default().items += n;
            }
            for (cid, bytes) in inner.ht.collection_bytes().iter() {
                out.entry(cid).or_default().mem_bytes += bytes as u64;
            }
        }
        out.entry(CollectionId::DEFAULT).or_default().items = total.saturating_sub(others);
        out.remove(&CollectionId::SYSTEM);
        out
    }
}

/// A collection's share of a node (see [`Bucket::collection_usage`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CollectionUsage {
    pub items: u64,
    pub mem_bytes: u64,
}
