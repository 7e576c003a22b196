//! CREATE [PRIMARY] INDEX, DROP [PRIMARY] INDEX and BUILD INDEX on this node's index
//! service.
//!
//! As in Couchbase, a CREATE without `defer_build` returns once the index is online (its
//! first build caught up), a deferred one at once, and BUILD INDEX starts the builds and
//! returns. `WITH {"num_replica": n}` above 0 is refused: index replicas are not built.

use std::sync::Arc;
use std::time::Duration;

use sluice_cluster::rbac::Privilege;
use sluice_index::{IndexDef, IndexError, IndexId, IndexState};
use sluice_query::ast::{
    BuildIndex, CreateIndex, CreatePrimaryIndex, DropIndex, DropPrimaryIndex, Expr, IndexKey,
    KeyspaceRef,
};
use tokio::time::Instant;

use super::error::ServiceError;
use super::keyspace::{resolve, Target};
use super::{Authenticated, QueryService};

/// How often a CREATE checks whether its index is online yet.
const ONLINE_POLL: Duration = Duration::from_millis(20);

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
    fn ddl_bucket(
        &self,
        who: &Authenticated,
        ks: &KeyspaceRef,
        qc: Option<&str>,
    ) -> Result<String, ServiceError> {
        let bucket = match resolve(ks, qc)? {
            Target::Bucket(b) => b,
            Target::SystemIndexes => {
                return Err(ServiceError::NotSupported(
                    "system keyspaces cannot be indexed".into(),
                ))
            }
        };
        Self::check(
            who,
            Privilege::ManageBucket(&bucket),
            &bucket,
            "index",
            "query_manage_index",
        )?;
        self.bucket_exists(&bucket)?;
        Ok(bucket)
    }

    fn find(&self, bucket: &str, name: &str) -> Option<IndexDef> {
        self.node
            .index
            .definitions_of(bucket)
            .into_iter()
            .find(|d| d.name == name && d.scope == "_default" && d.collection == "_default")
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
        let bucket = self.ddl_bucket(who, new.keyspace, qc)?;
        let (defer, replicas) = with_options(new.with)?;
        if replicas > 0 {
            return Err(ServiceError::NotSupported(format!(
                "num_replica {replicas}: index replicas are not built in Sluice yet (an index \
                 lives on the node that created it)"
            )));
        }
        let def = IndexDef {
            id: IndexId(0),
            name: new.name.clone(),
            bucket,
            scope: "_default".into(),
            collection: "_default".into(),
            primary: new.keys.is_empty(),
            keys: new.keys,
            condition: new.condition,
            state: if defer {
                IndexState::Deferred
            } else {
                IndexState::Building
            },
        };
        let store = self.node.index.store.clone();
        let created = tokio::task::spawn_blocking(move || store.create(def))
            .await
            .map_err(|e| ServiceError::Index(IndexError::Corrupt(e.to_string())))?;
        let def = match created {
            Ok(def) => def,
            Err(IndexError::Exists { .. }) if new.if_not_exists => return Ok(()),
            Err(IndexError::Exists { name, .. }) => return Err(ServiceError::IndexExists(name)),
            Err(e) => return Err(e.into()),
        };
        tracing::info!(index = %def.name, bucket = %def.bucket, deferred = defer, "index created");
        if defer {
            return Ok(());
        }
        self.node.index.start_feeder(&self.node, def.id);
        self.wait_online(def.id, &def.name, deadline).await
    }

    async fn wait_online(
        &self,
        id: IndexId,
        name: &str,
        deadline: Instant,
    ) -> Result<(), ServiceError> {
        loop {
            if self.node.index.store.definition(id)?.state == IndexState::Online {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(ServiceError::Timeout(format!(
                    "while index {name} builds (it goes on building)"
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
        let bucket = self.ddl_bucket(who, ks, qc)?;
        match self.find(&bucket, name) {
            Some(def) => {
                self.node.index.drop_index(def.id).await?;
                tracing::info!(index = %def.name, bucket = %def.bucket, "index dropped");
                Ok(())
            }
            None if if_exists => Ok(()),
            None => Err(ServiceError::IndexNotFound(name.to_string())),
        }
    }

    pub(super) async fn build_indexes(
        &self,
        who: &Authenticated,
        b: &BuildIndex,
        qc: Option<&str>,
    ) -> Result<(), ServiceError> {
        let bucket = self.ddl_bucket(who, &b.keyspace, qc)?;
        let defs = b
            .names
            .iter()
            .map(|n| {
                self.find(&bucket, n.as_str())
                    .ok_or_else(|| ServiceError::IndexNotFound(n.as_str().to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        for def in defs {
            if def.state == IndexState::Deferred {
                let store = Arc::clone(&self.node.index.store);
                tokio::task::spawn_blocking(move || store.set_state(def.id, IndexState::Building))
                    .await
                    .map_err(|e| ServiceError::Index(IndexError::Corrupt(e.to_string())))??;
                self.node.index.start_feeder(&self.node, def.id);
            }
        }
        Ok(())
    }
}

/// `WITH {"defer_build": bool, "num_replica": n}`; other fields are refused, as Couchbase
/// refuses fields it does not know.
fn with_options(with: Option<&serde_json::Value>) -> Result<(bool, u64), ServiceError> {
    let Some(with) = with else {
        return Ok((false, 0));
    };
    let serde_json::Value::Object(m) = with else {
        return Err(ServiceError::NotSupported(
            "WITH must be an object such as {\"defer_build\": true}".into(),
        ));
    };
    let mut defer = false;
    let mut replicas = 0;
    for (k, v) in m {
        match (k.as_str(), v) {
            ("defer_build", serde_json::Value::Bool(b)) => defer = *b,
            ("num_replica", v) if v.as_u64().is_some() => replicas = v.as_u64().unwrap_or(0),
            (other, _) => {
                return Err(ServiceError::NotSupported(format!(
                    "index option {other}: only defer_build (a boolean) and num_replica (a \
                     number) are taken"
                )))
            }
        }
    }
    Ok((defer, replicas))
}
