//! The janitor: what the metadata leader repairs when the vbucket copies the nodes hold
//! disagree with the map, without an operator.
//!
//! Why: a rebalance moves a vbucket in two steps that no single commit covers. The DCP
//! takeover switches the copies themselves (the old active dead, the new one active), and
//! only then does the orchestrator publish the chain that records it. An orchestrator killed
//! between the two leaves a map naming a dead copy: clients loop on NOT_MY_VBUCKET until
//! something else changes the map. A takeover cut short inside the DCP exchange can leave no
//! copy active at all. And a killed orchestrator never sends a move's drops, so moved-out
//! copies stay on disk. Couchbase's janitor, run by its orchestrator, repairs the same.
//!
//! Each pass takes the map and every listed node's report (the map revision its agent has
//! applied, and each copy it holds) and returns the repairs, one of three per vbucket:
//!
//! - **follow a takeover**: the map's active answered that its copy is dead, and exactly one
//!   other node holds it active. Only a takeover makes a copy active without a map saying
//!   so, and a takeover sends its target everything: the map is changed to name that copy
//!   active, the old replicas keep their slots, and the old active fills a free one;
//! - **reactivate**: the map's active answered dead (and not held back by a restart), every
//!   listed node answered, and no copy anywhere is active or pending. The takeover that
//!   turned it dead never finished, so no copy took a write since: the map's active serves
//!   again;
//! - **drop**: a dead copy holding data on a listed node outside the vbucket's chain (a move
//!   whose drop was never sent): deleted;
//! - **stop a build**: a copy a rebalance is building while the metadata records no
//!   rebalance (its orchestrator died, and a failover or an operator ended the rebalance):
//!   the build's stream is stopped, and the copy, outside the chain, turns dead (then
//!   dropped like any other).
//!
//! Nothing is examined while any answering node serves another map revision than the one
//! given (its states may follow a map the janitor does not know). A repair is returned only
//! when the pass before it, on the same revision, found the same repair: a state seen once
//! may be a takeover in flight, a state seen twice a second apart is one nobody is changing.
//! The caller runs passes only while no rebalance orchestrator runs on its node, since a
//! running one disagrees with the map on purpose.

use crate::cluster_map::{ClusterMap, Rev};
use crate::node::NodeId;
use crate::vbmap::Chain;
use sluice_types::{Seqno, VbId, VbState};
use std::collections::{BTreeMap, BTreeSet};

/// One copy, as its node reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyReport {
    pub state: VbState,
    pub high_seqno: Seqno,
    /// Held back by a restart that lost data (`restart_hold`): dead on purpose, decided by
    /// that node.
    pub held: bool,
    /// A rebalance build streams it from the vbucket's active.
    pub building: bool,
}

/// What one node said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeReport {
    /// The map revision the node's agent has applied.
    pub map_rev: Rev,
    pub copies: BTreeMap<VbId, CopyReport>,
}

/// One repair.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Repair {
    /// Publish `chain` for `vb`: it names the copy a takeover made active.
    FollowTakeover { vb: VbId, chain: Chain },
    /// Make `node`'s dead copy of `vb` active again.
    Reactivate { vb: VbId, node: NodeId },
    /// Delete `node`'s dead copy of `vb`.
    Drop { vb: VbId, node: NodeId },
    /// Stop the rebalance build of `vb` on `node`.
    StopBuild { vb: VbId, node: NodeId },
}

/// A pass's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pass {
    /// Repairs to carry out now (seen in this pass and the one before).
    pub repairs: Vec<Repair>,
    /// Every listed node answered on this revision and nothing needs repair: copies and map
    /// agree (a recorded rebalance may be resumed from this map).
    pub settled: bool,
    /// Listed nodes that did not answer.
    pub silent: Vec<NodeId>,
    /// Why nothing was examined, if so: a node serving another revision.
    pub skipped: Option<(NodeId, Rev)>,
}

/// The janitor's memory between passes: the repairs the last pass found, on which revision.
#[derive(Debug, Default)]
pub struct Janitor {
    last: Option<(Rev, BTreeSet<Repair>)>,
}

