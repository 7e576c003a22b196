//! Fencing, carried out: probe the metadata voters, feed `sluice_cluster::fencing::Fence`,
//! and set the node's fenced flag, which makes it refuse reads and writes on its active
//! vbuckets (NOT_MY_VBUCKET: clients look for a newer map elsewhere) until it reaches
//! enough voters again.
//!
//! Probes are `GET /health` on each voter's admin port, like auto-failover's. The bound
//! (`FENCE_BOUND`, 1.5 s) is shorter than the shortest automatic-failover timeout the
//! command line accepts (2 s), so a node the majority fails over has stopped serving first.

use sluice_client::admin_http;
use sluice_cluster::fencing::{Fence, FenceState, Reachability};
use sluice_meta::MetaNode;
use sluice_server::Node;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One probe round every this long.
pub const PROBE_EVERY: Duration = Duration::from_millis(200);
/// A voter that does not answer in this long counts as unreachable for the round.
pub const PROBE_TIMEOUT: Duration = Duration::from_millis(300);
/// How long the unreachable voters must be able to outvote this node before it fences.
pub const FENCE_AFTER: Duration = Duration::from_millis(1000);
/// The longest a cut-off node keeps serving its actives.
pub const FENCE_BOUND: Duration = Duration::from_millis(1500);

/// Runs until aborted.
pub async fn run(meta: MetaNode, node: Arc<Node>) {
    debug_assert_eq!(
        Fence::bound(FENCE_AFTER, PROBE_EVERY, PROBE_TIMEOUT),
        FENCE_BOUND
    );
    let mut fence = Fence::new(FENCE_AFTER, Instant::now());
    let mut ticks = tokio::time::interval(PROBE_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let source = meta.config().source_ip;
    loop {
        ticks.tick().await;
        let voters = meta.membership().voters;
        let state = meta.state().borrow().clone();
        let mut probes = tokio::task::JoinSet::new();
        for id in voters.iter().copied().filter(|&id| id != meta.id()) {
            // A voter the state does not list (yet) cannot be probed: it counts as
            // unreachable, which errs towards fencing.
            let addr = state
                .node(id)
                .map(|e| format!("{}:{}", e.info.host, e.info.admin_port));
            probes.spawn(async move {
                match addr {
                    Some(addr) => {
                        admin_http::call_from(source, &addr, "/health", None, PROBE_TIMEOUT)
                            .await
                            .is_ok_and(|a| a.ok())
                    }
                    None => false,
                }
            });
        }
        let mut unreachable = 0;
        while let Some(up) = probes.join_next().await {
            if !matches!(up, Ok(true)) {
                unreachable += 1;
            }
        }
        let r = Reachability {
            voters: voters.len(),
            unreachable,
        };
        match fence.observe(r, Instant::now()) {
            Some(FenceState::Fenced) => {
                tracing::error!(voters = r.voters, unreachable = r.unreachable,
                    "cut off from a majority of the voters: refusing reads and writes on this node's actives");
                node.set_fenced(true);
            }
            Some(FenceState::Serving) => {
                tracing::warn!("a majority of the voters is reachable again: serving actives");
                node.set_fenced(false);
            }
            None => {}
        }
    }
}
