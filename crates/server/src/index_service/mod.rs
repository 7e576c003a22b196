//! The index service of a node: its index store, and one feeder per index that is being
//! built or is online, each a DCP stream of the index's bucket applied to the store.
//!
//! An index holds the documents of the whole bucket: its feeder streams each vbucket from
//! the member the cluster map makes its active (`sources`), and follows the map as
//! failovers and rebalances move them. The cluster's metadata says which nodes hold a
//! copy of each index (`listing`).
//!
//! - `catalog`: the cluster's index catalog (replicated metadata): DDL goes there, and
//!   `reconcile` makes this node hold a copy of each index placed on it;
//! - `listing`: the catalog with each index's holders, as the query service plans with it;
//! - `feeder`: one per index, following the map; `source_feed`: one stream per member.
//! - `seqnos`: every active vbucket's seqno across the cluster (builds, `request_plus`).
//! - `report`: the stats.

pub mod catalog;
mod coalesce;
mod feeder;
pub mod listing;
mod report;
pub mod seqnos;
mod source_feed;
pub mod sources;

pub use report::IndexReport;
pub use source_feed::FeederCounters;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use sluice_index::{IndexDef, IndexError, IndexId, IndexState, IndexStore, VbPosition};
use sluice_types::{Seqno, VbId, VbSet};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::node::Node;

pub struct IndexService {
    pub store: Arc<IndexStore>,
    feeders: Mutex<HashMap<IndexId, JoinHandle<()>>>,
    /// Woken after every batch any feeder applies (consistency waits watch positions).
    applied: Arc<Notify>,
    stats: Arc<FeederCounters>,
    /// Per index, the vbuckets whose saved position the producer accepted since its feeder
    /// (re)connected: only those count as caught up. A position saved before a crash may be
    /// on a branch the producer no longer has (it answers ROLLBACK), and what it covers is
    /// not the data until the feeder has cleared and rebuilt it.
    confirmed: feeder::Confirmed,
    /// Write-to-index lag, per index (feeders of a restarted index keep counting).
    lag: Mutex<BTreeMap<IndexId, Arc<crate::dcp::replication_stats::FeedStats>>>,
    /// Changes applied per second, per index, over the last second (its feeder measures).
    rates: Mutex<BTreeMap<IndexId, Arc<AtomicU64>>>,
    /// Reads the cluster's active seqnos (builds and `request_plus`).
    pub seqnos: Arc<seqnos::SeqnoReader>,
    /// Where DDL goes: the cluster's replicated catalog (installed by the control plane).
    catalog: std::sync::OnceLock<Arc<dyn catalog::Catalog>>,
    /// The catalog as the metadata last said, with where each index's copies are.
    listing: parking_lot::RwLock<Arc<listing::Listing>>,
}

/// Why a wait for an index to catch up ended without it.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    #[error("index timed out waiting to catch up with the requested consistency")]
    Timeout,
    #[error(transparent)]
    Index(#[from] IndexError),
}

impl IndexService {
    /// Opens the store under `dir` (blocking), with a block cache of `cache_bytes`.
    pub fn open(dir: &Path, cache_bytes: u64) -> Result<IndexService, IndexError> {
        Ok(IndexService {
            store: Arc::new(IndexStore::open(dir, cache_bytes)?),
            feeders: Mutex::new(HashMap::new()),
            applied: Arc::new(Notify::new()),
            stats: Arc::default(),
            lag: Mutex::new(BTreeMap::new()),
            confirmed: Arc::default(),
            seqnos: Arc::default(),
            rates: Mutex::new(BTreeMap::new()),
            catalog: std::sync::OnceLock::new(),
            listing: Default::default(),
        })
    }

    /// Starts a feeder for every index that is building or online (after a restart, each
    /// resumes from its saved positions).
    pub fn start_all(self: &Arc<Self>, node: &Arc<Node>) {
        for def in self.store.definitions() {
            if def.state != IndexState::Deferred {
                self.start_feeder(node, def.id);
            }
        }
    }

