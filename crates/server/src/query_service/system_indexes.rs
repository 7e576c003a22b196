//! `system:indexes`: one row per index, shaped as Couchbase's (what the SDKs' query index
//! managers read: `name`, `is_primary`, `using`, `state`, `keyspace_id`, `namespace_id`,
//! `bucket_id`/`scope_id` for a named collection, `index_key`, `condition`).

use serde_json::{json, Map, Value};
use sluice_index::IndexDef;
use sluice_query::Row;

/// The row of `def`, keyed by its id as Couchbase keys `system:indexes` documents.
pub fn row(def: &IndexDef, datastore: &str) -> Row {
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
    m.insert("state".into(), json!(def.state.as_str()));
    m.insert("using".into(), json!("gsi"));
    Row::new(id_of(def), Value::Object(m))
}

/// A stable id for an index: its node-local number, as hex.
fn id_of(def: &IndexDef) -> String {
    format!("{:016x}", def.id.0)
}
