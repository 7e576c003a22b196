//! The manifest as Couchbase's REST API answers `GET /pools/default/buckets/B/scopes` and as
//! the SDKs parse it: every uid (the manifest's, each scope's and collection's id) a
//! lower-case hex string without `0x`, and `maxTTL` (seconds) only on collections that have
//! one.

use crate::collections::manifest::Manifest;
use serde_json::{json, Value};

impl Manifest {
    /// `{"uid": "<hex>", "scopes": [{"name", "uid", "collections": [{"name", "uid",
    /// "maxTTL"?}]}]}`.
    pub fn to_json(&self) -> Value {
        let scopes: Vec<Value> = self
            .scopes
            .iter()
            .map(|s| {
                let collections: Vec<Value> = s
                    .collections
                    .iter()
                    .map(|c| {
                        let mut entry = json!({"name": c.name, "uid": format!("{:x}", c.id)});
                        if c.max_ttl_s != 0 {
                            entry["maxTTL"] = json!(c.max_ttl_s);
                        }
                        entry
                    })
                    .collect();
                json!({
                    "name": s.name,
                    "uid": format!("{:x}", s.id),
                    "collections": collections,
                })
            })
            .collect();
        json!({"uid": self.uid_hex(), "scopes": scopes})
    }

    /// The uid as the REST API and the cluster map show it (`collectionsManifestUid`).
    pub fn uid_hex(&self) -> String {
        format!("{:x}", self.uid)
    }
}
