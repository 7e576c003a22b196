//! One index's feeder: it follows the bucket's cluster map and runs a [`SourceFeed`] per
//! member holding active vbuckets, each streaming those vbuckets into the index store.
//!
//! - A map change that moves active vbuckets stops the sources whose vbuckets changed and
//!   starts them again with their new sets, from the positions saved with the entries. A
//!   stopped source finishes the batch it is applying first, so an old stream's batch can
//!   never land after the new stream's.
//! - The vbuckets of a stopped source are no longer *confirmed*: a `request_plus` query
//!   does not count them caught up until their new source accepts their positions (after a
//!   failover the new active may answer ROLLBACK instead; see [`SourceFeed`]).
//! - While the index builds, the feeder reads every active vbucket's seqno across the
//!   cluster once, and turns the index online when the store holds every one of them.
//!
//! [`SourceFeed`]: super::source_feed::SourceFeed

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sluice_cluster::NodeId;
use sluice_index::{IndexError, IndexId, IndexState, IndexStore};
use sluice_types::{Seqno, VbId, VbSet};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::seqnos::SeqnoReader;
use super::source_feed::{FeedError, SourceFeed};
use super::sources::{sources, Source};
use super::FeederCounters;
use crate::node::Node;

/// The pause before reading the cluster's seqnos again when a member could not answer.
const SEQNO_RETRY: Duration = Duration::from_millis(200);

/// Vbuckets whose saved position a producer accepted since their source (re)connected, by
/// index (see `IndexService::confirmed`).
pub(super) type Confirmed = Arc<parking_lot::Mutex<HashMap<IndexId, VbSet>>>;

/// What every source of one index shares.
pub(super) struct Shared {
    pub node: Arc<Node>,
    pub store: Arc<IndexStore>,
    pub id: IndexId,
    pub applied: Arc<Notify>,
    pub stats: Arc<FeederCounters>,
    pub confirmed: Confirmed,
    /// Write-to-index lag of this index, recorded once it is online.
    pub lag: Arc<crate::dcp::replication_stats::FeedStats>,
    /// Changes applied per second, over the last second.
    pub rate: Arc<AtomicU64>,
    pub seqnos: Arc<SeqnoReader>,
    /// Whether the index is online (its sources record lag only then).
    pub online: AtomicBool,
}

pub(super) struct Feeder {
    pub shared: Arc<Shared>,
}

