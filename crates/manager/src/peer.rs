//! Calls from this node to another member's admin port: as the cluster identity, from this
//! node's source address, over TLS when the cluster encrypts its control traffic, within a
//! timeout. The leader's work (rebalance, janitor, failover)
//! and the routes a follower forwards to the leader go through here.

use sluice_client::admin_http::{self, AdminAnswer, AdminHttpError};
use sluice_cluster::{NodeId, NodeInfo};
use sluice_meta::MetaNode;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum PeerCallError {
    #[error("no metadata leader is known (no quorum, or an election is under way)")]
    NoLeader,
    #[error("the leader, node {0}, is not in this node's node table yet")]
    LeaderUnknown(NodeId),
    #[error(transparent)]
    Http(#[from] AdminHttpError),
}

/// GET `path` (no `body`) or POST `body` on `node`'s admin port.
pub async fn call(
    meta: &MetaNode,
    node: &NodeInfo,
    path: &str,
    body: Option<&serde_json::Value>,
    timeout: Duration,
) -> Result<AdminAnswer, AdminHttpError> {
    let who = meta.config().secret.credentials();
    let dial = &meta.config().dial;
    // Its TLS admin port when the cluster encrypts its control traffic (the dial then
    // verifies its certificate); a node that serves no TLS is called at its cleartext
    // port, where the handshake fails: never the secret in the clear.
    let addr = node.admin_addr(dial.tls.is_some());
    admin_http::call(dial, &addr, &who, path, body, timeout).await
}

/// [`call`] on the metadata leader this node knows of.
pub async fn call_leader(
    meta: &MetaNode,
    path: &str,
    body: Option<&serde_json::Value>,
    timeout: Duration,
) -> Result<AdminAnswer, PeerCallError> {
    let leader = meta.leader().ok_or(PeerCallError::NoLeader)?;
    let info = meta
        .state()
        .borrow()
        .node(leader)
        .map(|e| e.info.clone())
        .ok_or(PeerCallError::LeaderUnknown(leader))?;
    Ok(call(meta, &info, path, body, timeout).await?)
}

/// Whether this node is the metadata leader it knows of.
pub fn leading(meta: &MetaNode) -> bool {
    meta.leader() == Some(meta.id())
}

/// `path` with the internal routes' `bucket` parameter naming `bucket`.
pub fn for_bucket(path: &str, bucket: &str) -> String {
    let sep = if path.contains('?') { '&' } else { '?' };
    format!("{path}{sep}bucket={}", admin_http::percent_encode(bucket))
}

#[cfg(test)]
mod tests {
    #[test]
    fn bucket_parameters_are_appended_and_escaped() {
        assert_eq!(super::for_bucket("/a", "b"), "/a?bucket=b");
        assert_eq!(
            super::for_bucket("/a?x=1", "5%off"),
            "/a?x=1&bucket=5%25off"
        );
    }
}
