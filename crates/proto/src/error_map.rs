//! The GET_ERROR_MAP document, generated from the status table so the two never disagree.

use crate::status::Status;
use serde_json::{json, Map, Value};

/// Bumped whenever an entry changes, so clients can tell maps apart.
pub const ERROR_MAP_REVISION: u64 = 1;

/// The error map as JSON bytes, for a client that understands up to `max_version`.
pub fn error_map_json(max_version: u16) -> Vec<u8> {
    let mut errors = Map::new();
    for s in Status::ALL {
        errors.insert(
            format!("{:x}", s.code()),
            json!({"name": format!("{s:?}"), "desc": s.description(), "attrs": s.attrs()}),
        );
    }
    let doc = json!({
        "version": max_version.min(2),
        "revision": ERROR_MAP_REVISION,
        "errors": Value::Object(errors),
    });
    serde_json::to_vec(&doc).expect("a JSON value serialises")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn has_revision_version_and_hex_keys() {
        let v: Value = serde_json::from_slice(&error_map_json(2)).unwrap();
        assert_eq!(v["version"], 2);
        assert!(v["revision"].is_u64());
        assert_eq!(v["errors"]["7"]["attrs"][0], "fetch-config");
        assert_eq!(v["errors"]["86"]["name"], "Etmpfail");
    }
}
