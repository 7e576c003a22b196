//! Makes this node what a bucket's cluster map says it is, each time the map changes (one
//! agent per bucket):
//!
//! - each vbucket's state: active where the map puts the active copy here, replica where it
//!   puts a replica here, dead elsewhere (the data stays until a rebalance drops it);
//! - one replication feed per source node, at high priority, carrying exactly the replica
//!   vbuckets whose active copy that node holds. A feed whose vbucket set changes is
//!   restarted with the new set; it resumes every vbucket from the replica's own position.
//!
//! The agent acts on map changes only, never on a timer: between a DCP takeover (which
//! switches the two copies' states itself) and the map revision that records it, the old map
//! would undo the takeover.
//!
//! Rebalance: a vbucket a rebalance is building here (`Node::builds`) keeps its state until a
//! map lists this node in its chain; then the build stops and the feed follows it. A takeover
//! request (`Control::request_takeover`) for a replica a feed follows goes to that feed.
//!
//! Held vbuckets (`restart_hold`): after a restart that lost data, a vbucket the map makes
//! active here stays dead until it is decided; the other states apply as usual.
//!
//! Promotion (failover): a replica the map makes active becomes active with a new
//! failover-log branch (`Bucket::set_vbucket_state`), so every consumer that followed the
//! old active rolls back to the point both histories share.

use crate::control::BucketControl;
use sluice_cluster::NodeId;
use sluice_server::{MapView, Node, Replication, ReplicationSpec, TAKEOVERS_QUEUED_MAX};
use sluice_types::{VbId, VbState};
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::{watch, Notify};

/// What one map asks of this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentPlan {
    /// The state of every vbucket of the map.
    pub states: Vec<(VbId, VbState)>,
    /// Per source node: its KV address and the vbuckets to follow from it, in order.
    pub feeds: BTreeMap<NodeId, FeedSpec>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedSpec {
    pub source: String,
    pub vbuckets: Vec<VbId>,
}

/// What `view` asks of the node it was rendered for.
pub fn plan(view: &MapView, data_tls: bool) -> AgentPlan {
    let me = view.this;
    let mut states = Vec::new();
    let mut feeds: BTreeMap<NodeId, FeedSpec> = BTreeMap::new();
    for (vb, chain) in view.map.vbmap().iter() {
        let state = if chain.active == Some(me) {
            VbState::Active
        } else if chain.replicas.contains(&Some(me)) {
            VbState::Replica
        } else {
            VbState::Dead
        };
        states.push((vb, state));
        // A replica whose active copy is lost has nothing to follow until a new map.
        if let (VbState::Replica, Some(source)) = (state, chain.active) {
            let Some(info) = view.map.nodes().iter().find(|n| n.id == source) else {
                continue;
            };
            feeds
                .entry(source)
                .or_insert_with(|| FeedSpec {
                    source: info.kv_addr(data_tls),
                    vbuckets: Vec::new(),
                })
                .vbuckets
                .push(vb);
        }
    }
    AgentPlan { states, feeds }
}

