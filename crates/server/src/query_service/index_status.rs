//! `GET /indexStatus`: every copy of every index of the cluster's catalog, with the node
//! that holds it, as Couchbase's index status route lists them (one entry per copy:
//! `indexName`, `bucket`, `scope`, `collection`, `replicaId`, `numReplica`, `hosts` with
//! the holder's plain admin address, `nodeId`, `status` `Ready`, `Building`, `Created` (deferred) or
//! `Offline` when the holder does not answer). Needs reading the cluster (the admin port's
//! default rule for a GET).

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use sluice_cluster::split_catalog_name;

use super::copies::HolderStates;
use super::QueryService;

pub(super) async fn serve(State(service): State<Arc<QueryService>>) -> Response {
    let listing = service.node.index.listing();
    let mut asked = HolderStates::default();
    let mut entries = Vec::new();
    for (bucket, indexes) in &listing.buckets {
        for (key, listed) in indexes {
            let Some((scope, collection, name)) = split_catalog_name(key) else {
                continue;
            };
            for (replica, holder) in listed.holders.iter().enumerate() {
                let state = asked.state(&service, &holder.admin, bucket, key).await;
                let status = match state.flatten() {
                    Some("online") => "Ready",
                    Some("building") => "Building",
                    Some(_) => "Created",
                    None => "Offline",
                };
                entries.push(json!({
                    "indexName": name,
                    "index": name,
                    "bucket": bucket,
                    "scope": scope,
                    "collection": collection,
                    "replicaId": replica,
                    "numReplica": listed.replicas,
                    "hosts": [holder.shown],
                    "nodeId": holder.id.0,
                    "status": status,
                }));
            }
        }
    }
    Json(json!({ "indexes": entries, "warnings": [] })).into_response()
}
