//! `system:indexes`: one row per index of the cluster's catalog, whichever nodes hold it,
//! shaped as Couchbase's (what the SDKs' query index
//! managers read: `name`, `is_primary`, `using`, `state`, `keyspace_id`, `namespace_id`,
//! `bucket_id`/`scope_id` for a named collection, `index_key`, `condition`).

use serde_json::{json, Map, Value};
use sluice_index::IndexDef;
use sluice_query::Row;

/// The row of `def` in `state`, keyed by its id as Couchbase keys `system:indexes`
/// documents.
pub fn row(def: &IndexDef, state: &str, datastore: &str) -> Row {
    let mut m = Map::new();
    m.insert("datastore_id".into(), json!(datastore));
    m.insert("id".into(), json!(id_of(def)));
    m.insert(
        "index_key".into(),
        Value::Array(
            def.keys
                .iter()
                .map(|k| {
                    let mut text = k.expr.to_string();
                    if k.include_missing {
                        text.push_str(" INCLUDE MISSING");
                    }
                    if k.descending {
                        text.push_str(" DESC");
                    }
                    json!(text)
                })
                .collect(),
        ),
    );
    if def.primary {
        m.insert("is_primary".into(), json!(true));
    }
    if let Some(c) = &def.condition {
        m.insert("condition".into(), json!(c.to_string()));
    }
    let default_collection = def.scope == "_default" && def.collection == "_default";
    if default_collection {
        m.insert("keyspace_id".into(), json!(def.bucket));
    } else {
        m.insert("bucket_id".into(), json!(def.bucket));
        m.insert("scope_id".into(), json!(def.scope));
        m.insert("keyspace_id".into(), json!(def.collection));
    }
    m.insert("name".into(), json!(def.name));
    m.insert("namespace_id".into(), json!("default"));
    m.insert("state".into(), json!(state));
    m.insert("using".into(), json!("gsi"));
    Row::new(id_of(def), Value::Object(m))
}

/// An id for an index, the same on every node (each copy has its own node-local number):
/// FNV-1a of its bucket, scope, collection and name, as hex.
fn id_of(def: &IndexDef) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in [&def.bucket, &def.scope, &def.collection, &def.name] {
        for b in part.bytes().chain([0]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}
