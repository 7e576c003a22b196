//! The query service: Couchbase's `POST /query/service`, served on the admin port and
//! listed as `n1ql` in the cluster map's `nodesExt` (Couchbase serves it on its own port,
//! 8093; an SDK dials whatever port the map lists).
//!
//! - `sluice_query::request`: the request's parameters (JSON or form).
//! - `keyspace`: which data a statement names.
//! - `select`: SELECT and EXPLAIN through the planner and the row pipeline; `rows`: the
//!   documents an access path reads (index pages, fetched through KV, or from this node's
//!   engine for the vbuckets active here: `local_read`).
//! - `ddl`: CREATE / DROP / BUILD INDEX, changes of the cluster's index catalog; `copies`:
//!   waiting for every copy to follow.
//! - `remote`: scanning a copy of an index on another node (the catalog places each index
//!   on some nodes only), and the internal routes that serve it.
//! - `dml`: INSERT / UPSERT / UPDATE / DELETE through KV; `json_path`: UPDATE's paths.
//! - `prepare`: PREPARE, EXECUTE and the request's `prepared`, over this node's
//!   `sluice_query::prepared::PreparedCache`.
//! - `system_indexes`: the rows of `system:indexes`; `index_status`: `GET /indexStatus`,
//!   where each index's copies are.
//! - `http`: the route and the response envelope; `sink`: results streamed in chunks.
//!
//! Who may do what: the caller's roles, read from the admin port's authentication:
//! reading a bucket needs a role that reads it (`data_reader` and above), index DDL needs
//! `bucket_admin` on it (Couchbase's `query_manage_index`), and `system:indexes` shows the
//! indexes of the buckets the caller has any role on.

mod copies;
mod ddl;
mod dml;
pub mod error;
pub mod http;
mod index_status;
mod json_path;
mod keyspace;
mod local_read;
mod prepare;
mod remote;
mod rows;
mod select;
pub mod sink;
mod system_indexes;

pub use select::{Outcome, DEFAULT_TIMEOUT, TIMEOUT_MAX};

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use sluice_client::{ClusterClient, ClusterOptions};
use sluice_cluster::rbac::{allows, Privilege, Role};
use sluice_query::prepared::PreparedCache;
use sluice_types::CollectionId;

use crate::credentials::Caller;
use crate::node::Node;
use error::ServiceError;

/// Who is asking, as the admin port authenticated them (its middleware adds this to
/// every request it lets through).
#[derive(Clone)]
pub struct Authenticated {
    pub caller: Caller,
    pub roles: Arc<[Role]>,
}

impl Authenticated {
    pub fn allows(&self, p: Privilege<'_>) -> bool {
        matches!(self.caller, Caller::Cluster) || allows(&self.roles, p)
    }
}

/// Statements that run at once; others wait (within their timeout) for one to finish. With
/// each statement's pipeline bounded in bytes (`sluice_query::Limits`), this bounds what the
/// service holds.
pub const SERVICERS: usize = 8;

pub struct QueryService {
    node: Arc<Node>,
    /// A KV client per bucket (as the cluster identity), made on first use.
    clients: Mutex<HashMap<String, ClusterClient>>,
    servicers: tokio::sync::Semaphore,
    /// This node's prepared statements (see `prepare`).
    prepared: Mutex<PreparedCache>,
    /// Each keyspace's indexes as the planner sees them, kept until the index store's
    /// definitions move (see `select::Catalog`).
    catalogs: Mutex<HashMap<keyspace::Keyspace, Arc<select::Catalog>>>,
    /// Which holder a scan of a copy on another node asks first (`remote`).
    rotation: remote::Rotation,
    /// Connections kept to the holders of index copies on other nodes (`remote`).
    kept: sluice_client::admin_kept::KeptConnections,
}

impl QueryService {
    pub fn new(node: Arc<Node>) -> QueryService {
        QueryService {
            node,
            clients: Mutex::new(HashMap::new()),
            servicers: tokio::sync::Semaphore::new(SERVICERS),
            prepared: Mutex::new(PreparedCache::new()),
            catalogs: Mutex::new(HashMap::new()),
            rotation: Default::default(),
            kept: sluice_client::admin_kept::KeptConnections::new(remote::KEPT_PER_HOLDER),
        }
    }

    /// The KV client of `bucket`: what the service fetches and writes documents with.
    async fn client(&self, bucket: &str) -> Result<ClusterClient, ServiceError> {
        if let Some(c) = self.clients.lock().get(bucket) {
            return Ok(c.clone());
        }
        let creds = self.node.peer_credentials();
        let mut opts = ClusterOptions::sluice(&creds.username, &creds.password, bucket);
        // Its keys name their collection (`ClusterClient::in_collection`).
        opts.connect
            .features
            .push(sluice_proto::Feature::Collections);
        let seed = format!(
            "{}:{}",
            self.node.config.advertise_host,
            self.node.kv_port()
        );
        let client = ClusterClient::connect(&[seed], opts)
            .await
            .map_err(|e| ServiceError::Fetch(e.to_string()))?;
        self.clients
            .lock()
            .insert(bucket.to_string(), client.clone());
        Ok(client)
    }

    /// Refuses a caller whose roles do not allow `p` on `bucket`.
    fn check(
        who: &Authenticated,
        p: Privilege<'_>,
        bucket: &str,
        what: &'static str,
        role: &'static str,
    ) -> Result<(), ServiceError> {
        if who.allows(p) {
            Ok(())
        } else {
            Err(ServiceError::NotAllowed {
                what,
                keyspace: format!("default:{bucket}"),
                role,
            })
        }
    }

    /// Whether `bucket` exists on this node.
    /// `ks`'s bucket and collection id: 12003 if either does not exist (here: this node
    /// serves no such bucket, or its manifest lists no such collection).
    fn collection(
        &self,
        ks: &keyspace::Keyspace,
    ) -> Result<(Arc<crate::bucket_handle::BucketHandle>, CollectionId), ServiceError> {
        let missing = || ServiceError::KeyspaceNotFound(ks.path());
        let bucket = self.node.buckets.get(&ks.bucket).ok_or_else(missing)?;
        if ks.is_default() {
            return Ok((bucket, CollectionId::DEFAULT));
        }
        let cid = bucket
            .manifest()
            .collection_id(&ks.scope, &ks.collection)
            .map_err(|_| missing())?;
        Ok((bucket, CollectionId(cid)))
    }
}
