//! Every copy of an index: a DDL statement returns once the other nodes holding a copy
//! have it as the catalog now says (each asked what it holds, as the cluster identity), so
//! a statement sent to any node right after sees the change, as it would in Couchbase.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use sluice_client::admin_http;
use sluice_cluster::catalog_name;
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
    /// Whether a node whose own copy of the index is in `state` (`None`: it holds none) is
    /// done.
    fn met(self, state: Option<&str>) -> bool {
        match self {
            Want::Online => state == Some("online"),
            Want::Listed => state.is_some(),
            Want::NotDeferred => state.is_some_and(|s| s != "deferred"),
            Want::Gone => state.is_none(),
        }
    }
}

impl QueryService {
    /// Waits until every other node that should hold a copy of index `name` of `ks` (for
    /// [`Want::Gone`], every other node of the bucket's map) has it as `want` says, or
    /// `deadline` passes (a node down and not failed over makes DDL wait for it, then fail
    /// with a timeout: its copy would be missing). Each node says what it holds itself
    /// (`GET /internal/index/copies`, as the cluster identity).
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
        let key = catalog_name(&ks.scope, &ks.collection, name);
        let listing = self.node.index.listing();
        let listed = listing.get(&ks.bucket, &key).filter(|_| want != Want::Gone);
        let others: Vec<String> = match listed {
            Some(listed) => listed
                .holders
                .iter()
                .filter(|h| h.id != listing.this)
                .map(|h| h.admin.clone())
                .collect(),
            None => {
                let view = handle.cluster_map();
                let encrypted = self.node.member_tls.is_some();
                view.map
                    .nodes()
                    .iter()
                    .filter(|n| n.id != view.this)
                    .map(|n| n.admin_addr(encrypted))
                    .collect()
            }
        };
        for addr in others {
            loop {
                let states = self.copies_at(&addr, &ks.bucket).await;
                if states.is_ok_and(|s| want.met(s.get(&key).map(String::as_str))) {
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

    /// The states of the copies node `addr` holds of `bucket`'s indexes, by catalog name.
    pub(super) async fn copies_at(
        &self,
        addr: &str,
        bucket: &str,
    ) -> Result<BTreeMap<String, String>, String> {
        let path = format!(
            "/internal/index/copies?bucket={}",
            admin_http::percent_encode(bucket)
        );
        let answer = admin_http::call(
            &self.node.member_dial(),
            addr,
            &self.node.peer_credentials(),
            &path,
            None,
            ASK_TIMEOUT,
        )
        .await
        .map_err(|e| e.to_string())?;
        if !answer.ok() {
            return Err(format!("{addr} answered {}", answer.body));
        }
        serde_json::from_value(answer.body["copies"].clone()).map_err(|e| e.to_string())
    }
}

/// What holders say of their copies, each holder asked once per bucket (for a statement or
/// a request that reads many indexes' states).
#[derive(Default)]
pub(super) struct HolderStates(HashMap<(String, String), Option<BTreeMap<String, String>>>);

impl HolderStates {
    /// The state of holder `admin`'s copy of `bucket`'s index `key`: `None` if the holder
    /// did not answer, `Some(None)` if it holds no such copy.
    pub(super) async fn state(
        &mut self,
        service: &QueryService,
        admin: &str,
        bucket: &str,
        key: &str,
    ) -> Option<Option<&str>> {
        let ask = (admin.to_string(), bucket.to_string());
        if !self.0.contains_key(&ask) {
            let copies = service.copies_at(admin, bucket).await.ok();
            self.0.insert(ask.clone(), copies);
        }
        let copies = self.0[&ask].as_ref()?;
        Some(copies.get(key).map(String::as_str))
    }
}
