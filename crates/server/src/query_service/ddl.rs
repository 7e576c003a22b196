//! CREATE [PRIMARY] INDEX, DROP [PRIMARY] INDEX and BUILD INDEX: changes of the cluster's
//! index catalog (replicated metadata), which every node's index service follows.
//!
//! As in Couchbase, a CREATE without `defer_build` returns once the index is online (here:
//! every copy built), a deferred one once listed, and BUILD INDEX starts the builds and
//! returns (once every copy left `deferred`). The catalog places `num_replica` + 1 copies,
//! each on its own node, so `WITH {"num_replica": n}` is taken up to the number of other
//! nodes and refused beyond.

use std::time::Duration;

use sluice_cluster::rbac::Privilege;
use sluice_cluster::{catalog_name, split_catalog_name, NodeId, NodeInfo};
use sluice_index::{IndexDef, IndexError, IndexId, IndexState};
use sluice_types::CollectionId;

use crate::index_service::catalog::{CatalogChange, CatalogError};
use sluice_query::ast::{
    BuildIndex, CreateIndex, CreatePrimaryIndex, DropIndex, DropPrimaryIndex, Expr, IndexKey,
    KeyspaceRef,
};
use tokio::time::Instant;

use super::copies::Want;
use super::error::ServiceError;
use super::keyspace::{resolve, Keyspace, Target};
use super::{Authenticated, QueryService};

/// How often a statement checks whether this node's copy of an index is as the catalog
/// says yet.
const ONLINE_POLL: Duration = Duration::from_millis(20);
/// How long a DROP or BUILD waits for this node to apply the catalog's change.
const LOCAL_WAIT: Duration = Duration::from_secs(30);

/// What a CREATE statement defines.
struct NewIndex<'a> {
    name: String,
    if_not_exists: bool,
    keyspace: &'a KeyspaceRef,
    keys: Vec<IndexKey>,
    condition: Option<Expr>,
    with: Option<&'a serde_json::Value>,
}

impl QueryService {
    /// The keyspace a DDL statement changes, checked: the caller may manage its bucket's
    /// indexes, and it exists; with its collection id.
    fn ddl_target(
        &self,
        who: &Authenticated,
        ks: &KeyspaceRef,
        qc: Option<&str>,
    ) -> Result<(Keyspace, CollectionId), ServiceError> {
        let ks = match resolve(ks, qc)? {
            Target::Keyspace(ks) => ks,
            Target::SystemIndexes | Target::SystemPrepareds => {
                return Err(ServiceError::NotSupported(
                    "system keyspaces cannot be indexed".into(),
                ))
            }
        };
        let bucket = &ks.bucket;
        Self::check(
            who,
            Privilege::ManageBucket(bucket),
            bucket,
            "index",
            "query_manage_index",
        )?;
        let (_, cid) = self.collection(&ks)?;
        Ok((ks, cid))
    }

    /// This node's copy of index `name` of `ks`.
    fn find(&self, ks: &Keyspace, name: &str) -> Option<IndexDef> {
        self.node
            .index
            .definitions_of(&ks.bucket)
            .into_iter()
            .find(|d| d.name == name && ks.holds(d))
    }

    pub(super) async fn create_index(
        &self,
        who: &Authenticated,
        c: &CreateIndex,
        qc: Option<&str>,
        deadline: Instant,
    ) -> Result<(), ServiceError> {
        let new = NewIndex {
            name: c.name.as_str().to_string(),
            if_not_exists: c.if_not_exists,
            keyspace: &c.keyspace,
            keys: c.keys.clone(),
            condition: c.filter.clone(),
            with: c.with.as_ref(),
        };
        self.create(who, new, qc, deadline).await
    }

    pub(super) async fn create_primary_index(
        &self,
        who: &Authenticated,
        c: &CreatePrimaryIndex,
        qc: Option<&str>,
        deadline: Instant,
    ) -> Result<(), ServiceError> {
        let new = NewIndex {
            name: c
                .name
                .as_ref()
                .map_or_else(|| "#primary".to_string(), |n| n.as_str().to_string()),
            if_not_exists: c.if_not_exists,
            keyspace: &c.keyspace,
            keys: Vec::new(),
            condition: None,
            with: c.with.as_ref(),
        };
        self.create(who, new, qc, deadline).await
    }

