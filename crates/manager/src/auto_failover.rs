//! Automatic failover, run by the metadata leader: probe every node the map lists, feed the
//! answers to `sluice_cluster::auto_failover`, and fail a node over when it says so.
//!
//! A probe is `GET /health` on the node's admin port, bounded by [`PROBE_TIMEOUT`]: a
//! stopped process (SIGSTOP) still accepts TCP connections through its kernel backlog, but
//! never answers, so a probe must time out rather than only check the connection.

use crate::failover::fail_over_node;
use sluice_client::admin_http;
use sluice_cluster::auto_failover::{AutoFailover, Decision};
use sluice_cluster::metadata::NodeStatus;
use sluice_cluster::NodeInfo;
use sluice_meta::MetaNode;
use std::time::{Duration, Instant};

/// How long one probe may take before the node counts as down for it.
const PROBE_TIMEOUT: Duration = Duration::from_millis(1000);

/// Probes every `interval` while this node is the leader; never returns (aborted on
/// shutdown).
pub async fn run(meta: MetaNode, bucket: String, timeout: Duration) {
    // Several probes per timeout, so that one slow answer does not decide alone.
    let interval = (timeout / 4).clamp(Duration::from_millis(200), Duration::from_secs(1));
    let mut detector = AutoFailover::new(timeout);
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_held = None;
    let source = meta.config().source_ip;
    loop {
        ticks.tick().await;
        if meta.leader() != Some(meta.id()) {
            detector.reset();
            continue;
        }
        let state = meta.state().borrow().clone();
        let Some(map) = state.map(&bucket) else {
            continue;
        };
        let others: Vec<NodeInfo> = map
            .nodes()
            .iter()
            .filter(|n| n.id != meta.id())
            .cloned()
            .collect();
        let mut probes = tokio::task::JoinSet::new();
        for n in others {
            let who = meta.config().secret.credentials();
            probes.spawn(async move {
                let addr = format!("{}:{}", n.host, n.admin_port);
                let probe =
                    admin_http::call_from(source, &addr, &who, "/health", None, PROBE_TIMEOUT);
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
        match detector.decide(map.vbmap(), &failed, Instant::now()) {
            Decision::Nothing => last_held = None,
            Decision::Held(why) => {
                if last_held.as_ref() != Some(&why) {
                    tracing::warn!(reason = %why, "automatic failover held back");
                    last_held = Some(why);
                }
            }
            Decision::FailOver(node) => {
                tracing::warn!(%node, ?timeout, "node unreachable for the auto-failover timeout: failing it over");
                match fail_over_node(&meta, &bucket, node, false).await {
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