impl Janitor {
    pub fn new() -> Janitor {
        Janitor::default()
    }

    /// Forgets what earlier passes saw (leadership lost, or an orchestrator started).
    pub fn reset(&mut self) {
        self.last = None;
    }

    /// One pass over `map`, with each listed node's report (`None`: it did not answer), and
    /// whether the metadata records a rebalance (whose builds are then left alone).
    pub fn pass(
        &mut self,
        map: &ClusterMap,
        reports: &BTreeMap<NodeId, Option<NodeReport>>,
        rebalance_recorded: bool,
    ) -> Pass {
        let silent: Vec<NodeId> = map
            .nodes()
            .iter()
            .map(|n| n.id)
            .filter(|id| !matches!(reports.get(id), Some(Some(_))))
            .collect();
        let answered: BTreeMap<NodeId, &NodeReport> = map
            .nodes()
            .iter()
            .filter_map(|n| Some((n.id, reports.get(&n.id)?.as_ref()?)))
            .collect();
        if let Some((&id, r)) = answered.iter().find(|(_, r)| r.map_rev != map.rev()) {
            self.last = None;
            return Pass {
                silent,
                skipped: Some((id, r.map_rev)),
                ..Pass::default()
            };
        }
        let found: BTreeSet<Repair> = map
            .vbmap()
            .iter()
            .flat_map(|(vb, chain)| {
                repairs_for(vb, chain, &answered, silent.is_empty(), rebalance_recorded)
            })
            .collect();
        let confirmed: Vec<Repair> = match &self.last {
            Some((rev, seen)) if *rev == map.rev() => found.intersection(seen).cloned().collect(),
            _ => Vec::new(),
        };
        let settled = silent.is_empty() && found.is_empty();
        self.last = Some((map.rev(), found));
        Pass {
            repairs: confirmed,
            settled,
            silent,
            skipped: None,
        }
    }
}

/// The repairs one vbucket needs, from the nodes that answered (`all_answered`: every listed
/// node did).
fn repairs_for(
    vb: VbId,
    chain: &Chain,
    answered: &BTreeMap<NodeId, &NodeReport>,
    all_answered: bool,
    rebalance_recorded: bool,
) -> Vec<Repair> {
    let copy = |n: NodeId| answered.get(&n).and_then(|r| r.copies.get(&vb));
    let in_state = |s: VbState| -> Vec<NodeId> {
        answered
            .iter()
            .filter(|(_, r)| r.copies.get(&vb).is_some_and(|c| c.state == s))
            .map(|(&n, _)| n)
            .collect()
    };
    let mut out = Vec::new();
    if let Some(active) = chain.active {
        let dead_active = copy(active).is_some_and(|c| c.state == VbState::Dead && !c.held);
        let actives = in_state(VbState::Active);
        if dead_active {
            match actives.as_slice() {
                [taker] => out.push(Repair::FollowTakeover {
                    vb,
                    chain: after_takeover(chain, *taker),
                }),
                [] if all_answered && in_state(VbState::Pending).is_empty() => {
                    out.push(Repair::Reactivate { vb, node: active })
                }
                _ => {}
            }
        }
    }
    for (&node, report) in answered {
        let Some(c) = report.copies.get(&vb) else {
            continue;
        };
        if c.building && !rebalance_recorded {
            out.push(Repair::StopBuild { vb, node });
        } else if c.state == VbState::Dead
            && !c.held
            && !c.building
            && c.high_seqno > Seqno(0)
            && !chain.holds(node)
        {
            out.push(Repair::Drop { vb, node });
        }
    }
    out
}

/// `chain` once `taker` took the active copy over: the old replicas keep their slots (but
/// `taker`'s), and the old active fills the first free one.
fn after_takeover(chain: &Chain, taker: NodeId) -> Chain {
    let mut replicas: Vec<Option<NodeId>> = chain
        .replicas
        .iter()
        .map(|slot| slot.filter(|&n| n != taker))
        .collect();
    if let Some(free) = replicas.iter_mut().find(|s| s.is_none()) {
        *free = chain.active;
    }
    Chain::new(Some(taker), replicas)
}

#[cfg(test)]
mod tests;
