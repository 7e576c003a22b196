//! Every node's copy of an index: a DDL statement returns once the other nodes that serve
//! the bucket hold their copies as the catalog now says (each asked through its own query
//! service, as the cluster identity), so a statement sent to any node right after sees
//! the change, as it would in Couchbase.

use std::time::Duration;

use serde_json::json;
use sluice_client::admin_http;
use tokio::time::Instant;

use super::error::ServiceError;
use super::keyspace::Keyspace;
use super::QueryService;

/// How often the other nodes are asked again.
const POLL: Duration = Duration::from_millis(50);
/// How long one ask may take.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// What a DDL statement waits for on every node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Want {
    /// Listed and online (a CREATE without `defer_build`).
    Online,
    /// Listed, in any state (a deferred CREATE).
    Listed,
    /// Listed and not deferred any more (BUILD INDEX).
    NotDeferred,
    /// Not listed (DROP).
    Gone,
}

impl Want {
    /// Whether a node whose `system:indexes` shows `states` for the index is done.
    fn met(self, states: &[String]) -> bool {
        match self {
            Want::Online => states.iter().any(|s| s == "online"),
            Want::Listed => !states.is_empty(),
            Want::NotDeferred => states.iter().any(|s| s != "deferred"),
            Want::Gone => states.is_empty(),
        }
    }
}

impl QueryService {
    /// Waits until every other node serving `ks`'s bucket holds its copy of index `name`
    /// of `ks` as `want` says, or `deadline` passes (a node down and not failed over makes
    /// DDL wait for it, then fail with a timeout: its copy would be missing).
    pub(super) async fn wait_other_copies(
        &self,
        ks: &Keyspace,
        name: &str,
        want: Want,
        deadline: Instant,
    ) -> Result<(), ServiceError> {
        let Some(handle) = self.node.buckets.get(&ks.bucket) else {
            return Ok(());
        };
        let view = handle.cluster_map();
        let encrypted = self.node.member_tls.is_some();
        let others: Vec<String> = view
            .map
            .nodes()
            .iter()
            .filter(|n| n.id != view.this)
            .map(|n| n.admin_addr(encrypted))
            .collect();
        let dial = self.node.member_dial();
        let who = self.node.peer_credentials();
        // `system:indexes` names a default collection's keyspace by its bucket alone.
        let body = if ks.is_default() {
            json!({
                "statement": "SELECT RAW state FROM system:indexes \
                              WHERE keyspace_id = $bucket AND bucket_id IS MISSING \
                              AND name = $name",
                "$bucket": ks.bucket,
                "$name": name,
            })
        } else {
            json!({
                "statement": "SELECT RAW state FROM system:indexes \
                              WHERE bucket_id = $bucket AND scope_id = $scope \
                              AND keyspace_id = $collection AND name = $name",
                "$bucket": ks.bucket,
                "$scope": ks.scope,
                "$collection": ks.collection,
                "$name": name,
            })
        };
        for addr in others {
            loop {
                let answer = admin_http::call(
                    &dial,
                    &addr,
                    &who,
                    "/query/service",
                    Some(&body),
                    ASK_TIMEOUT,
                )
                .await;
                let states: Option<Vec<String>> = answer
                    .ok()
                    .filter(|a| a.ok())
                    .and_then(|a| serde_json::from_value(a.body["results"].clone()).ok());
                if states.is_some_and(|s| want.met(&s)) {
                    break;
                }
                if Instant::now() + POLL >= deadline {
                    return Err(ServiceError::Timeout(format!(
                        "while node {addr} applies the change of index {name} (it goes on)"
                    )));
                }
                tokio::time::sleep(POLL).await;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_statement_waits_for_its_state() {
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(Want::Online.met(&s(&["online"])));
        assert!(!Want::Online.met(&s(&["building"])));
        assert!(!Want::Online.met(&s(&[])));
        assert!(Want::Listed.met(&s(&["deferred"])));
        assert!(!Want::Listed.met(&s(&[])));
        assert!(Want::NotDeferred.met(&s(&["building"])));
        assert!(!Want::NotDeferred.met(&s(&["deferred"])));
        assert!(Want::Gone.met(&s(&[])));
        assert!(!Want::Gone.met(&s(&["online"])));
    }
}