    async fn create(
        &self,
        who: &Authenticated,
        new: NewIndex<'_>,
        qc: Option<&str>,
        deadline: Instant,
    ) -> Result<(), ServiceError> {
        let (ks, cid) = self.ddl_target(who, new.keyspace, qc)?;
        let with = with_options(new.with)?;
        let defer = with.defer;
        let view = self.node.cluster_map();
        // `nodes` names the holders (and so their number); `num_replica` must agree.
        let on = with
            .nodes
            .as_deref()
            .map(|n| nodes_named(n, view.map.nodes()))
            .transpose()?;
        let replicas = match (&on, with.replicas) {
            (Some(on), Some(r)) if r + 1 != on.len() as u64 => {
                return Err(ServiceError::IndexNodes(format!(
                    "num_replica {r} asks for {} copies and nodes names {}",
                    r + 1,
                    on.len()
                )))
            }
            (Some(on), _) => on.len() as u64 - 1,
            (None, r) => r.unwrap_or(0),
        };
        // The catalog names an index `scope.collection.name` on a named collection, so a
        // dot in the name would read as another keyspace's.
        if new.name.contains('.') {
            return Err(ServiceError::NotSupported(format!(
                "index name {}: an index name holds no '.'",
                new.name
            )));
        }
        // Each copy on its own node: `num_replica` copies besides the first need that many
        // other index nodes. (The catalog checks again against the nodes that may hold one.)
        let nodes = view
            .map
            .nodes()
            .iter()
            .filter(|n| n.runs(sluice_cluster::Service::Index))
            .count()
            .max(1) as u64;
        let replicas = match u8::try_from(replicas) {
            Ok(r) if u64::from(r) < nodes => r,
            _ => {
                return Err(ServiceError::NotSupported(format!(
                    "num_replica {replicas}: each copy of an index is on its own node, and \
                     the cluster has {nodes} node(s) running the index service, so at most \
                     {} replica(s)",
                    nodes - 1
                )))
            }
        };
        let name = new.name.clone();
        let def = IndexDef {
            id: IndexId(0),
            name: new.name,
            bucket: ks.bucket.clone(),
            scope: ks.scope.clone(),
            collection: ks.collection.clone(),
            collection_id: cid,
            primary: new.keys.is_empty(),
            keys: new.keys,
            condition: new.condition,
            state: IndexState::Deferred,
        };
        let definition = String::from_utf8(def.to_json())
            .map_err(|e| ServiceError::Index(IndexError::Corrupt(e.to_string())))?;
        let change = CatalogChange::Create {
            bucket: ks.bucket.clone(),
            name: catalog_name(&ks.scope, &ks.collection, &name),
            definition,
            deferred: defer,
            replicas,
            on,
        };
        match self.catalog_change(change).await {
            Ok(()) => {}
            Err(ServiceError::IndexExists(_)) if new.if_not_exists => return Ok(()),
            Err(e) => return Err(e),
        }
        tracing::info!(index = %name, keyspace = %ks.path(), deferred = defer,
            "index created in the catalog");
        // Once the catalog reached this node, every copy: this node's if it holds one (there,
        // online once built), then the other holders'.
        self.wait_listed(&ks, &name, true, deadline).await?;
        let want = if defer { Want::Listed } else { Want::Online };
        if self.holds(&ks, &name) {
            self.wait_local(&ks, &name, deadline, |d| {
                d.is_some_and(|d| defer || d.state == IndexState::Online)
            })
            .await?;
        }
        self.wait_other_copies(&ks, &name, want, deadline).await
    }

    /// Proposes `change` to the cluster's catalog.
    async fn catalog_change(&self, change: CatalogChange) -> Result<(), ServiceError> {
        let catalog = self.node.index.catalog().ok_or_else(|| {
            ServiceError::NotSupported("the index catalog is not ready yet".into())
        })?;
        // The catalog's name of an index on a named collection is `scope.collection.name`;
        // errors name the index as the statement did.
        let own = |key: String| match split_catalog_name(&key) {
            Some((_, _, name)) => name.to_string(),
            None => key,
        };
        catalog.change(change).await.map_err(|e| match e {
            CatalogError::Exists(name) => ServiceError::IndexExists(own(name)),
            CatalogError::NotFound(name) => ServiceError::IndexNotFound(own(name)),
            e => ServiceError::Catalog(e),
        })
    }

