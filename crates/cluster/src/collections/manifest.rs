//! `Manifest`: a bucket's scopes and collections, and what the data path asks of it.
//!
//! Besides the scopes (the stored form), a manifest keeps an index from collection id to
//! where it lives: the data path asks `has_collection` of every request that names a
//! collection, and a scan of up to [`COLLECTIONS_PER_BUCKET_MAX`] entries there would cost
//! more than the request. The index is derived, never stored: it is rebuilt whenever the
//! manifest is read back (`ManifestRepr`) or changed.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::collections::error::Lookup;

/// The name of the scope and of the collection every bucket has.
pub const DEFAULT_NAME: &str = "_default";
/// The id of the `_default` scope, and of its `_default` collection.
pub const DEFAULT_ID: u32 = 0;
/// The first id handed out to a new scope or collection; 1..=7 are reserved (Couchbase's).
pub const FIRST_ID: u32 = 8;
/// Most scopes in one bucket, `_default` included (Couchbase's default limit).
pub const SCOPES_PER_BUCKET_MAX: usize = 1000;
/// Most collections in one bucket, over all its scopes, `_default` included (Couchbase's).
pub const COLLECTIONS_PER_BUCKET_MAX: usize = 1000;
/// The largest `maxTTL`, in seconds: the SDKs read it as a signed 32-bit number.
pub const MAX_TTL_S_MAX: u32 = i32::MAX as u32;

/// One collection of a scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Collection {
    pub name: String,
    /// Unique in the bucket (over every scope), never reused.
    pub id: u32,
    /// The longest a document written to it may live, in seconds (0: no limit). A write
    /// without an expiry, or with a later one, gets this one.
    #[serde(default)]
    pub max_ttl_s: u32,
}

/// One scope and its collections, in the order they were created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    pub name: String,
    pub id: u32,
    pub collections: Vec<Collection>,
}

/// Where a live collection is: its scope's id and its `maxTTL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Placed {
    pub(crate) scope_id: u32,
    pub(crate) max_ttl_s: u32,
}

/// A bucket's collections manifest. Built by `new` (the default one) and changed only by
/// the operations in `change`, which keep the module's rules; a manifest read back from JSON
/// is checked with `check` by whoever reads it (the cluster state does).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "ManifestRepr", into = "ManifestRepr")]
pub struct Manifest {
    /// Grows by 1 with every change; 0 for the default manifest.
    pub(crate) uid: u64,
    /// `_default` first, then the others in the order they were created.
    pub(crate) scopes: Vec<Scope>,
    /// The id the next new scope gets.
    pub(crate) next_scope_id: u32,
    /// The id the next new collection gets.
    pub(crate) next_collection_id: u32,
    /// Derived from `scopes`: every live collection by id.
    pub(crate) index: BTreeMap<u32, Placed>,
}

impl Default for Manifest {
    fn default() -> Manifest {
        Manifest::new()
    }
}

impl Manifest {
    /// The manifest of a new bucket: scope `_default` holding collection `_default`, uid 0.
    pub fn new() -> Manifest {
        let default = Scope {
            name: DEFAULT_NAME.to_string(),
            id: DEFAULT_ID,
            collections: vec![Collection {
                name: DEFAULT_NAME.to_string(),
                id: DEFAULT_ID,
                max_ttl_s: 0,
            }],
        };
        Manifest::from(ManifestRepr {
            uid: 0,
            scopes: vec![default],
            next_scope_id: FIRST_ID,
            next_collection_id: FIRST_ID,
        })
    }

    /// The manifest's version: a newer manifest has a larger uid.
    pub fn uid(&self) -> u64 {
        self.uid
    }

    /// The scopes, `_default` first, then in the order they were created.
    pub fn scopes(&self) -> &[Scope] {
        &self.scopes
    }

    /// The id the next new scope gets (every scope id ever handed out is below it).
    pub fn next_scope_id(&self) -> u32 {
        self.next_scope_id
    }

    /// The id the next new collection gets (every collection id ever handed out is below
    /// it).
    pub fn next_collection_id(&self) -> u32 {
        self.next_collection_id
    }

