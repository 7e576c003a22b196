//! The index catalog in the replicated metadata: the query service's DDL becomes
//! `CreateIndex` / `DropIndex` / `BuildIndexes` proposals ([`MetaCatalog`]), and every
//! change of the metadata makes this node's index service hold exactly the catalog's
//! indexes placed on it, and know where the others' copies are ([`follow`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use sluice_cluster::{ClusterState, IndexRecord, MetaCommand, NodeId, Rejection};
use sluice_meta::MetaNode;
use sluice_server::index_service::catalog::{
    Catalog, CatalogChange, CatalogError, CatalogFuture, Wanted,
};
use sluice_server::index_service::listing::{Holder, Listed, Listing};
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
                    replicas,
                    on,
                } => MetaCommand::CreateIndex {
                    bucket,
                    name,
                    // The metadata places the copies, on `on` if given.
                    index: IndexRecord {
                        definition,
                        deferred,
                        replicas,
                        nodes: None,
                    },
                    on,
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
        reconcile(&node, meta.id(), &state).await;
        if states.changed().await.is_err() {
            return;
        }
    }
}

/// Makes this node's index service hold `state`'s catalog: every index of every bucket
/// the cluster defines that is placed on this node (`this`), and know the others' holders.
/// A failure is logged and tried again at the next change.
pub async fn reconcile(node: &Arc<Node>, this: NodeId, state: &ClusterState) {
    node.index.set_listing(listing(node, this, state));
    for (bucket, entry) in state.buckets() {
        let wanted: BTreeMap<String, Wanted> = entry
            .indexes
            .iter()
            .filter(|(_, r)| r.held_by(this, state))
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

/// The catalog of `state` with each index's holders, as node `this` dials them.
fn listing(node: &Node, this: NodeId, state: &ClusterState) -> Listing {
    let encrypted = node.member_tls.is_some();
    let holder = |id: &NodeId| {
        state.node(*id).map(|n| Holder {
            id: *id,
            admin: n.info.admin_addr(encrypted),
            shown: n.info.admin_addr(false),
        })
    };
    let buckets = state
        .buckets()
        .iter()
        .map(|(bucket, entry)| {
            let indexes = entry
                .indexes
                .iter()
                .map(|(name, r)| {
                    let listed = Listed {
                        definition: r.definition.clone(),
                        deferred: r.deferred,
                        replicas: r.replicas,
                        holders: r.holders(state).iter().filter_map(holder).collect(),
                    };
                    (name.clone(), listed)
                })
                .collect();
            (bucket.clone(), indexes)
        })
        .collect();
    Listing {
        generation: 0,
        this,
        buckets,
    }
}