/// The running agent.
pub struct ClusterAgent {
    stop: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl ClusterAgent {
    pub fn start(node: Arc<Node>, control: Arc<BucketControl>) -> ClusterAgent {
        let stop = Arc::new(Notify::new());
        let maps = control.bucket.watch_cluster_map();
        let (tx, takeovers) = tokio::sync::mpsc::channel(TAKEOVERS_QUEUED_MAX);
        *control.agent_takeovers.lock() = Some(tx);
        let task = tokio::spawn(run(node, control, maps, takeovers, stop.clone()));
        ClusterAgent { stop, task }
    }

    /// Stops following the map and stops every feed.
    pub async fn stop(self) {
        self.stop.notify_one();
        let _ = self.task.await;
    }
}

struct Feed {
    spec: FeedSpec,
    replication: Replication,
}

async fn run(
    node: Arc<Node>,
    control: Arc<BucketControl>,
    mut maps: watch::Receiver<Arc<MapView>>,
    mut takeovers: tokio::sync::mpsc::Receiver<VbId>,
    stop: Arc<Notify>,
) {
    let mut feeds: BTreeMap<NodeId, Feed> = BTreeMap::new();
    let mut apply_map = true;
    loop {
        if apply_map {
            let view = maps.borrow_and_update().clone();
            apply(&node, &control, &view, &mut feeds).await;
        }
        tokio::select! {
            _ = stop.notified() => break,
            changed = maps.changed() => {
                if changed.is_err() { break }
                apply_map = true;
            }
            Some(vb) = takeovers.recv() => {
                // A rebalance moves the active copy of `vb` here from the node this replica
                // follows: its feed asks for the takeover stream.
                apply_map = false;
                match feeds.values().find(|f| f.spec.vbuckets.contains(&vb)) {
                    Some(f) => {
                        if !f.replication.takeover(vb) {
                            tracing::warn!(%vb, "takeover could not be asked of the feed");
                        }
                    }
                    None => tracing::warn!(%vb, "takeover asked for a vbucket no feed follows here"),
                }
            }
        }
    }
    control.agent_takeovers.lock().take();
    for (_, feed) in std::mem::take(&mut feeds) {
        feed.replication.stop().await;
    }
}

async fn apply(
    node: &Arc<Node>,
    control: &BucketControl,
    view: &MapView,
    feeds: &mut BTreeMap<NodeId, Feed>,
) {
    let bucket = &control.bucket;
    let data_tls = node.config.cluster_encryption.data();
    let plan = plan(view, data_tls);
    // Feeds first: a vbucket leaving a feed must stop being written by it before its state
    // changes (a promoted replica must not keep applying its old active's stream).
    let stale: Vec<NodeId> = feeds
        .iter()
        .filter(|(id, f)| plan.feeds.get(id) != Some(&f.spec))
        .map(|(id, _)| *id)
        .collect();
    for id in stale {
        let feed = feeds.remove(&id).expect("listed");
        feed.replication.stop().await;
    }
    // A rebalance build stops once the map lists this node in its vbucket's chain (the
    // map's feed takes over from the copy it made); until then its state is the build's.
    let chained = |vb: VbId| {
        plan.states
            .iter()
            .any(|(v, s)| *v == vb && *s != VbState::Dead)
    };
    control.builds.stop(chained).await;
    let held = control.held.lock();
    for (vb, state) in &plan.states {
        if *state == VbState::Dead && control.builds.contains(*vb) {
            continue;
        }
        // A restart that lost data holds its actives back until each is decided.
        let state = match state {
            VbState::Active if held.contains(vb) => VbState::Dead,
            other => *other,
        };
        if let Err(e) = bucket.engine.set_vbucket_state(*vb, state) {
            tracing::error!(%vb, ?state, error = %e, "cannot apply the map's vbucket state");
        }
    }
    drop(held);
    for (id, spec) in plan.feeds {
        if feeds.contains_key(&id) {
            continue;
        }
        let who = node.peer_credentials();
        let replication = Replication::start(
            node.clone(),
            bucket.clone(),
            ReplicationSpec {
                source: spec.source.clone(),
                // The cluster identity: only its seqno acks and takeovers count.
                username: who.username,
                password: who.password,
                bucket: bucket.name.clone(),
                vbuckets: spec.vbuckets.clone(),
                name: format!("replication:{id}->{}:{}", view.this, bucket.name),
                consumer_name: view.this.0.to_string(),
                tls: data_tls,
            },
        );
        feeds.insert(id, Feed { spec, replication });
    }
    control.set_applied(view.rev());
    tracing::info!(bucket = %bucket.name, rev = view.rev().0, node = %view.this,
        feeds = feeds.len(), "cluster map applied");
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_cluster::{fail_over, place, ClusterMap, NodeInfo};
    use sluice_engine::BucketType;
    use sluice_server::BucketFacts;

    fn view(map: ClusterMap, this: u32) -> MapView {
        let facts = BucketFacts {
            name: "default",
            uuid: "00",
            bucket_type: BucketType::Couchbase,
            manifest_uid: 0,
        };
        let me = map.nodes()[this as usize].clone();
        MapView::render(map, NodeId(this), &me, &facts)
    }

    fn three_nodes() -> ClusterMap {
        let ids = [NodeId(0), NodeId(1), NodeId(2)];
        let nodes = ids
            .iter()
            .map(|&id| NodeInfo {
                id,
                host: "127.0.0.1".into(),
                kv_port: 11210 + id.0 as u16,
                admin_port: 8091 + id.0 as u16,
                tls: None,
                services: sluice_cluster::Services::ALL,
            })
            .collect();
        ClusterMap::new(nodes, place(&ids, 16, 1).unwrap()).unwrap()
    }

    #[test]
    fn states_and_feeds_follow_the_chains() {
        let map = three_nodes();
        for me in 0..3u32 {
            let p = plan(&view(map.clone(), me), false);
            assert_eq!(p.states.len(), 16);
            for ((vb, state), (_, chain)) in p.states.iter().zip(map.vbmap().iter()) {
                let want = if chain.active == Some(NodeId(me)) {
                    VbState::Active
                } else if chain.replicas.contains(&Some(NodeId(me))) {
                    VbState::Replica
                } else {
                    VbState::Dead
                };
                assert_eq!(*state, want, "{vb} on n{me}");
            }
            // Each replica vbucket is fed from its active's node, and nothing else is fed.
            let replicas: Vec<VbId> = p
                .states
                .iter()
                .filter(|(_, s)| *s == VbState::Replica)
                .map(|(vb, _)| *vb)
                .collect();
            let mut fed: Vec<VbId> = p.feeds.values().flat_map(|f| f.vbuckets.clone()).collect();
            fed.sort();
            assert_eq!(fed, replicas, "n{me}");
            assert!(!p.feeds.contains_key(&NodeId(me)), "no feed from itself");
            for (src, f) in &p.feeds {
                assert_eq!(f.source, format!("127.0.0.1:{}", 11210 + src.0 as u16));
                for vb in &f.vbuckets {
                    assert_eq!(map.vbmap().chain(*vb).unwrap().active, Some(*src));
                }
            }
        }
    }

    #[test]
    fn a_failover_promotes_and_drops_the_failed_source() {
        let map = three_nodes();
        let out = fail_over(map.vbmap(), &[NodeId(1)]);
        let after = map.with_vbmap(out.map).unwrap();
        let p = plan(&view(after, 0), false);
        assert!(!p.feeds.contains_key(&NodeId(1)));
        for promo in out.promotions.iter().filter(|p| p.to == NodeId(0)) {
            assert!(p.states.contains(&(promo.vb, VbState::Active)), "{promo:?}");
        }
    }
}
