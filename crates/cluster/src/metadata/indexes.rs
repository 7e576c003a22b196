//! The cluster's index catalog: which secondary indexes each bucket has, kept in the
//! replicated metadata so every node agrees on them. Every node that serves the bucket
//! holds a copy of every index of it, built from the same definition by its own index
//! service; a query on any node uses its own copy.
//!
//! The definition is the index service's own text (its JSON, with the keys as SQL++), kept
//! opaque here: the metadata only names, counts and orders indexes.

use serde::{Deserialize, Serialize};

use super::command::{Applied, MetaResponse, Rejection};
use super::state::{BucketEntry, ClusterState};

/// Indexes one bucket may have.
pub const INDEXES_PER_BUCKET_MAX: usize = 64;
/// Bytes of an index name (Couchbase allows 219).
pub const INDEX_NAME_BYTES_MAX: usize = 219;
/// Bytes of an index definition.
pub const INDEX_DEFINITION_BYTES_MAX: usize = 16 * 1024;

/// One index of a bucket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexRecord {
    /// The index service's definition, opaque here.
    pub definition: String,
    /// Defined with `defer_build`: nodes hold it without building it until `BuildIndexes`.
    pub deferred: bool,
}

pub(super) fn create_index(
    state: &mut ClusterState,
    bucket: &str,
    name: &str,
    record: &IndexRecord,
) -> MetaResponse {
    if name.is_empty() || name.len() > INDEX_NAME_BYTES_MAX {
        return Err(Rejection::BadIndex {
            reason: format!("an index name is 1 to {INDEX_NAME_BYTES_MAX} bytes"),
        });
    }
    if record.definition.len() > INDEX_DEFINITION_BYTES_MAX {
        return Err(Rejection::BadIndex {
            reason: format!("a definition is at most {INDEX_DEFINITION_BYTES_MAX} bytes"),
        });
    }
    let entry = bucket_entry(state, bucket)?;
    if entry.indexes.contains_key(name) {
        return Err(Rejection::IndexExists {
            bucket: bucket.to_string(),
            name: name.to_string(),
        });
    }
    if entry.indexes.len() >= INDEXES_PER_BUCKET_MAX {
        return Err(Rejection::TooManyIndexes {
            max: INDEXES_PER_BUCKET_MAX,
        });
    }
    entry.indexes.insert(name.to_string(), record.clone());
    Ok(Applied::IndexesChanged)
}

pub(super) fn drop_index(state: &mut ClusterState, bucket: &str, name: &str) -> MetaResponse {
    let entry = bucket_entry(state, bucket)?;
    if entry.indexes.remove(name).is_none() {
        return Err(no_such(bucket, name));
    }
    Ok(Applied::IndexesChanged)
}

/// Marks `names` built. All or nothing: an unknown name refuses the whole command. An
/// index built already stays built.
pub(super) fn build_indexes(
    state: &mut ClusterState,
    bucket: &str,
    names: &[String],
) -> MetaResponse {
    let entry = bucket_entry(state, bucket)?;
    if let Some(missing) = names.iter().find(|n| !entry.indexes.contains_key(*n)) {
        return Err(no_such(bucket, missing));
    }
    for name in names {
        if let Some(record) = entry.indexes.get_mut(name) {
            record.deferred = false;
        }
    }
    Ok(Applied::IndexesChanged)
}

fn bucket_entry<'a>(
    state: &'a mut ClusterState,
    bucket: &str,
) -> Result<&'a mut BucketEntry, Rejection> {
    state
        .buckets
        .get_mut(bucket)
        .ok_or_else(|| Rejection::NoSuchBucket {
            name: bucket.to_string(),
        })
}

fn no_such(bucket: &str, name: &str) -> Rejection {
    Rejection::NoSuchIndex {
        bucket: bucket.to_string(),
        name: name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{apply, BucketDef, MetaCommand};
    use crate::BucketKind;

    fn with_bucket() -> ClusterState {
        let mut state = ClusterState::default();
        let def = BucketDef {
            name: "default".into(),
            uuid: "u1".into(),
            kind: BucketKind::Couchbase,
            replicas: 1,
            vbuckets: 16,
            quota_bytes: 100 << 20,
            durability_min: None,
        };
        apply(&mut state, &MetaCommand::DefineBucket { bucket: def }).unwrap();
        state
    }

    fn create(name: &str, deferred: bool) -> MetaCommand {
        MetaCommand::CreateIndex {
            bucket: "default".into(),
            name: name.into(),
            index: IndexRecord {
                definition: format!("{{\"name\":\"{name}\"}}"),
                deferred,
            },
        }
    }

    #[test]
    fn indexes_are_created_built_and_dropped_once() {
        let mut s = with_bucket();
        assert_eq!(
            apply(&mut s, &create("a", true)),
            Ok(Applied::IndexesChanged)
        );
        assert_eq!(
            apply(&mut s, &create("a", false)),
            Err(Rejection::IndexExists {
                bucket: "default".into(),
                name: "a".into()
            })
        );
        let build = |names: &[&str]| MetaCommand::BuildIndexes {
            bucket: "default".into(),
            names: names.iter().map(|n| n.to_string()).collect(),
        };
        // All or nothing: `b` is unknown, so `a` stays deferred.
        assert!(matches!(
            apply(&mut s, &build(&["a", "b"])),
            Err(Rejection::NoSuchIndex { .. })
        ));
        assert!(s.buckets()["default"].indexes["a"].deferred);
        apply(&mut s, &build(&["a"])).unwrap();
        assert!(!s.buckets()["default"].indexes["a"].deferred);
        let drop = MetaCommand::DropIndex {
            bucket: "default".into(),
            name: "a".into(),
        };
        assert_eq!(apply(&mut s, &drop), Ok(Applied::IndexesChanged));
        assert!(matches!(
            apply(&mut s, &drop),
            Err(Rejection::NoSuchIndex { .. })
        ));
    }

    #[test]
    fn an_index_needs_its_bucket_a_name_and_room() {
        let mut s = ClusterState::default();
        assert!(matches!(
            apply(&mut s, &create("a", false)),
            Err(Rejection::NoSuchBucket { .. })
        ));
        let mut s = with_bucket();
        assert!(matches!(
            apply(&mut s, &create("", false)),
            Err(Rejection::BadIndex { .. })
        ));
        for i in 0..INDEXES_PER_BUCKET_MAX {
            apply(&mut s, &create(&format!("i{i}"), false)).unwrap();
        }
        assert_eq!(
            apply(&mut s, &create("one_more", false)),
            Err(Rejection::TooManyIndexes {
                max: INDEXES_PER_BUCKET_MAX
            })
        );
    }

    #[test]
    fn deleting_the_bucket_deletes_its_indexes() {
        let mut s = with_bucket();
        apply(&mut s, &create("a", false)).unwrap();
        apply(
            &mut s,
            &MetaCommand::DeleteBucket {
                name: "default".into(),
            },
        )
        .unwrap();
        let mut s2 = with_bucket();
        assert!(s2.buckets()["default"].indexes.is_empty());
        apply(&mut s2, &create("a", false)).unwrap();
        assert!(s.bucket("default").is_none());
    }

    #[test]
    fn states_saved_before_indexes_read_without_any() {
        let s = with_bucket();
        let mut json: serde_json::Value = serde_json::to_value(&s).unwrap();
        json["buckets"]["default"]
            .as_object_mut()
            .unwrap()
            .remove("indexes");
        let back: ClusterState = serde_json::from_value(json).unwrap();
        assert_eq!(back, s);
    }
}
