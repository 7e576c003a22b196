//! When to fail a node over without an operator: the decision, fed with health observations
//! and the time; the caller probes the nodes and proposes the failover.
//!
//! A node is failed over automatically only when all of these hold (the conservative rules
//! of the reference cluster manager):
//!
//! - it has been unreachable for the whole timeout, every probe in that time failing;
//! - it is the only node the map lists that is down (several nodes down at once looks like a
//!   network problem on this side as much as theirs; an operator decides);
//! - no other node is failed over already (one automatic failover, then a rebalance or an
//!   operator re-arms it: a cluster shrinking node by node on its own loses its replicas);
//! - failing it over loses no vbucket (each of its actives has a replica elsewhere).
//!
//! The caller only runs it on the metadata leader, which by being leader has a majority of
//! the voters: a node cut off with a minority cannot fail the majority over.

use crate::failover::fail_over;
use crate::node::NodeId;
use crate::vbmap::VbMap;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Why a down node is not failed over (reported so an operator can see it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Held {
    #[error("nodes {0:?} are down at once: failing over more than one needs an operator")]
    SeveralDown(Vec<NodeId>),
    #[error("node {0} is failed over already: automatic failover is re-armed by a rebalance")]
    AlreadyFailedOver(NodeId),
    #[error("failing over node {node} would lose {lost} vbuckets (no replica elsewhere)")]
    WouldLoseData { node: NodeId, lost: usize },
}

/// The outcome of one look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing is down long enough.
    Nothing,
    FailOver(NodeId),
    Held(Held),
}

#[derive(Debug)]
pub struct AutoFailover {
    timeout: Duration,
    /// Nodes whose probes fail, since when (the first failure after a success).
    down_since: BTreeMap<NodeId, Instant>,
}

impl AutoFailover {
    pub fn new(timeout: Duration) -> AutoFailover {
        AutoFailover {
            timeout,
            down_since: BTreeMap::new(),
        }
    }

    /// A probe of `node` at `now` came back (`up`) or failed.
    pub fn observe(&mut self, node: NodeId, up: bool, now: Instant) {
        if up {
            self.down_since.remove(&node);
        } else {
            self.down_since.entry(node).or_insert(now);
        }
    }

    /// Forgets every observation (this node stopped being the leader: a new leader starts
    /// its own clock).
    pub fn reset(&mut self) {
        self.down_since.clear();
    }

    /// What to do at `now` given every bucket's map and the nodes already failed over. A
    /// node no map lists is never failed over; one whose failover loses a vbucket of any
    /// bucket is held.
    pub fn decide(&self, maps: &[&VbMap], failed_over: &[NodeId], now: Instant) -> Decision {
        let listed: std::collections::BTreeSet<NodeId> =
            maps.iter().flat_map(|m| m.nodes()).collect();
        let down: Vec<NodeId> = self
            .down_since
            .keys()
            .copied()
            .filter(|n| listed.contains(n))
            .collect();
        let [node] = down[..] else {
            return match down.len() {
                0 => Decision::Nothing,
                _ => Decision::Held(Held::SeveralDown(down)),
            };
        };
        if now.duration_since(self.down_since[&node]) < self.timeout {
            return Decision::Nothing;
        }
        if let Some(&other) = failed_over.first() {
            return Decision::Held(Held::AlreadyFailedOver(other));
        }
        let lost: usize = maps.iter().map(|m| fail_over(m, &[node]).lost.len()).sum();
        if lost > 0 {
            return Decision::Held(Held::WouldLoseData { node, lost });
        }
        Decision::FailOver(node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::place;

    const T: Duration = Duration::from_secs(5);

    fn map(nodes: u32, replicas: u8) -> VbMap {
        let ids: Vec<NodeId> = (0..nodes).map(NodeId).collect();
        place(&ids, 16, replicas).unwrap()
    }

    #[test]
    fn fails_over_a_node_down_for_the_whole_timeout() {
        let t0 = Instant::now();
        let m = map(3, 1);
        let mut a = AutoFailover::new(T);
        a.observe(NodeId(1), false, t0);
        a.observe(NodeId(1), false, t0 + Duration::from_secs(3));
        assert_eq!(
            a.decide(&[&m], &[], t0 + Duration::from_secs(4)),
            Decision::Nothing
        );
        assert_eq!(a.decide(&[&m], &[], t0 + T), Decision::FailOver(NodeId(1)));
        // One good probe restarts the clock.
        a.observe(NodeId(1), true, t0 + T);
        a.observe(NodeId(1), false, t0 + T + Duration::from_secs(1));
        assert_eq!(a.decide(&[&m], &[], t0 + T + T), Decision::Nothing);
        assert_eq!(
            a.decide(&[&m], &[], t0 + T + T + Duration::from_secs(1)),
            Decision::FailOver(NodeId(1))
        );
    }

    #[test]
    fn holds_when_several_are_down_or_one_is_failed_over_or_data_would_be_lost() {
        let t0 = Instant::now();
        let later = t0 + T * 2;
        let mut a = AutoFailover::new(T);
        a.observe(NodeId(1), false, t0);
        a.observe(NodeId(2), false, t0);
        assert_eq!(
            a.decide(&[&map(4, 1)], &[], later),
            Decision::Held(Held::SeveralDown(vec![NodeId(1), NodeId(2)]))
        );
        a.observe(NodeId(2), true, t0);
        assert_eq!(
            a.decide(&[&map(4, 1)], &[NodeId(7)], later),
            Decision::Held(Held::AlreadyFailedOver(NodeId(7)))
        );
        assert_eq!(
            a.decide(&[&map(3, 0)], &[], later),
            Decision::Held(Held::WouldLoseData {
                node: NodeId(1),
                lost: fail_over(&map(3, 0), &[NodeId(1)]).lost.len()
            })
        );
        // A bucket without replicas holds the failover back, whatever the others have.
        assert_eq!(
            a.decide(&[&map(3, 1), &map(3, 0)], &[], later),
            Decision::Held(Held::WouldLoseData {
                node: NodeId(1),
                lost: fail_over(&map(3, 0), &[NodeId(1)]).lost.len()
            })
        );
        // A node the map does not list (joining, or already failed over) is not counted.
        let mut b = AutoFailover::new(T);
        b.observe(NodeId(9), false, t0);
        assert_eq!(b.decide(&[&map(3, 1)], &[], later), Decision::Nothing);
        b.reset();
        b.observe(NodeId(0), false, later);
        assert_eq!(b.decide(&[&map(3, 1)], &[], later), Decision::Nothing);
    }
}