/// A running source, stopped when dropped (the feeder ended or was aborted).
struct Running {
    source: Source,
    stop: Arc<Notify>,
    task: JoinHandle<Result<(), FeedError>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A task that ends with its owner.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Feeder {
    /// Feeds the index until it is dropped (its definition is gone) or the task is aborted.
    pub async fn run(self) {
        let s = &self.shared;
        let result = self.follow().await;
        match result {
            Ok(()) | Err(FeedError::Store(IndexError::NoSuchIndex(_))) => {
                tracing::info!(index = s.id.0, "index feeder ends");
            }
            Err(e) => tracing::error!(index = s.id.0, error = %e, "index feeder stopped"),
        }
    }

    async fn follow(&self) -> Result<(), FeedError> {
        let s = &self.shared;
        let def = s.store.definition(s.id)?;
        s.online
            .store(def.state == IndexState::Online, Ordering::Relaxed);
        // The bucket may not be open yet after a restart: wait for it.
        let bucket = loop {
            if let Some(b) = s.node.buckets.get(&def.bucket) {
                break b;
            }
            tokio::time::sleep(SEQNO_RETRY).await;
            s.store.definition(s.id)?;
        };
        let saved = s.store.positions(s.id)?;
        let resumed = saved.values().filter(|p| p.seqno > Seqno::ZERO).count();
        s.stats
            .resumed_vbuckets
            .fetch_add(resumed as u64, Ordering::Relaxed);
        tracing::info!(index = %def.name, bucket = %def.bucket, resumed_vbuckets = resumed,
            from_zero = usize::from(bucket.engine.num_vbuckets()).saturating_sub(resumed),
            "index feeder starts");
        s.confirmed.lock().remove(&s.id);
        let mut maps = bucket.watch_cluster_map();
        let mut running: BTreeMap<NodeId, Running> = BTreeMap::new();
        let mut building = def.state == IndexState::Building;
        // Only for the stats, on its own: a member that does not answer must not hold up
        // following the map.
        let _refresher = AbortOnDrop(tokio::spawn({
            let (s, bucket) = (s.clone(), bucket.clone());
            async move {
                let mut tick = tokio::time::interval(super::seqnos::REFRESH);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                let mut last: Option<(tokio::time::Instant, u64)> = None;
                loop {
                    tick.tick().await;
                    if let Ok(stats) = s.store.stats(s.id) {
                        let now = (tokio::time::Instant::now(), stats.changes_applied);
                        if let Some((t, n)) = last {
                            let secs = now.0.duration_since(t).as_secs_f64().max(1e-3);
                            let per_sec = (now.1.saturating_sub(n) as f64 / secs).round();
                            s.rate.store(per_sec as u64, Ordering::Relaxed);
                        }
                        last = Some(now);
                    }
                    let _ = s.seqnos.active_seqnos(&s.node, &bucket).await;
                }
            }
        }));
        let build = self.build(&bucket);
        tokio::pin!(build);
        loop {
            let plan = sources(&maps.borrow_and_update().map);
            self.replan(&mut running, plan).await;
            let ended = async {
                if running.is_empty() {
                    return std::future::pending().await;
                }
                let (result, _, _) =
                    futures_util::future::select_all(running.values_mut().map(|r| &mut r.task))
                        .await;
                result
            };
            tokio::select! {
                changed = maps.changed() => {
                    if changed.is_err() {
                        // The bucket was deleted here: its indexes go with it.
                        return Ok(());
                    }
                }
                result = ended => {
                    // A source ends only when the index is gone (it retries everything else).
                    return match result {
                        Ok(r) => r,
                        Err(e) => Err(FeedError::Task(e)),
                    };
                }
                built = &mut build, if building => {
                    built?;
                    // The state change commits to disk: on the blocking pool, not on a
                    // thread that serves requests.
                    let (store, id) = (s.store.clone(), s.id);
                    tokio::task::spawn_blocking(move || store.set_state(id, IndexState::Online))
                        .await??;
                    s.online.store(true, Ordering::Relaxed);
                    building = false;
                    tracing::info!(index = %def.name, "index online");
                    settle(s.store.clone(), s.id, def.name.clone());
                }
            }
        }
    }

    /// Stops the sources `plan` changes (each finishing its batch), then starts the new ones.
    async fn replan(
        &self,
        running: &mut BTreeMap<NodeId, Running>,
        mut plan: BTreeMap<NodeId, Source>,
    ) {
        let s = &self.shared;
        let stale: Vec<NodeId> = running
            .iter()
            .filter(|(id, r)| plan.get(id) != Some(&r.source))
            .map(|(id, _)| *id)
            .collect();
        for id in stale {
            let mut r = running.remove(&id).expect("listed above");
            r.stop.notify_one();
            let _ = (&mut r.task).await;
            if let Some(c) = s.confirmed.lock().get_mut(&s.id) {
                for vb in &r.source.vbuckets {
                    c.remove(*vb);
                }
            }
            tracing::info!(index = s.id.0, node = %id, vbuckets = r.source.vbuckets.len(),
                "index source stopped: the map moved its vbuckets");
        }
        plan.retain(|id, _| !running.contains_key(id));
        for (id, source) in plan {
            let stop = Arc::new(Notify::new());
            let feed = SourceFeed {
                shared: s.clone(),
                source: source.clone(),
                stop: stop.clone(),
            };
            let task = tokio::spawn(feed.run());
            running.insert(id, Running { source, stop, task });
        }
    }

    /// Waits until the store holds every active vbucket's seqno as it was when the build
    /// started (read once, across the cluster).
    async fn build(&self, bucket: &crate::bucket_handle::BucketHandle) -> Result<(), FeedError> {
        let s = &self.shared;
        let targets = loop {
            match s.seqnos.active_seqnos(&s.node, bucket).await {
                Ok(t) => break t,
                Err(e) => {
                    tracing::info!(index = s.id.0, error = %e, "index build: seqnos not read yet");
                    tokio::time::sleep(SEQNO_RETRY).await;
                }
            }
        };
        let targets: Vec<(VbId, Seqno)> = targets.iter().map(|(vb, n)| (*vb, *n)).collect();
        loop {
            // Registered before the check, so a batch applied in between still wakes it.
            let woken = s.applied.notified();
            if super::lagging(&s.store, &s.confirmed, s.id, &targets)?.is_empty() {
                return Ok(());
            }
            woken.await;
        }
    }
}

/// Moves a just-built index out of its memtable into one table (`IndexStore::settle`), on
/// the blocking pool, without holding up the feeder: queries use the index meanwhile, and
/// get faster once it is done.
fn settle(store: Arc<IndexStore>, id: IndexId, name: String) {
    tokio::task::spawn_blocking(move || {
        let started = std::time::Instant::now();
        match store.settle(id) {
            Ok(()) => tracing::info!(index = %name, tables = store.table_count(id).unwrap_or(0),
                took_ms = started.elapsed().as_millis() as u64, "index settled on disk"),
            // Dropped meanwhile: nothing left to settle.
            Err(IndexError::NoSuchIndex(_)) => {}
            Err(e) => tracing::warn!(index = %name, error = %e,
                "index not settled: its entries stay in the memtable until it fills"),
        }
    });
}
