//! Cross-cluster replication (XDCR) on this node: the REST that defines remote clusters
//! and replications (`routes`), the calls to a remote's admin port (`remote`), and the
//! pipelines (`pipeline`): one per replication on every node that holds active vbuckets of
//! its source bucket, each streaming those vbuckets.
//!
//! [`follow`] keeps the pipelines what the replicated metadata says: a replication created,
//! resumed, or whose source map gives this node other active vbuckets starts (or restarts)
//! its pipeline from its checkpoints; one paused, deleted, or without active vbuckets here
//! stops. What a replication did here (`stats`) and its checkpoints outlive its pipelines.

pub mod checkpoint;
pub mod collections;
pub mod pipeline;
pub mod precheck;
pub mod remote;
pub(crate) mod routes;
pub mod select;
pub mod shared;
pub mod stats;

use parking_lot::Mutex;
use pipeline::Spec;
use shared::Shared;
use sluice_cluster::metadata::ClusterState;
use sluice_meta::MetaNode;
use sluice_server::control_stats::{ControlStats, XdcrFigures};
use sluice_server::Node;
use sluice_types::VbId;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// How long a stopping pipeline may take to finish its batch before it is abandoned.
const STOP_WAIT: Duration = Duration::from_secs(15);

/// This node's replications: their state, and the pipelines running.
#[derive(Default)]
pub struct Xdcr {
    shared: Mutex<BTreeMap<String, Arc<Shared>>>,
    running: Mutex<BTreeMap<String, Running>>,
}

struct Running {
    spec: Spec,
    stop: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

/// What a pipeline of replication `id` should run on this node now, if anything.
fn wanted(state: &ClusterState, me: sluice_cluster::NodeId) -> BTreeMap<String, Spec> {
    let mut specs = BTreeMap::new();
    for (id, def) in state.replications() {
        let (Some(remote), Some(bucket), Some(map)) = (
            state.remotes().get(&def.to_cluster),
            state.bucket(&def.from_bucket),
            state.map(&def.from_bucket),
        ) else {
            continue;
        };
        let Some(me_info) = map.nodes().iter().find(|n| n.id == me).cloned() else {
            continue;
        };
        let vbuckets = actives_of(map, me);
        if def.paused || vbuckets.is_empty() {
            continue;
        }
        specs.insert(
            id.clone(),
            Spec {
                def: def.clone(),
                remote: remote.clone(),
                conflict: bucket.conflict_resolution,
                me: me_info,
                vbuckets,
            },
        );
    }
    specs
}

/// The vbuckets `map` makes active on `me`.
fn actives_of(map: &sluice_cluster::ClusterMap, me: sluice_cluster::NodeId) -> Vec<VbId> {
    let vbmap = map.vbmap();
    (0..vbmap.num_vbuckets())
        .map(VbId)
        .filter(|&vb| vbmap.chain(vb).and_then(|c| c.active) == Some(me))
        .collect()
}

impl Xdcr {
    /// Replication `id`'s state here, loaded on first use.
    pub fn shared(&self, node: &Node, id: &str) -> Arc<Shared> {
        self.shared
            .lock()
            .entry(id.to_string())
            .or_insert_with(|| Arc::new(Shared::load(node, id)))
            .clone()
    }

    /// Starts, restarts and stops pipelines to match `state`.
    async fn reconcile(&self, node: &Arc<Node>, meta: &MetaNode, state: &ClusterState) {
        let wanted = wanted(state, meta.id());
        let stale: Vec<String> = {
            let running = self.running.lock();
            running
                .iter()
                .filter(|(id, r)| wanted.get(*id) != Some(&r.spec))
                .map(|(id, _)| id.clone())
                .collect()
        };
        for id in stale {
            self.stop(&id).await;
        }
        // Deleted replications' checkpoints go with them.
        let deleted: Vec<Arc<Shared>> = {
            let mut shared = self.shared.lock();
            let gone: Vec<String> = shared
                .keys()
                .filter(|id| !state.replications().contains_key(*id))
                .cloned()
                .collect();
            gone.iter().filter_map(|id| shared.remove(id)).collect()
        };
        for s in deleted {
            tokio::task::spawn_blocking(move || s.remove_saved());
        }
        for (id, spec) in wanted {
            if self.running.lock().contains_key(&id) {
                continue;
            }
            let shared = self.shared(node, &id);
            let stop = Arc::new(Notify::new());
            let task = tokio::spawn(pipeline::run(
                node.clone(),
                meta.clone(),
                shared,
                spec.clone(),
                stop.clone(),
            ));
            tracing::info!(replication = %id, vbuckets = spec.vbuckets.len(), "XDCR pipeline started");
            self.running.lock().insert(id, Running { spec, stop, task });
        }
    }

