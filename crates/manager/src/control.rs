//! What the control plane holds for a node beside the data plane's [`Node`]: the copies a
//! rebalance builds here, the cluster agent's takeover queue, this node's rebalance status
//! when it orchestrates one, and the vbuckets a restart holds back.

use crate::builds::Builds;
use crate::rebalance::SharedStatus;
use crate::restart_hold::Held;
use parking_lot::Mutex;
use sluice_server::Node;
use sluice_types::VbId;
use std::sync::Arc;
use tokio::sync::mpsc;

pub struct Control {
    pub node: Arc<Node>,
    /// Copies a running rebalance builds here before the map lists them.
    pub builds: Builds,
    /// Takeover requests for the cluster agent's feeds (set while the agent runs).
    pub(crate) agent_takeovers: Mutex<Option<mpsc::Sender<VbId>>>,
    /// The rebalance this node orchestrates, if any (`GET /api/v1/cluster/rebalance`).
    pub rebalance: SharedStatus,
    /// The vbuckets a restart that lost data holds back (`restart_hold`).
    pub(crate) held: Held,
    /// The map revision the cluster agent last applied (vbucket states and feeds).
    applied: Mutex<Option<sluice_cluster::Rev>>,
}

impl Control {
    pub fn new(node: Arc<Node>) -> Control {
        Control {
            node,
            builds: Builds::default(),
            agent_takeovers: Mutex::new(None),
            rebalance: SharedStatus::default(),
            held: Held::default(),
            applied: Mutex::new(None),
        }
    }

    /// The map revision the cluster agent last made this node follow (`None` before its
    /// first, or without an agent): until then the vbucket states are warmup's.
    pub fn applied_rev(&self) -> Option<sluice_cluster::Rev> {
        *self.applied.lock()
    }

    pub(crate) fn set_applied(&self, rev: sluice_cluster::Rev) {
        *self.applied.lock() = Some(rev);
    }

    /// Asks whichever replication follows replica `vb` here (a rebalance build, or the
    /// agent's feed from its active) to take it over. `false` if none can be asked.
    pub fn request_takeover(&self, vb: VbId) -> bool {
        if self.builds.takeover(vb) {
            return true;
        }
        match &*self.agent_takeovers.lock() {
            Some(tx) => tx.try_send(vb).is_ok(),
            None => false,
        }
    }
}