    /// Starts feeding index `id` (no-op if a feeder runs already).
    pub fn start_feeder(self: &Arc<Self>, node: &Arc<Node>, id: IndexId) {
        let mut feeders = self.feeders.lock();
        if feeders.get(&id).is_some_and(|h| !h.is_finished()) {
            return;
        }
        let task = feeder::Feeder {
            shared: Arc::new(feeder::Shared {
                node: node.clone(),
                store: self.store.clone(),
                id,
                applied: self.applied.clone(),
                stats: self.stats.clone(),
                lag: self.lag(id),
                rate: self.rate(id),
                confirmed: self.confirmed.clone(),
                seqnos: self.seqnos.clone(),
                online: Default::default(),
            }),
        };
        feeders.insert(id, tokio::spawn(task.run()));
    }

    /// Stops the feeder of `id` and drops the index.
    pub async fn drop_index(&self, id: IndexId) -> Result<(), IndexError> {
        let handle = self.feeders.lock().remove(&id);
        if let Some(h) = handle {
            h.abort();
            let _ = h.await;
        }
        self.confirmed.lock().remove(&id);
        self.lag.lock().remove(&id);
        self.rates.lock().remove(&id);
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.drop_index(id))
            .await
            .unwrap_or_else(|e| Err(IndexError::Corrupt(format!("drop task failed: {e}"))))
    }

    /// Stops every feeder (the node is shutting down).
    pub fn stop_all(&self) {
        for (_, h) in self.feeders.lock().drain() {
            h.abort();
        }
    }

    /// Waits until index `id` has applied every vbucket of `targets` up to its seqno, or
    /// `timeout` passes.
    pub async fn wait_for(
        &self,
        id: IndexId,
        targets: &BTreeMap<VbId, Seqno>,
        timeout: Duration,
    ) -> Result<(), WaitError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let all: Vec<(VbId, Seqno)> = targets.iter().map(|(vb, s)| (*vb, *s)).collect();
        // Each applied group wakes every waiting query: after the first look, only the
        // vbuckets still behind are looked at again (a thousand lookups per wake-up per
        // query otherwise).
        let mut pending = all.clone();
        loop {
            // Registered before the check, so an apply between the check and the wait
            // still wakes it.
            let woken = self.applied.notified();
            pending = lagging(&self.store, &self.confirmed, id, &pending)?;
            if pending.is_empty() {
                // Each caught up by now; all of them at once, so one that went back
                // meanwhile (a rollback cleared it) is waited for again.
                pending = lagging(&self.store, &self.confirmed, id, &all)?;
                if pending.is_empty() {
                    return Ok(());
                }
            }
            if tokio::time::timeout_at(deadline, woken).await.is_err() {
                return Err(WaitError::Timeout);
            }
        }
    }

    /// The write-to-index lag of index `id`.
    pub fn lag(&self, id: IndexId) -> Arc<crate::dcp::replication_stats::FeedStats> {
        self.lag
            .lock()
            .entry(id)
            .or_insert_with(|| Arc::new(crate::dcp::replication_stats::FeedStats::new()))
            .clone()
    }

    /// The changes index `id` applied per second, over the last second.
    pub fn rate(&self, id: IndexId) -> Arc<AtomicU64> {
        self.rates.lock().entry(id).or_default().clone()
    }

    /// The definitions of `bucket`'s indexes.
    pub fn definitions_of(&self, bucket: &str) -> Vec<IndexDef> {
        self.store
            .definitions()
            .into_iter()
            .filter(|d| d.bucket == bucket)
            .collect()
    }
}

/// The `targets` index `id` misses: a vbucket with a seqno above 0 it has not applied up
/// to, or whose position no producer confirmed since its source (re)connected.
/// `targets` is in vbucket order, each vbucket once (a `BTreeMap`'s order, or a
/// subsequence of it); see [`behind`].
fn lagging(
    store: &IndexStore,
    confirmed: &feeder::Confirmed,
    id: IndexId,
    targets: &[(VbId, Seqno)],
) -> Result<Vec<(VbId, Seqno)>, IndexError> {
    let confirmed = confirmed.lock();
    let confirmed = confirmed.get(&id);
    store.with_positions(id, |positions| behind(positions, confirmed, targets))
}

