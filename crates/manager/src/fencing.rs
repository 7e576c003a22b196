//! Fencing, carried out: probe the metadata voters, feed `sluice_cluster::fencing::Fence`,
//! and set the node's fenced flag, which makes it refuse reads and writes on its active
//! vbuckets (NOT_MY_VBUCKET: clients look for a newer map elsewhere) until it reaches
//! enough voters again.
//!
//! Probes ask each voter's admin port for the map revision it serves. The bound
//! (`FENCE_BOUND`, 1.5 s) is shorter than the shortest automatic-failover timeout the
//! command line accepts (2 s), so a node the majority fails over has stopped serving first.
//!
//! Each round that finds no majority of voters silent or serving a newer map also grants
//! the node's serving lease (`LEASE`, 1 s from the round's start), which every request
//! checks against the clock: a node that was frozen past its failover wakes fenced, and
//! stays so while the voters know the newer map it has not applied yet.

use sluice_cluster::fencing::{Fence, FenceState, Reachability};
use sluice_meta::MetaNode;
use sluice_server::Node;
use std::collections::BTreeMap;
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
/// How long after a round began its word lets the node serve (`Node::lease`). Shorter
/// than the fence bound, so the lease never lets a node serve past it.
pub const LEASE: Duration = FENCE_AFTER;
/// What a probe asks: the map revision the voter serves of each bucket.
const MAP_REV: &str = "/internal/rebalance/map_rev";

/// One voter's answer to a round's probe.
enum Probe {
    /// Answered, serving no newer map than this node.
    Agrees,
    /// Answered with a newer map (or an answer that could not be read).
    KnowsNewer,
    /// No answer within the probe timeout.
    Silent,
}

/// Whether a voter's `map_revs` (bucket name → map revision it serves) shows a newer map
/// of a bucket this node serves than `mine` (an answer that cannot be read counts as
/// newer). Buckets this node does not serve yet do not count: their maps cannot be stale
/// here.
fn knows_newer(theirs: &serde_json::Value, mine: &BTreeMap<String, u64>) -> bool {
    let Some(theirs) = theirs.as_object() else {
        return true;
    };
    mine.iter().any(|(bucket, &rev)| {
        theirs
            .get(bucket)
            .is_some_and(|r| r.as_u64().is_none_or(|r| r > rev))
    })
}

/// Runs until aborted.
pub async fn run(meta: MetaNode, node: Arc<Node>) {
    debug_assert_eq!(
        Fence::bound(FENCE_AFTER, PROBE_EVERY, PROBE_TIMEOUT),
        FENCE_BOUND
    );
    let mut fence = Fence::new(FENCE_AFTER, Instant::now());
    let mut ticks = tokio::time::interval(PROBE_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // A node restarting into a cluster (other voters known) holds no lease until its first
    // round: the cluster may have failed it over meanwhile, and it must not serve its old
    // actives before it has asked. A node alone serves at once (nobody can fail it over),
    // and needs a lease only from the round that first finds other voters.
    if meta.membership().voters.iter().any(|&v| v != meta.id()) {
        node.lease.require();
    }
    loop {
        ticks.tick().await;
        let began = Instant::now();
        let voters = meta.membership().voters;
        let state = meta.state().borrow().clone();
        // Each bucket's map revision served here.
        let mine: Arc<BTreeMap<String, u64>> = Arc::new(
            node.buckets
                .all()
                .iter()
                .map(|b| (b.name.clone(), b.cluster_map().rev().0))
                .collect(),
        );
        let mut probes = tokio::task::JoinSet::new();
        for id in voters.iter().copied().filter(|&id| id != meta.id()) {
            // A voter the state does not list (yet) cannot be probed: it counts as
            // unreachable, which errs towards fencing.
            let info = state.node(id).map(|e| e.info.clone());
            let (meta, mine) = (meta.clone(), mine.clone());
            probes.spawn(async move {
                let Some(info) = info else {
                    return Probe::Silent;
                };
                // A peer that refuses this node's secret answers 401: Silent, as it should
                // be, since it is no member this node can count on.
                match crate::peer::call(&meta, &info, MAP_REV, None, PROBE_TIMEOUT).await {
                    Ok(a) if a.ok() => match knows_newer(&a.body["map_revs"], &mine) {
                        false => Probe::Agrees,
                        true => Probe::KnowsNewer,
                    },
                    _ => Probe::Silent,
                }
            });
        }
        let (mut unreachable, mut newer) = (0, 0);
        while let Some(p) = probes.join_next().await {
            match p {
                Ok(Probe::Agrees) => {}
                Ok(Probe::KnowsNewer) => newer += 1,
                Ok(Probe::Silent) | Err(_) => unreachable += 1,
            }
        }
        let r = Reachability {
            voters: voters.len(),
            unreachable,
        };
        // The lease also counts the voters that know a newer map: a failover this node has
        // not heard of makes them so.
        let word = Reachability {
            voters: voters.len(),
            unreachable: unreachable + newer,
        };
        if voters.iter().all(|&v| v == meta.id()) {
            node.lease.grant(None);
        } else if !word.outvoted() {
            node.lease.grant(Some(began + LEASE));
        }
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

#[cfg(test)]
mod tests {
    use super::knows_newer;
    use serde_json::json;
    use std::collections::BTreeMap;

    #[test]
    fn a_voter_knows_newer_only_of_a_bucket_served_here() {
        let mine: BTreeMap<String, u64> = [("a".to_string(), 5), ("b".to_string(), 2)].into();
        assert!(!knows_newer(&json!({"a": 5, "b": 1}), &mine));
        assert!(knows_newer(&json!({"a": 5, "b": 3}), &mine));
        // A bucket not served here yet, or one the voter does not serve: no word either way.
        assert!(!knows_newer(&json!({"a": 4, "c": 9}), &mine));
        assert!(knows_newer(&json!({"a": "x"}), &mine));
        assert!(knows_newer(&json!(null), &mine));
    }
}
