//! Why a manifest change is refused (`ManifestError`), and why a name lookup found nothing
//! (`Lookup`).
//!
//! The messages of `ScopeExists`, `ScopeNotFound`, `CollectionExists` and
//! `CollectionNotFound` are read by the SDKs: their collection managers tell the errors apart
//! by matching the REST answer's body against `Scope with name .+ already exists`,
//! `Scope with name .+ is not found`, `Collection with name .+ already exists` and
//! `Collection with name .+ is not found` (the C++ client; the Java client matches
//! `.*Scope.+not found.*` first, case-sensitively). So the words stay exactly these, and no
//! other message says "Scope" with a capital S followed later by "not found" or "already
//! exists".

use serde::{Deserialize, Serialize};

/// A refused change to a manifest. It changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum ManifestError {
    #[error("Scope with name {scope:?} already exists")]
    ScopeExists { scope: String },
    #[error("Scope with name {scope:?} is not found")]
    ScopeNotFound { scope: String },
    #[error("Collection with name {collection:?} already exists")]
    CollectionExists { scope: String, collection: String },
    /// The scope exists, the collection does not (a missing scope is `ScopeNotFound`).
    #[error("Collection with name {collection:?} is not found")]
    CollectionNotFound { scope: String, collection: String },
    #[error("Deleting the _default scope is not allowed")]
    DropDefaultScope,
    /// A deviation from Couchbase, which allows it: see the module comment.
    #[error(
        "the _default collection of the _default scope cannot be dropped in Sluice: clients \
         that know nothing of collections read and write it"
    )]
    DropDefaultCollection,
    #[error("name length must be in range from 1 to {max} bytes; this one is {len}")]
    NameLength { len: usize, max: usize },
    #[error(
        "name {name:?} can only contain characters A-Z, a-z, 0-9 and the following symbols \
         _ - %"
    )]
    NameChars { name: String },
    #[error("name {name:?}: the first character must not be _ or % (only _default may)")]
    NameStart { name: String },
    #[error("the bucket holds its maximum of {max} scopes")]
    TooManyScopes { max: usize },
    #[error("the bucket holds its maximum of {max} collections")]
    TooManyCollections { max: usize },
    #[error("maxTTL {max_ttl_s} s is more than the largest, {max} s")]
    MaxTtl { max_ttl_s: u32, max: u32 },
    #[error("every {what} id has been handed out")]
    IdsExhausted { what: String },
}

impl ManifestError {
    /// Whether the change named something that is not there (REST answers 404), as opposed
    /// to asking for something not allowed (400).
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            ManifestError::ScopeNotFound { .. } | ManifestError::CollectionNotFound { .. }
        )
    }

    /// Whether the change was refused for the name it gave (REST files it under `name`).
    pub fn is_bad_name(&self) -> bool {
        matches!(
            self,
            ManifestError::NameLength { .. }
                | ManifestError::NameChars { .. }
                | ManifestError::NameStart { .. }
        )
    }
}

/// Why a scope or collection looked up by name has no id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// No scope of that name (Couchbase's `UnknownScope`).
    UnknownScope,
    /// The scope exists, but has no collection of that name (`UnknownCollection`).
    UnknownCollection,
}
