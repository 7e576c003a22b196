//! The invariants of a manifest (`Manifest::check`), for one read back from disk or the
//! network, and asserted after every change the metadata applies:
//! - scope `_default` (id 0) comes first and holds collection `_default` (id 0);
//! - every other scope and collection id is from [`FIRST_ID`] up to, not including, its
//!   counter, and the counters start at [`FIRST_ID`] at least;
//! - scope ids and names are unique in the bucket; collection ids are unique in the bucket,
//!   collection names in their scope;
//! - every name follows the name rules, and no other collection is named `_default`;
//! - the limits hold: scopes, collections, `maxTTL`.

use crate::collections::manifest::{
    Manifest, COLLECTIONS_PER_BUCKET_MAX, DEFAULT_ID, DEFAULT_NAME, FIRST_ID, MAX_TTL_S_MAX,
    SCOPES_PER_BUCKET_MAX,
};
use crate::collections::name::check_name;
use std::collections::BTreeSet;

/// A manifest that breaks one of the invariants above: corrupt input, or a bug.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestInvariant {
    #[error(
        "the manifest does not start with scope _default (id 0) holding collection _default (id 0)"
    )]
    NoDefault,
    #[error(
        "the id counters ({scopes}, {collections}) are below the first id {first}",
        first = FIRST_ID
    )]
    Counters { scopes: u32, collections: u32 },
    #[error("{what} {name:?} has id {id}, which was never handed out")]
    Unallocated {
        what: &'static str,
        name: String,
        id: u32,
    },
    #[error("{what} id {id} is used twice")]
    DuplicateId { what: &'static str, id: u32 },
    #[error("{what} name {name:?} is used twice")]
    DuplicateName { what: &'static str, name: String },
    #[error("{what} name {name:?} breaks the name rules")]
    BadName { what: &'static str, name: String },
    #[error("{count} {what}s; at most {max}")]
    TooMany {
        what: &'static str,
        count: usize,
        max: usize,
    },
    #[error(
        "collection {name:?} has maxTTL {max_ttl_s} s; at most {max}",
        max = MAX_TTL_S_MAX
    )]
    MaxTtl { name: String, max_ttl_s: u32 },
}

impl Manifest {
    /// Checks every invariant in the module comment.
    pub fn check(&self) -> Result<(), ManifestInvariant> {
        self.check_default()?;
        if self.next_scope_id < FIRST_ID || self.next_collection_id < FIRST_ID {
            return Err(ManifestInvariant::Counters {
                scopes: self.next_scope_id,
                collections: self.next_collection_id,
            });
        }
        let count = self.scopes.len();
        if count > SCOPES_PER_BUCKET_MAX {
            return Err(too_many("scope", count, SCOPES_PER_BUCKET_MAX));
        }
        let count = self.collections().count();
        if count > COLLECTIONS_PER_BUCKET_MAX {
            return Err(too_many("collection", count, COLLECTIONS_PER_BUCKET_MAX));
        }
        let mut scope_ids = BTreeSet::new();
        let mut scope_names = BTreeSet::new();
        let mut collection_ids = BTreeSet::new();
        for (i, scope) in self.scopes.iter().enumerate() {
            entry("scope", &scope.name, scope.id, i == 0, self.next_scope_id)?;
            unique(
                "scope",
                &mut scope_ids,
                &mut scope_names,
                scope.id,
                &scope.name,
            )?;
            let mut names = BTreeSet::new();
            for (j, c) in scope.collections.iter().enumerate() {
                let default = i == 0 && j == 0;
                entry(
                    "collection",
                    &c.name,
                    c.id,
                    default,
                    self.next_collection_id,
                )?;
                unique("collection", &mut collection_ids, &mut names, c.id, &c.name)?;
                if c.max_ttl_s > MAX_TTL_S_MAX {
                    return Err(ManifestInvariant::MaxTtl {
                        name: c.name.clone(),
                        max_ttl_s: c.max_ttl_s,
                    });
                }
            }
        }
        Ok(())
    }

    fn check_default(&self) -> Result<(), ManifestInvariant> {
        let first = self.scopes.first();
        let default = first.and_then(|s| s.collections.first().map(|c| (s, c)));
        match default {
            Some((s, c))
                if s.name == DEFAULT_NAME
                    && s.id == DEFAULT_ID
                    && c.name == DEFAULT_NAME
                    && c.id == DEFAULT_ID =>
            {
                Ok(())
            }
            _ => Err(ManifestInvariant::NoDefault),
        }
    }
}

/// One scope or collection's name and id: `_default` with id 0 only where `default` says
/// (the first scope, its first collection); anything else a valid new name with an id that
/// was handed out.
fn entry(
    what: &'static str,
    name: &str,
    id: u32,
    default: bool,
    next: u32,
) -> Result<(), ManifestInvariant> {
    if default {
        return Ok(());
    }
    if (name == DEFAULT_NAME && what == "collection") || check_name(name).is_err() {
        return Err(ManifestInvariant::BadName {
            what,
            name: name.to_string(),
        });
    }
    if !(FIRST_ID..next).contains(&id) {
        return Err(ManifestInvariant::Unallocated {
            what,
            name: name.to_string(),
            id,
        });
    }
    Ok(())
}

/// Records `id` and `name` as seen, refusing a second sighting of either.
fn unique<'a>(
    what: &'static str,
    ids: &mut BTreeSet<u32>,
    names: &mut BTreeSet<&'a str>,
    id: u32,
    name: &'a str,
) -> Result<(), ManifestInvariant> {
    if !ids.insert(id) {
        return Err(ManifestInvariant::DuplicateId { what, id });
    }
    if !names.insert(name) {
        return Err(ManifestInvariant::DuplicateName {
            what,
            name: name.to_string(),
        });
    }
    Ok(())
}

fn too_many(what: &'static str, count: usize, max: usize) -> ManifestInvariant {
    ManifestInvariant::TooMany { what, count, max }
}
