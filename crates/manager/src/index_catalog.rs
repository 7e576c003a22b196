//! The index catalog in the replicated metadata: the query service's DDL becomes
//! `CreateIndex` / `DropIndex` / `BuildIndexes` proposals ([`MetaCatalog`]), and every
//! change of the metadata makes this node's index service hold exactly the catalog's
//! indexes of the buckets it serves ([`follow`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use sluice_cluster::{ClusterState, IndexRecord, MetaCommand, Rejection};
use sluice_meta::MetaNode;
use sluice_server::index_service::catalog::{
    Catalog, CatalogChange, CatalogError, CatalogFuture, Wanted,
};
use sluice_server::Node;

/// Proposes the query service's DDL to the cluster's metadata (through its leader).
pub struct MetaCatalog {
    pub meta: MetaNode,
}

impl Catalog for MetaCatalog {
    fn change(&self, change: CatalogChange) -> CatalogFuture {
        let meta = self.meta.clone();
        Box::pin(async move {
            let cmd = match change {
                CatalogChange::Create {
                    bucket,
                    name,
                    definition,
                    deferred,
                } => MetaCommand::CreateIndex {
                    bucket,
                    name,
                    index: IndexRecord {
                        definition,
                        deferred,
                    },
                },
                CatalogChange::Drop { bucket, name } => MetaCommand::DropIndex { bucket, name },
                CatalogChange::Build { bucket, names } => {
                    MetaCommand::BuildIndexes { bucket, names }
                }
            };
            match meta.propose(cmd).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(Rejection::IndexExists { name, .. })) => Err(CatalogError::Exists(name)),
                Ok(Err(Rejection::NoSuchIndex { name, .. })) => Err(CatalogError::NotFound(name)),
                Ok(Err(rejection)) => Err(CatalogError::Refused(rejection.to_string())),
                Err(e) => Err(CatalogError::Unavailable(e.to_string())),
            }
        })
    }
}

/// Follows the metadata until the meta node stops, applying its catalog here after each
/// change.
pub async fn follow(node: Arc<Node>, meta: MetaNode) {
    let mut states = meta.state();
    loop {
        let state = states.borrow_and_update().clone();
        reconcile(&node, &state).await;
        if states.changed().await.is_err() {
            return;
        }
    }
}

/// Makes this node's index service hold `state`'s catalog: every index of every bucket
/// the cluster defines. A failure is logged and tried again at the next change.
pub async fn reconcile(node: &Arc<Node>, state: &ClusterState) {
    for (bucket, entry) in state.buckets() {
        let wanted: BTreeMap<String, Wanted> = entry
            .indexes
            .iter()
            .map(|(name, r)| {
                let w = Wanted {
                    definition: r.definition.clone(),
                    deferred: r.deferred,
                };
                (name.clone(), w)
            })
            .collect();
        if let Err(e) = node.index.reconcile(node, bucket, &wanted).await {
            tracing::error!(%bucket, error = %e, "the index catalog could not be applied here");
        }
    }
}
