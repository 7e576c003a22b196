//! The replicas' seqno acknowledgements as this node's producers receive them, and the wait
//! of a durable write for enough of them (the rule is `sluice_cluster::durability`).
//!
//! Each replica's consumer names its node (`consumer_name`) and sends DCP_SEQNO_ACKNOWLEDGED
//! after applying a snapshot and as its disk catches up. An ack is kept per (vbucket, node)
//! with the vbucket uuid it was received under, so acks from before a failover or an unclean
//! restart never vouch for the new history. A connection that closes takes its acks with it
//! (unless a newer connection of the same node has acked since).

use crate::node::Node;
use parking_lot::Mutex;
use sluice_cluster::durability::{ReplicaAck, Requirement};
use sluice_cluster::NodeId;
use sluice_types::{Seqno, VbId, VbUuid};
use std::collections::HashMap;
use std::time::Duration;
use tokio::sync::watch;

#[derive(Debug, Clone, Copy)]
struct Entry {
    ack: ReplicaAck,
    /// The producer connection that received it.
    conn: u64,
}

pub struct DurabilityMonitor {
    acks: Mutex<HashMap<(VbId, NodeId), Entry>>,
    /// Bumped on every ack: durable writes waiting look again.
    changed: watch::Sender<u64>,
}

impl Default for DurabilityMonitor {
    fn default() -> Self {
        DurabilityMonitor {
            acks: Mutex::new(HashMap::new()),
            changed: watch::channel(0).0,
        }
    }
}

impl DurabilityMonitor {
    /// Records that `node` holds `vb` up to `in_memory` (and `persisted`, if it said), under
    /// the active's current `vb_uuid`. The latest ack is the truth (one connection delivers
    /// them in order, and a replica that rolled back says so by acking less).
    pub fn ack(
        &self,
        conn: u64,
        vb: VbId,
        node: NodeId,
        vb_uuid: VbUuid,
        in_memory: Seqno,
        persisted: Option<Seqno>,
    ) {
        let ack = ReplicaAck {
            vb_uuid,
            in_memory,
            persisted: persisted.map_or(Seqno(0), |p| p.min(in_memory)),
        };
        self.acks.lock().insert((vb, node), Entry { ack, conn });
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Forgets the acks connection `conn` received: it closed.
    pub fn connection_closed(&self, conn: u64) {
        self.acks.lock().retain(|_, e| e.conn != conn);
    }

    fn is_met(&self, w: &DurableWrite, active_persisted: bool) -> bool {
        let acks = self.acks.lock();
        w.requirement
            .met(w.seqno, w.vb_uuid, active_persisted, |n| {
                acks.get(&(w.vb, n)).map(|e| e.ack)
            })
    }
}

/// A durable write made, waiting to be acknowledged.
#[derive(Debug, Clone)]
pub struct DurableWrite {
    pub vb: VbId,
    pub seqno: Seqno,
    pub vb_uuid: VbUuid,
    pub requirement: Requirement,
    pub timeout: Duration,
}

/// Waits until `seqno` of `vb` is persisted on this node, at most `timeout`: `false` on the
/// timeout, or when the bucket refuses writes after a storage failure.
pub async fn wait_persisted(node: &Node, vb: VbId, seqno: Seqno, timeout: Duration) -> bool {
    let bucket = node.bucket.clone();
    let done = tokio::task::spawn_blocking(move || bucket.wait_persisted(vb, seqno, timeout)).await;
    matches!(done, Ok(Ok(true)))
}

/// Waits until `w` is durable: `true`, or `false` after its timeout or once its vbucket left
/// this node (the outcome is then unknown to the client: the write stays applied here, and
/// may or may not reach the replicas).
pub async fn wait(node: &Node, w: &DurableWrite) -> bool {
    let deadline = tokio::time::Instant::now() + w.timeout;
    let mut changes = node.durability.changed.subscribe();
    let active_persisted = w.requirement.persist_active();
    if active_persisted && !wait_persisted(node, w.vb, w.seqno, w.timeout).await {
        return false;
    }
    loop {
        changes.borrow_and_update();
        if node.durability.is_met(w, active_persisted) {
            return true;
        }
        // The vbucket left this node (a takeover, a failover elsewhere): the acks that would
        // count can no longer come here. Say at once that the outcome is unknown rather than
        // hold the client until its timeout (or until its connection to this node closes).
        if node.bucket.vb_state(w.vb).ok() != Some(sluice_types::VbState::Active) {
            return false;
        }
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return false },
            _ = tokio::time::sleep(STATE_CHECK_EVERY) => {}
            _ = tokio::time::sleep_until(deadline) => return false,
        }
    }
}

/// How often a waiting durable write checks that its vbucket is still active here.
const STATE_CHECK_EVERY: Duration = Duration::from_millis(50);