    async fn stop(&self, id: &str) {
        let Some(r) = self.running.lock().remove(id) else {
            return;
        };
        r.stop.notify_one();
        let abort = r.task.abort_handle();
        if tokio::time::timeout(STOP_WAIT, r.task).await.is_err() {
            tracing::warn!(replication = %id, "XDCR pipeline did not stop in time; abandoned");
            abort.abort();
        }
        tracing::info!(replication = %id, "XDCR pipeline stopped");
    }

    /// Stops every pipeline (the node shuts down); their checkpoints are saved.
    pub async fn stop_all(&self) {
        let ids: Vec<String> = self.running.lock().keys().cloned().collect();
        for id in ids {
            self.stop(&id).await;
        }
    }

    /// This node's figures for every replication in `state`, by id, as JSON.
    pub fn local_stats(
        &self,
        node: &Node,
        state: &ClusterState,
        me: sluice_cluster::NodeId,
    ) -> BTreeMap<String, serde_json::Value> {
        self.local_figures(node, state, me)
            .into_iter()
            .map(|l| {
                let mut json =
                    stats::to_json(&l.figures.values, &l.figures.latency_us, l.last_error);
                json["running_here"] = serde_json::json!(l.running);
                json["active_vbuckets_here"] = serde_json::json!(l.actives);
                (l.figures.id, json)
            })
            .collect()
    }

    /// This node's figures for every replication in `state`. `changes_left` counts the
    /// changes of the vbuckets active here past their checkpoints.
    pub fn local_figures(
        &self,
        node: &Node,
        state: &ClusterState,
        me: sluice_cluster::NodeId,
    ) -> Vec<LocalFigures> {
        let mut out = Vec::new();
        for (id, def) in state.replications() {
            let shared = self.shared(node, id);
            let actives = state
                .map(&def.from_bucket)
                .map(|m| actives_of(m, me))
                .unwrap_or_default();
            let highs: BTreeMap<VbId, u64> = node
                .buckets
                .get(&def.from_bucket)
                .map(|b| {
                    b.engine
                        .vb_visible_seqnos(None)
                        .into_iter()
                        .map(|(vb, s)| (vb, s.0))
                        .collect()
                })
                .unwrap_or_default();
            let replicated = state.xdcr_checkpoints(id);
            let left: u64 = actives
                .iter()
                .map(|vb| {
                    let high = highs.get(vb).copied().unwrap_or(0);
                    let theirs = replicated.and_then(|r| r.get(&vb.0)).map_or(0, |c| c.seqno);
                    high.saturating_sub(shared.checkpoint_seqno(*vb).max(theirs))
                })
                .sum();
            out.push(LocalFigures {
                figures: XdcrFigures {
                    id: id.clone(),
                    bucket: def.from_bucket.clone(),
                    values: shared.stats.values(left),
                    latency_us: shared.stats.latency(),
                },
                running: self.running.lock().contains_key(id),
                actives: actives.len(),
                last_error: shared.stats.last_error(),
            });
        }
        out
    }
}

/// One replication's figures on this node, and its pipeline's state here.
pub struct LocalFigures {
    pub figures: XdcrFigures,
    pub running: bool,
    /// Vbuckets of its source bucket active here.
    pub actives: usize,
    pub last_error: Option<String>,
}

/// The node's STAT `xdcr` and `/metrics` read the figures through this.
pub struct StatsView {
    pub control: std::sync::Weak<crate::Control>,
    pub meta: MetaNode,
}

impl ControlStats for StatsView {
    fn xdcr(&self) -> Vec<XdcrFigures> {
        let Some(control) = self.control.upgrade() else {
            return Vec::new();
        };
        let state = self.meta.state().borrow().clone();
        control
            .xdcr
            .local_figures(&control.node, &state, self.meta.id())
            .into_iter()
            .map(|l| l.figures)
            .collect()
    }
}

/// Keeps this node's pipelines following the metadata, until the node stops.
pub async fn follow(control: Arc<crate::Control>, meta: MetaNode) {
    let mut rx = meta.state();
    loop {
        let state = rx.borrow_and_update().clone();
        control.xdcr.reconcile(&control.node, &meta, &state).await;
        if rx.changed().await.is_err() {
            return;
        }
    }
}