    /// Whether this node holds a copy of `ks`'s index `name`, as the catalog last said.
    fn holds(&self, ks: &Keyspace, name: &str) -> bool {
        let listing = self.node.index.listing();
        let key = catalog_name(&ks.scope, &ks.collection, name);
        listing
            .get(&ks.bucket, &key)
            .is_some_and(|l| l.held_by(listing.this))
    }

    /// Waits until the catalog as this node reads it lists `ks`'s index `name` (or no
    /// longer does): the change was committed, and reaches each node a moment later.
    async fn wait_listed(
        &self,
        ks: &Keyspace,
        name: &str,
        listed: bool,
        deadline: Instant,
    ) -> Result<(), ServiceError> {
        let key = catalog_name(&ks.scope, &ks.collection, name);
        while self.node.index.listing().get(&ks.bucket, &key).is_some() != listed {
            if Instant::now() >= deadline {
                return Err(ServiceError::Timeout(format!(
                    "while this node reads the catalog's change of index {name}"
                )));
            }
            tokio::time::sleep(ONLINE_POLL).await;
        }
        Ok(())
    }

    /// Waits until this node's copy of `ks`'s index `name` (or its absence) is what `done`
    /// wants.
    async fn wait_local(
        &self,
        ks: &Keyspace,
        name: &str,
        deadline: Instant,
        done: impl Fn(Option<&IndexDef>) -> bool,
    ) -> Result<(), ServiceError> {
        loop {
            if done(self.find(ks, name).as_ref()) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(ServiceError::Timeout(format!(
                    "while index {name} builds here (it goes on building)"
                )));
            }
            tokio::time::sleep(ONLINE_POLL).await;
        }
    }

    pub(super) async fn drop_index(
        &self,
        who: &Authenticated,
        d: &DropIndex,
        qc: Option<&str>,
    ) -> Result<(), ServiceError> {
        self.drop_named(who, d.name.as_str(), d.if_exists, &d.keyspace, qc)
            .await
    }

    pub(super) async fn drop_primary_index(
        &self,
        who: &Authenticated,
        d: &DropPrimaryIndex,
        qc: Option<&str>,
    ) -> Result<(), ServiceError> {
        let name = d.name.as_ref().map_or("#primary", |n| n.as_str());
        self.drop_named(who, name, d.if_exists, &d.keyspace, qc)
            .await
    }

    async fn drop_named(
        &self,
        who: &Authenticated,
        name: &str,
        if_exists: bool,
        ks: &KeyspaceRef,
        qc: Option<&str>,
    ) -> Result<(), ServiceError> {
        let (ks, _) = self.ddl_target(who, ks, qc)?;
        let change = CatalogChange::Drop {
            bucket: ks.bucket.clone(),
            name: catalog_name(&ks.scope, &ks.collection, name),
        };
        match self.catalog_change(change).await {
            Ok(()) => {}
            Err(ServiceError::IndexNotFound(_)) if if_exists => return Ok(()),
            Err(e) => return Err(e),
        }
        tracing::info!(index = %name, keyspace = %ks.path(), "index dropped from the catalog");
        let deadline = Instant::now() + LOCAL_WAIT;
        self.wait_listed(&ks, name, false, deadline).await?;
        self.wait_local(&ks, name, deadline, |d| d.is_none())
            .await?;
        self.wait_other_copies(&ks, name, Want::Gone, deadline)
            .await
    }

    pub(super) async fn build_indexes(
        &self,
        who: &Authenticated,
        b: &BuildIndex,
        qc: Option<&str>,
    ) -> Result<(), ServiceError> {
        let (ks, _) = self.ddl_target(who, &b.keyspace, qc)?;
        let names: Vec<String> = b.names.iter().map(|n| n.as_str().to_string()).collect();
        let change = CatalogChange::Build {
            bucket: ks.bucket.clone(),
            names: names
                .iter()
                .map(|n| catalog_name(&ks.scope, &ks.collection, n))
                .collect(),
        };
        self.catalog_change(change).await?;
        // The builds go on in the background; this node's copies have left `deferred`
        // before the statement returns, so `system:indexes` shows them building.
        let deadline = Instant::now() + LOCAL_WAIT;
        for name in &names {
            self.wait_listed(&ks, name, true, deadline).await?;
            self.wait_local(&ks, name, deadline, |d| {
                d.is_none_or(|d| d.state != IndexState::Deferred)
            })
            .await?;
            self.wait_other_copies(&ks, name, Want::NotDeferred, deadline)
                .await?;
        }
        Ok(())
    }
}