    /// Scope `name`, if there is one.
    pub fn scope(&self, name: &str) -> Option<&Scope> {
        self.scopes.iter().find(|s| s.name == name)
    }

    /// The id of scope `scope`.
    pub fn scope_id(&self, scope: &str) -> Result<u32, Lookup> {
        self.scope(scope).map(|s| s.id).ok_or(Lookup::UnknownScope)
    }

    /// The id of collection `collection` of scope `scope`.
    pub fn collection_id(&self, scope: &str, collection: &str) -> Result<u32, Lookup> {
        let scope = self.scope(scope).ok_or(Lookup::UnknownScope)?;
        scope
            .collections
            .iter()
            .find(|c| c.name == collection)
            .map(|c| c.id)
            .ok_or(Lookup::UnknownCollection)
    }

    /// Whether collection `cid` exists now.
    pub fn has_collection(&self, cid: u32) -> bool {
        self.index.contains_key(&cid)
    }

    /// Whether collection `cid` was created once and has been dropped since (its documents
    /// are to be ignored, never served). Ids never handed out (1..=7, and from
    /// `next_collection_id` on) are not dropped ones; neither is 0, which is never dropped.
    pub fn is_dropped_collection(&self, cid: u32) -> bool {
        (FIRST_ID..self.next_collection_id).contains(&cid) && !self.has_collection(cid)
    }

    /// The id of the scope collection `cid` belongs to, if it exists.
    pub fn scope_of(&self, cid: u32) -> Option<u32> {
        self.index.get(&cid).map(|p| p.scope_id)
    }

    /// Collection `cid`'s `maxTTL` in seconds (0: no limit), if it exists.
    pub fn max_ttl_s(&self, cid: u32) -> Option<u32> {
        self.index.get(&cid).map(|p| p.max_ttl_s)
    }

    /// The ids of scope `sid`'s collections, in the order they were created (none for a
    /// scope that does not exist).
    pub fn collection_ids_of_scope(&self, sid: u32) -> Vec<u32> {
        self.scopes
            .iter()
            .find(|s| s.id == sid)
            .map(|s| s.collections.iter().map(|c| c.id).collect())
            .unwrap_or_default()
    }

    /// Every collection as `(scope name, scope id, collection name, collection id)`, scope by
    /// scope in the manifest's order.
    pub fn collections(&self) -> impl Iterator<Item = (&str, u32, &str, u32)> + '_ {
        self.scopes.iter().flat_map(|s| {
            s.collections
                .iter()
                .map(move |c| (s.name.as_str(), s.id, c.name.as_str(), c.id))
        })
    }

    /// How many collections the bucket holds, over all its scopes.
    pub fn collection_count(&self) -> usize {
        self.index.len()
    }

    /// Rebuilds the index from the scopes, after a change.
    pub(crate) fn reindex(&mut self) {
        self.index = index_of(&self.scopes);
    }
}

fn index_of(scopes: &[Scope]) -> BTreeMap<u32, Placed> {
    scopes
        .iter()
        .flat_map(|s| {
            s.collections.iter().map(move |c| {
                let placed = Placed {
                    scope_id: s.id,
                    max_ttl_s: c.max_ttl_s,
                };
                (c.id, placed)
            })
        })
        .collect()
}

/// A manifest as stored: everything but the derived index, unchecked until `check`.
#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct ManifestRepr {
    pub(crate) uid: u64,
    pub(crate) scopes: Vec<Scope>,
    pub(crate) next_scope_id: u32,
    pub(crate) next_collection_id: u32,
}

impl From<ManifestRepr> for Manifest {
    fn from(r: ManifestRepr) -> Manifest {
        Manifest {
            index: index_of(&r.scopes),
            uid: r.uid,
            scopes: r.scopes,
            next_scope_id: r.next_scope_id,
            next_collection_id: r.next_collection_id,
        }
    }
}

impl From<Manifest> for ManifestRepr {
    fn from(m: Manifest) -> ManifestRepr {
        ManifestRepr {
            uid: m.uid,
            scopes: m.scopes,
            next_scope_id: m.next_scope_id,
            next_collection_id: m.next_collection_id,
        }
    }
}
