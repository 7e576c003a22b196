//! The cluster's index catalog: which secondary indexes each bucket has, kept in the
//! replicated metadata so every node agrees on them, with the nodes that hold a copy of
//! each (`index_placement`). Each copy is built from the same definition by its node's own
//! index service; a query on any node uses its own copy, or asks a node that has one.
//!
//! The definition is the index service's own text (its JSON, with the keys as SQL++), kept
//! opaque here: the metadata only names, counts and orders indexes.
//!
//! As in Couchbase, an index's name is unique within its collection. The catalog names an
//! index by [`catalog_name`]: its own name on the bucket's default collection,
//! `scope.collection.name` on another. Scope and collection names hold no `.`, and an index
//! name may not either, so a catalog name splits back one way only ([`split_catalog_name`]).
//! Dropping a collection (or its scope) drops its indexes with it.

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
    /// Copies besides the first (`WITH {"num_replica": n}`).
    #[serde(default)]
    pub replicas: u8,
    /// The nodes holding a copy, chosen by the metadata (`index_placement`): whatever a
    /// `CreateIndex` command carries here is replaced. `None` on records stored before
    /// placement existed: every node holds those.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<crate::node::NodeId>>,
}

impl IndexRecord {
    /// The nodes holding a copy in `state`: those placed, or for a record stored before
    /// placement, every node that may hold one (runs the index service, not failed over).
    pub fn holders(&self, state: &ClusterState) -> Vec<crate::node::NodeId> {
        match &self.nodes {
            Some(nodes) => nodes.clone(),
            None => super::index_placement::candidates(state)
                .into_iter()
                .collect(),
        }
    }

    /// Whether node `id` holds a copy in `state`.
    pub fn held_by(&self, id: crate::node::NodeId, state: &ClusterState) -> bool {
        self.holders(state).contains(&id)
    }
}

/// The catalog's name of index `name` on `scope.collection`.
pub fn catalog_name(scope: &str, collection: &str, name: &str) -> String {
    if scope == DEFAULT && collection == DEFAULT {
        name.to_string()
    } else {
        format!("{scope}.{collection}.{name}")
    }
}

/// `(scope, collection, name)` of a catalog name; `None` if it is none (a name with one
/// `.`, or more than two).
pub fn split_catalog_name(key: &str) -> Option<(&str, &str, &str)> {
    let mut parts = key.split('.');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(name), None, _, _) => Some((DEFAULT, DEFAULT, name)),
        (Some(scope), Some(collection), Some(name), None) => Some((scope, collection, name)),
        _ => None,
    }
}

const DEFAULT: &str = "_default";

/// Drops the indexes of `scope.collection` of `entry` (every collection of `scope` when
/// `collection` is `None`): what a dropped collection had indexed is gone with it.
pub(super) fn drop_indexes_of(entry: &mut BucketEntry, scope: &str, collection: Option<&str>) {
    entry
        .indexes
        .retain(|key, _| match split_catalog_name(key) {
            Some((s, c, _)) => !(s == scope && collection.is_none_or(|want| want == c)),
            None => true,
        });
}

pub(super) fn create_index(
    state: &mut ClusterState,
    bucket: &str,
    name: &str,
    record: &IndexRecord,
    on: Option<&[crate::node::NodeId]>,
) -> MetaResponse {
    let Some((_, _, own)) = split_catalog_name(name) else {
        return Err(Rejection::BadIndex {
            reason: "an index name holds no '.'".into(),
        });
    };
    if own.is_empty() || own.len() > INDEX_NAME_BYTES_MAX {
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
    let nodes = match on {
        Some(on) => super::index_placement::check_asked(state, on, record.replicas)?,
        None => super::index_placement::place_new(state, record.replicas)?,
    };
    let record = IndexRecord {
        nodes: Some(nodes),
        ..record.clone()
    };
    bucket_entry(state, bucket)?
        .indexes
        .insert(name.to_string(), record);
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
            conflict_resolution: Default::default(),
        };
        apply(&mut state, &MetaCommand::DefineBucket { bucket: def }).unwrap();
        // One node to hold the indexes.
        apply(&mut state, &MetaCommand::AllocateNodeId).unwrap();
        let info = crate::NodeInfo {
            id: crate::NodeId(0),
            host: "127.0.0.1".into(),
            kv_port: 11000,
            admin_port: 9000,
            tls: None,
            services: crate::Services::ALL,
        };
        apply(&mut state, &MetaCommand::AddNode { info }).unwrap();
        state
    }

    fn create(name: &str, deferred: bool) -> MetaCommand {
        MetaCommand::CreateIndex {
            bucket: "default".into(),
            name: name.into(),
            index: IndexRecord {
                definition: format!("{{\"name\":\"{name}\"}}"),
                deferred,
                replicas: 0,
                nodes: None,
            },
            on: None,
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
    #[test]
    fn a_collections_indexes_are_named_in_it_and_dropped_with_it() {
        assert_eq!(catalog_name("_default", "_default", "ix"), "ix");
        assert_eq!(catalog_name("inv", "hotel", "ix"), "inv.hotel.ix");
        assert_eq!(
            split_catalog_name("ix"),
            Some(("_default", "_default", "ix"))
        );
        assert_eq!(
            split_catalog_name("inv.hotel.ix"),
            Some(("inv", "hotel", "ix"))
        );
        assert_eq!(split_catalog_name("a.b"), None);
        assert_eq!(split_catalog_name("a.b.c.d"), None);

        let mut s = with_bucket();
        for scope in ["inv", "other"] {
            apply(
                &mut s,
                &MetaCommand::CreateScope {
                    bucket: "default".into(),
                    name: scope.into(),
                },
            )
            .unwrap();
        }
        for (scope, c) in [("inv", "hotel"), ("inv", "air"), ("other", "hotel")] {
            let cmd = MetaCommand::CreateCollection {
                bucket: "default".into(),
                scope: scope.into(),
                name: c.into(),
                max_ttl_s: 0,
            };
            apply(&mut s, &cmd).unwrap();
        }
        // One name on several collections, and on the default one.
        for key in [
            "ix",
            "inv.hotel.ix",
            "inv.air.ix",
            "other.hotel.ix",
            "other.hotel.p",
        ] {
            apply(&mut s, &create(key, false)).unwrap();
        }
        // A dotted name would read as another collection's.
        for bad in ["a.b", "inv.hotel.x.y", "inv.hotel."] {
            assert!(
                matches!(
                    apply(&mut s, &create(bad, false)),
                    Err(Rejection::BadIndex { .. })
                ),
                "{bad}"
            );
        }
        let keys = |s: &ClusterState| -> Vec<String> {
            s.buckets()["default"].indexes.keys().cloned().collect()
        };
        let drop = MetaCommand::DropCollection {
            bucket: "default".into(),
            scope: "inv".into(),
            name: "hotel".into(),
        };
        apply(&mut s, &drop).unwrap();
        assert_eq!(
            keys(&s),
            ["inv.air.ix", "ix", "other.hotel.ix", "other.hotel.p"]
        );
        let drop = MetaCommand::DropScope {
            bucket: "default".into(),
            name: "other".into(),
        };
        apply(&mut s, &drop).unwrap();
        assert_eq!(keys(&s), ["inv.air.ix", "ix"]);
        // A refused drop drops no index.
        let again = MetaCommand::DropScope {
            bucket: "default".into(),
            name: "other".into(),
        };
        assert!(apply(&mut s, &again).is_err());
        assert_eq!(keys(&s), ["inv.air.ix", "ix"]);
    }
}