/// [`lagging`] over one index's positions and confirmed vbuckets. A `request_plus` query
/// checks every vbucket twice, and those still behind again on each applied group.
fn behind(
    positions: &BTreeMap<VbId, VbPosition>,
    confirmed: Option<&VbSet>,
    targets: &[(VbId, Seqno)],
) -> Vec<(VbId, Seqno)> {
    debug_assert!(
        targets.windows(2).all(|w| w[0].0 < w[1].0),
        "targets are in vbucket order, each once"
    );
    let is_behind = |vb: VbId, want: Seqno, applied: Option<Seqno>| {
        want > Seqno::ZERO
            && (applied.is_none_or(|s| s < want) || confirmed.is_none_or(|c| !c.contains(vb)))
    };
    // A few vbuckets (what a waiting query looks at again) are looked up; many (its first
    // and last look, all of the bucket's) are walked beside the positions.
    if targets.len() * WALK_FROM_FRACTION < positions.len() {
        return targets
            .iter()
            .filter(|(vb, want)| is_behind(*vb, *want, positions.get(vb).map(|p| p.seqno)))
            .copied()
            .collect();
    }
    let mut positions = positions.iter().peekable();
    targets
        .iter()
        .filter(|(vb, want)| {
            while positions.next_if(|(p, _)| *p < vb).is_some() {}
            let applied = positions
                .peek()
                .filter(|(p, _)| *p == vb)
                .map(|(_, pos)| pos.seqno);
            is_behind(*vb, *want, applied)
        })
        .copied()
        .collect()
}

/// Below one target per this many positions, [`behind`] looks each target up instead of
/// walking every position: a lookup costs about a B-tree descent, a few steps of the walk.
const WALK_FROM_FRACTION: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_types::VbUuid;

    /// The check as it was written before the walk: a lookup per target.
    fn behind_by_lookup(
        positions: &BTreeMap<VbId, VbPosition>,
        confirmed: Option<&VbSet>,
        targets: &[(VbId, Seqno)],
    ) -> Vec<(VbId, Seqno)> {
        targets
            .iter()
            .filter(|(vb, want)| {
                *want > Seqno::ZERO
                    && (positions.get(vb).is_none_or(|p| p.seqno < *want)
                        || confirmed.is_none_or(|c| !c.contains(*vb)))
            })
            .copied()
            .collect()
    }

    #[test]
    fn the_walk_finds_what_a_lookup_per_vbucket_finds() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for round in 0..300 {
            // Up to 300 vbuckets, a target on each with odds from 1 in 1 to 1 in 40: both
            // the walk and the lookups (few targets among many positions) are taken.
            let vbuckets = 1 + next(300);
            let odds = 1 + next(40);
            let mut positions = BTreeMap::new();
            let mut confirmed = VbSet::new();
            let mut targets = Vec::new();
            for vb in 0..vbuckets {
                let vb = VbId(vb as u16);
                if next(4) != 0 {
                    let seqno = Seqno(next(6));
                    positions.insert(
                        vb,
                        VbPosition {
                            vb_uuid: VbUuid(1),
                            seqno,
                            snap_start: seqno,
                            snap_end: seqno,
                        },
                    );
                }
                if next(5) != 0 {
                    confirmed.insert(vb);
                }
                if next(odds) == 0 {
                    targets.push((vb, Seqno(next(6))));
                }
            }
            for conf in [Some(&confirmed), None] {
                let walked = behind(&positions, conf, &targets);
                assert_eq!(
                    walked,
                    behind_by_lookup(&positions, conf, &targets),
                    "round {round}"
                );
                // And again over what is left, as a waiting query does.
                assert_eq!(
                    behind(&positions, conf, &walked),
                    behind_by_lookup(&positions, conf, &walked)
                );
            }
        }
    }
}
