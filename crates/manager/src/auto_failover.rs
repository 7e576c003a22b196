//! Automatic failover, run by the metadata leader: probe every node a map lists, feed the
//! answers to `sluice_cluster::auto_failover`, and fail a node over when it says so.
//!
//! A probe is `GET /health` on the node's admin port, bounded by [`PROBE_TIMEOUT`]: a
//! stopped process (SIGSTOP) still accepts TCP connections through its kernel backlog, but
//! never answers, so a probe must time out rather than only check the connection.

use crate::failover::fail_over_node;
use sluice_cluster::auto_failover::{AutoFailover, Decision};
use sluice_cluster::metadata::NodeStatus;
use sluice_cluster::{NodeId, NodeInfo};
use sluice_meta::MetaNode;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long one probe may take before the node counts as down for it.
const PROBE_TIMEOUT: Duration = Duration::from_millis(1000);

/// Probes every `interval` while this node is the leader; never returns (aborted on
/// shutdown).
pub async fn run(meta: MetaNode, timeout: Duration) {
    // Several probes per timeout, so that one slow answer does not decide alone.
    let interval = (timeout / 4).clamp(Duration::from_millis(200), Duration::from_secs(1));
    let mut detector = AutoFailover::new(timeout);
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_held = None;
    loop {
        ticks.tick().await;
        if meta.leader() != Some(meta.id()) {
            detector.reset();
            continue;
        }
        let state = meta.state().borrow().clone();
        // Every node some bucket's map lists, once.
        let mut others: BTreeMap<NodeId, NodeInfo> = BTreeMap::new();
        for (_, map) in state.maps() {
            for n in map.nodes().iter().filter(|n| n.id != meta.id()) {
                others.entry(n.id).or_insert_with(|| n.clone());
            }
        }
        let others = others.into_values();
        let mut probes = tokio::task::JoinSet::new();
        for n in others {
            let meta = meta.clone();
            probes.spawn(async move {
                let probe = crate::peer::call(&meta, &n, "/health", None, PROBE_TIMEOUT);
                let up = probe.await.is_ok_and(|a| a.ok());
                (n.id, up)
            });
        }
        let now = Instant::now();
        while let Some(probe) = probes.join_next().await {
            if let Ok((id, up)) = probe {
                detector.observe(id, up, now);
            }
        }
        let failed = state.nodes_with(NodeStatus::FailedOver);
        let vbmaps: Vec<&sluice_cluster::VbMap> = state.maps().map(|(_, m)| m.vbmap()).collect();
        match detector.decide(&vbmaps, &failed, Instant::now()) {
            Decision::Nothing => last_held = None,
            Decision::Held(why) => {
                if last_held.as_ref() != Some(&why) {
                    tracing::warn!(reason = %why, "automatic failover held back");
                    last_held = Some(why);
                }
            }
            Decision::FailOver(node) => {
                tracing::warn!(%node, ?timeout, "node unreachable for the auto-failover timeout: failing it over");
                match fail_over_node(&meta, node, false).await {
                    Ok(report) => {
                        tracing::warn!(?report, "automatic failover done");
                        detector.reset();
                    }
                    Err(e) => tracing::error!(%node, error = %e, "automatic failover failed"),
                }
            }
        }
    }
}
