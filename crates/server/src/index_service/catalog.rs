//! The cluster's index catalog, as the index service sees it: where DDL goes (the
//! replicated metadata, through a [`Catalog`] the control plane installs), and how this
//! node's store is made to hold exactly the catalog's indexes ([`IndexService::reconcile`]).
//!
//! The catalog places each index's copies on nodes (see `listing`); each holder builds its
//! copy with its own feeder from the same definition. A query on any node reads its own
//! copy, or one on another node.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use sluice_cluster::catalog_name;
use sluice_index::{IndexDef, IndexError, IndexState};

use super::IndexService;
use crate::node::Node;

/// A change of the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogChange {
    /// `definition`: [`IndexDef::to_json`] of the new index (its id and state are this
    /// node's own business and are ignored).
    Create {
        bucket: String,
        name: String,
        definition: String,
        deferred: bool,
        /// Copies besides the first (`num_replica`); the catalog places them.
        replicas: u8,
        /// The nodes `WITH {"nodes"}` asks for (`replicas` + 1 of them); `None`: the
        /// catalog chooses.
        on: Option<Vec<sluice_cluster::NodeId>>,
    },
    Drop {
        bucket: String,
        name: String,
    },
    Build {
        bucket: String,
        names: Vec<String>,
    },
}

/// Why the catalog refused a change.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CatalogError {
    #[error("index {0} already exists")]
    Exists(String),
    #[error("index {0} not found")]
    NotFound(String),
    #[error("the catalog refused the change: {0}")]
    Refused(String),
    #[error("the cluster metadata is unavailable: {0}")]
    Unavailable(String),
}

pub type CatalogFuture = Pin<Box<dyn Future<Output = Result<(), CatalogError>> + Send>>;

/// Proposes catalog changes to the cluster (the control plane's replicated metadata).
pub trait Catalog: Send + Sync {
    fn change(&self, change: CatalogChange) -> CatalogFuture;
}

/// One index the catalog lists for a bucket, under its catalog name
/// (`sluice_cluster::catalog_name`: `scope.collection.name` on a named collection).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    pub definition: String,
    pub deferred: bool,
}

/// Whether `a` and `b` define the same index (names, keyspace, keys, condition), whatever
/// their ids and states.
pub(crate) fn same_index(a: &IndexDef, b: &IndexDef) -> bool {
    let shape = |d: &IndexDef| {
        let mut d = d.clone();
        d.id = sluice_index::IndexId(0);
        d.state = IndexState::Deferred;
        d.to_json()
    };
    shape(a) == shape(b)
}

impl IndexService {
    /// Installs where DDL goes (once, by the control plane).
    pub fn set_catalog(&self, catalog: Arc<dyn Catalog>) {
        let _ = self.catalog.set(catalog);
    }

    /// The installed catalog.
    pub fn catalog(&self) -> Option<&Arc<dyn Catalog>> {
        self.catalog.get()
    }

    /// Makes this node hold exactly `wanted`'s indexes of `bucket`: creates the missing
    /// ones (deferred, or building with a feeder), starts the build of those no longer
    /// deferred, drops the ones the catalog no longer lists, and replaces one whose
    /// definition changed (dropped and created again under the same name).
    pub async fn reconcile(
        self: &Arc<Self>,
        node: &Arc<Node>,
        bucket: &str,
        wanted: &BTreeMap<String, Wanted>,
    ) -> Result<(), IndexError> {
        let held: BTreeMap<String, IndexDef> = self
            .definitions_of(bucket)
            .into_iter()
            .map(|d| (catalog_name(&d.scope, &d.collection, &d.name), d))
            .collect();
        for (name, def) in &held {
            let keep = match wanted.get(name) {
                Some(w) => IndexDef::from_json(w.definition.as_bytes())
                    .is_ok_and(|want| same_index(&want, def)),
                None => false,
            };
            if !keep {
                self.drop_index(def.id).await?;
                tracing::info!(index = %name, bucket, "index dropped (not in the catalog)");
            }
        }
        let held: BTreeMap<String, IndexDef> = self
            .definitions_of(bucket)
            .into_iter()
            .map(|d| (catalog_name(&d.scope, &d.collection, &d.name), d))
            .collect();
        for (name, w) in wanted {
            match held.get(name) {
                Some(def) if def.state == IndexState::Deferred && !w.deferred => {
                    let (store, id) = (self.store.clone(), def.id);
                    blocking(move || store.set_state(id, IndexState::Building)).await?;
                    self.start_feeder(node, def.id);
                    tracing::info!(index = %name, bucket, "index build started");
                }
                Some(_) => {}
                None => {
                    let mut def = IndexDef::from_json(w.definition.as_bytes())?;
                    let key = catalog_name(&def.scope, &def.collection, &def.name);
                    if def.bucket != bucket || &key != name {
                        return Err(IndexError::Corrupt(format!(
                            "the catalog lists {bucket}:{name} with the definition of \
                             {}:{key}",
                            def.bucket
                        )));
                    }
                    def.state = if w.deferred {
                        IndexState::Deferred
                    } else {
                        IndexState::Building
                    };
                    let store = self.store.clone();
                    let def = blocking(move || store.create(def)).await?;
                    tracing::info!(index = %name, bucket, deferred = w.deferred,
                        "index created (from the catalog)");
                    if !w.deferred {
                        self.start_feeder(node, def.id);
                    }
                }
            }
        }
        Ok(())
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, IndexError> + Send + 'static,
) -> Result<T, IndexError> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(IndexError::Corrupt(format!("the store task failed: {e}"))))
}
