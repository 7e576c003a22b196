//! Copies a rebalance builds on this node before the map lists them: one replication per
//! vbucket being built, streaming from the vbucket's active. The orchestrator starts them
//! (`POST /internal/rebalance/build`), watches their progress, and may ask for a takeover;
//! the cluster agent stops a build once a map lists this node in the vbucket's chain (the
//! map's own feed then follows it), and leaves the state of vbuckets under build alone.
//!
//! Builds are not in any chain, so their seqno acks count for no durable write.

use parking_lot::Mutex;
use sluice_server::{BucketHandle, Node, Replication, ReplicationSpec};
use sluice_types::VbId;
use std::collections::BTreeMap;
use std::sync::Arc;

struct Build {
    source: String,
    replication: Replication,
}

#[derive(Default)]
pub struct Builds {
    builds: Mutex<BTreeMap<VbId, Build>>,
}

/// A build asked for while another one of the same vbucket streams from elsewhere.
#[derive(Debug, thiserror::Error)]
#[error("{vb} is already being built from {from}")]
pub struct BuildConflict {
    pub vb: VbId,
    pub from: String,
}

impl Builds {
    /// Starts building `vb` of `bucket` from the node at KV address `source` (idempotent
    /// for the same source). The vbucket becomes a replica here and resumes from what it
    /// holds.
    pub fn start(
        &self,
        node: &Arc<Node>,
        bucket: &Arc<BucketHandle>,
        vb: VbId,
        source: &str,
    ) -> Result<(), BuildConflict> {
        let mut builds = self.builds.lock();
        if let Some(b) = builds.get(&vb) {
            if b.source == source {
                return Ok(());
            }
            return Err(BuildConflict {
                vb,
                from: b.source.clone(),
            });
        }
        let served = bucket.cluster_map();
        let this = served.this;
        // `source` names the node by its cleartext KV address; a cluster that encrypts its
        // data streams them from the node's TLS KV port.
        let dial = served
            .map
            .nodes()
            .iter()
            .find(|n| n.kv_addr(false) == source)
            .map_or_else(|| source.to_string(), |n| node.peer_kv_addr(n));
        let who = node.peer_credentials();
        let replication = Replication::start(
            node.clone(),
            bucket.clone(),
            ReplicationSpec {
                source: dial,
                // The cluster identity: only its seqno acks and takeovers count.
                username: who.username,
                password: who.password,
                bucket: bucket.name.clone(),
                vbuckets: vec![vb],
                name: format!("rebalance:{source}->{this}:{}:{vb}", bucket.name),
                consumer_name: this.0.to_string(),
                tls: node.config.cluster_encryption.data(),
            },
        );
        tracing::info!(bucket = %bucket.name, %vb, %source, "rebalance: building a copy");
        builds.insert(
            vb,
            Build {
                source: source.to_string(),
                replication,
            },
        );
        Ok(())
    }

    /// Asks the build of `vb` to take the vbucket over; `false` if none runs (or it cannot
    /// be asked).
    pub fn takeover(&self, vb: VbId) -> bool {
        self.builds
            .lock()
            .get(&vb)
            .is_some_and(|b| b.replication.takeover(vb))
    }

    pub fn contains(&self, vb: VbId) -> bool {
        self.builds.lock().contains_key(&vb)
    }

    /// Stops the builds of the vbuckets `which` selects.
    pub async fn stop(&self, which: impl Fn(VbId) -> bool) {
        let stopped: Vec<(VbId, Build)> = {
            let mut builds = self.builds.lock();
            let vbs: Vec<VbId> = builds.keys().copied().filter(|vb| which(*vb)).collect();
            vbs.into_iter()
                .filter_map(|vb| builds.remove(&vb).map(|b| (vb, b)))
                .collect()
        };
        for (vb, b) in stopped {
            b.replication.stop().await;
            tracing::info!(%vb, "rebalance: build stopped");
        }
    }
}
