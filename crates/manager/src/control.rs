//! What the control plane holds for a node beside the data plane's [`Node`]: this node's
//! rebalance status when it orchestrates one, and per bucket ([`BucketControl`]) the copies
//! a rebalance builds here, the cluster agent and its takeover queue, and the vbuckets a
//! restart holds back.

use crate::builds::Builds;
use crate::cluster_agent::ClusterAgent;
use crate::rebalance::SharedStatus;
use crate::restart_hold::Held;
use parking_lot::{Mutex, RwLock};
use sluice_server::{BucketHandle, Node};
use sluice_types::VbId;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::mpsc;

pub struct Control {
    pub node: Arc<Node>,
    /// The rebalance this node orchestrates, if any (`GET /api/v1/cluster/rebalance`).
    pub rebalance: SharedStatus,
    /// One per bucket the node serves, by name.
    buckets: RwLock<BTreeMap<String, Arc<BucketControl>>>,
    /// This node's replications to other clusters.
    pub xdcr: crate::xdcr::Xdcr,
}

/// The control plane's share of one bucket on this node.
pub struct BucketControl {
    pub bucket: Arc<BucketHandle>,
    /// Copies a running rebalance builds here before the map lists them.
    pub builds: Builds,
    /// Takeover requests for the cluster agent's feeds (set while the agent runs).
    pub(crate) agent_takeovers: Mutex<Option<mpsc::Sender<VbId>>>,
    /// The vbuckets a restart that lost data holds back (`restart_hold`).
    pub(crate) held: Held,
    /// The map revision the cluster agent last applied (vbucket states and feeds).
    applied: Mutex<Option<sluice_cluster::Rev>>,
    /// The bucket's cluster agent, while it runs.
    agent: Mutex<Option<ClusterAgent>>,
}

impl Control {
    /// The control plane of `node`, with its own bucket (`--bucket`) in the table.
    pub fn new(node: Arc<Node>) -> Control {
        let control = Control {
            rebalance: SharedStatus::default(),
            buckets: RwLock::new(BTreeMap::new()),
            xdcr: crate::xdcr::Xdcr::default(),
            node,
        };
        control.insert(BucketControl::new(control.node.bucket.clone()));
        control
    }

    /// Bucket `name`'s control, if this node serves it.
    pub fn bucket(&self, name: &str) -> Option<Arc<BucketControl>> {
        self.buckets.read().get(name).cloned()
    }

    /// The bucket an internal request's `?bucket=` names, or without one the node's own
    /// (requests from before there were many buckets); 404 if this node serves none of
    /// that name.
    pub(crate) fn named(
        &self,
        q: &sluice_server::BucketParam,
    ) -> Result<Arc<BucketControl>, NoSuchBucket> {
        self.bucket(q.bucket.as_deref().unwrap_or(&self.node.config.bucket))
            .ok_or_else(|| NoSuchBucket(q.bucket.clone()))
    }

    /// Every bucket's control, in name order.
    pub fn buckets(&self) -> Vec<Arc<BucketControl>> {
        self.buckets.read().values().cloned().collect()
    }

    pub(crate) fn insert(&self, bucket: BucketControl) -> Arc<BucketControl> {
        let bucket = Arc::new(bucket);
        self.buckets
            .write()
            .insert(bucket.bucket.name.clone(), bucket.clone());
        bucket
    }

    pub(crate) fn remove(&self, name: &str) -> Option<Arc<BucketControl>> {
        self.buckets.write().remove(name)
    }
}

/// The bucket an internal request's `?bucket=` names, as a handler's argument (404 before
/// the handler runs if this node serves no bucket of that name).
pub(crate) struct Named(pub Arc<BucketControl>);

impl<S> axum::extract::FromRequestParts<S> for Named
where
    S: Send + Sync,
    Arc<Control>: axum::extract::FromRef<S>,
{
    type Rejection = axum::response::Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        use axum::extract::{FromRef, Query};
        use axum::response::IntoResponse;
        let Query(q) = Query::<sluice_server::BucketParam>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let control = Arc::<Control>::from_ref(state);
        control
            .named(&q)
            .map(Named)
            .map_err(IntoResponse::into_response)
    }
}

/// An internal request named a bucket this node does not serve: 404.
pub(crate) struct NoSuchBucket(Option<String>);

impl axum::response::IntoResponse for NoSuchBucket {
    fn into_response(self) -> axum::response::Response {
        let error = format!("this node serves no bucket {:?}", self.0);
        let body = axum::Json(serde_json::json!({ "error": error }));
        (axum::http::StatusCode::NOT_FOUND, body).into_response()
    }
}

impl BucketControl {
    pub fn new(bucket: Arc<BucketHandle>) -> BucketControl {
        BucketControl {
            bucket,
            builds: Builds::default(),
            agent_takeovers: Mutex::new(None),
            held: Held::default(),
            applied: Mutex::new(None),
            agent: Mutex::new(None),
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

    /// Whether the bucket's cluster agent runs.
    pub(crate) fn agent_running(&self) -> bool {
        self.agent.lock().is_some()
    }

    /// Starts the bucket's cluster agent (once).
    pub(crate) fn start_agent(self: &Arc<Self>, node: &Arc<Node>) {
        let mut agent = self.agent.lock();
        if agent.is_none() {
            *agent = Some(ClusterAgent::start(node.clone(), self.clone()));
        }
    }

    /// Stops the agent and every build: nothing of this node writes the bucket's
    /// vbuckets from another node any more.
    pub(crate) async fn stop(&self) {
        let agent = self.agent.lock().take();
        if let Some(agent) = agent {
            agent.stop().await;
        }
        self.builds.stop(|_| true).await;
    }
}