/// `WITH {"defer_build": bool, "num_replica": n}`; other fields are refused, as Couchbase
/// refuses fields it does not know.
/// What `WITH {...}` asks of a new index.
#[derive(Debug, Default, PartialEq)]
struct WithOptions {
    defer: bool,
    /// `num_replica`, if given.
    replicas: Option<u64>,
    /// `nodes`: the admin addresses (`host:port`) of the nodes to hold the copies, if given.
    nodes: Option<Vec<String>>,
}

fn with_options(with: Option<&serde_json::Value>) -> Result<WithOptions, ServiceError> {
    let mut out = WithOptions::default();
    let Some(with) = with else {
        return Ok(out);
    };
    let serde_json::Value::Object(m) = with else {
        return Err(ServiceError::NotSupported(
            "WITH must be an object such as {\"defer_build\": true}".into(),
        ));
    };
    for (k, v) in m {
        match (k.as_str(), v) {
            ("defer_build", serde_json::Value::Bool(b)) => out.defer = *b,
            ("num_replica", v) if v.as_u64().is_some() => out.replicas = v.as_u64(),
            ("nodes", serde_json::Value::Array(a))
                if !a.is_empty() && a.iter().all(serde_json::Value::is_string) =>
            {
                let names = a.iter().filter_map(|n| n.as_str()).map(String::from);
                out.nodes = Some(names.collect());
            }
            (other, _) => {
                return Err(ServiceError::NotSupported(format!(
                    "index option {other}: only defer_build (a boolean), num_replica (a \
                     number) and nodes (a list of \"host:port\" admin addresses) are taken"
                )))
            }
        }
    }
    Ok(out)
}

/// The ids of the nodes `names` gives by admin address (`host:port`, as Couchbase's `nodes`
/// takes them), each once, among `nodes`.
fn nodes_named(names: &[String], nodes: &[NodeInfo]) -> Result<Vec<NodeId>, ServiceError> {
    let mut ids = Vec::with_capacity(names.len());
    for name in names {
        let Some(n) = nodes.iter().find(|n| n.admin_addr(false) == *name) else {
            let known: Vec<String> = nodes.iter().map(|n| n.admin_addr(false)).collect();
            return Err(ServiceError::IndexNodes(format!(
                "no node {name} in the cluster (its nodes: {})",
                known.join(", ")
            )));
        };
        if ids.contains(&n.id) {
            return Err(ServiceError::IndexNodes(format!("{name} is named twice")));
        }
        ids.push(n.id);
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(id: u32, admin_port: u16) -> NodeInfo {
        NodeInfo {
            id: NodeId(id),
            host: "127.0.0.1".into(),
            kv_port: admin_port - 1,
            admin_port,
            tls: None,
            services: sluice_cluster::Services::ALL,
        }
    }

    #[test]
    fn with_takes_defer_build_num_replica_and_nodes() {
        assert_eq!(with_options(None).unwrap(), WithOptions::default());
        let w = json!({"defer_build": true, "num_replica": 1, "nodes": ["a:1", "b:2"]});
        assert_eq!(
            with_options(Some(&w)).unwrap(),
            WithOptions {
                defer: true,
                replicas: Some(1),
                nodes: Some(vec!["a:1".into(), "b:2".into()]),
            }
        );
        for bad in [
            json!({"nodes": []}),
            json!({"nodes": [1]}),
            json!({"nodes": "a:1"}),
        ] {
            assert!(with_options(Some(&bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn nodes_are_named_by_admin_address() {
        let nodes = [node(0, 8091), node(4, 9091)];
        let named = |n: &[&str]| {
            let n: Vec<String> = n.iter().map(|s| s.to_string()).collect();
            nodes_named(&n, &nodes).map_err(|e| e.to_string())
        };
        assert_eq!(
            named(&["127.0.0.1:9091", "127.0.0.1:8091"]),
            Ok(vec![NodeId(4), NodeId(0)])
        );
        let unknown = named(&["127.0.0.1:8090"]).unwrap_err();
        assert!(
            unknown.contains("no node 127.0.0.1:8090") && unknown.contains("127.0.0.1:9091"),
            "{unknown}"
        );
        assert!(named(&["127.0.0.1:8091", "127.0.0.1:8091"])
            .unwrap_err()
            .contains("named twice"));
    }
}
