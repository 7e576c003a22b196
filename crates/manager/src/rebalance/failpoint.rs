//! A fault the tests inject into the orchestrator: `SLUICE_FAILPOINT=rebalance-after-takeover@N`
//! in the environment of node N aborts its process, when it orchestrates, right after the
//! first takeover whose two ends are other nodes, before the chain that records it is
//! published. (The node id keeps the fault to one node when a whole cluster shares the
//! environment, so that the leader after it does not die the same way.) That leaves what a
//! crash at the worst moment leaves: the copies switched, the map naming the old active, and
//! a rebalance recorded with no orchestrator (the janitor's test,
//! `tests/interop/test_cluster_heal.py`). Unset, it costs one environment read per process.

use sluice_cluster::NodeId;
use sluice_types::VbId;
use std::sync::OnceLock;

const VAR: &str = "SLUICE_FAILPOINT";
const AFTER_TAKEOVER: &str = "rebalance-after-takeover";

fn armed(name: &str, me: NodeId) -> bool {
    static SET: OnceLock<Option<String>> = OnceLock::new();
    let set = SET.get_or_init(|| std::env::var(VAR).ok());
    set.as_deref() == Some(format!("{name}@{}", me.0).as_str())
}

/// Called once `to` holds `vb` active, taken over from `from`, on orchestrator `me`.
pub(super) fn after_takeover(me: NodeId, from: NodeId, to: NodeId, vb: VbId) {
    if from != me && to != me && armed(AFTER_TAKEOVER, me) {
        eprintln!(
            "failpoint {AFTER_TAKEOVER}: {vb} taken over from node {from} by node {to}; aborting"
        );
        tracing::error!(%vb, %from, %to,
            "failpoint {AFTER_TAKEOVER}: aborting the orchestrator's process before the chain is published");
        std::process::abort();
    }
}
