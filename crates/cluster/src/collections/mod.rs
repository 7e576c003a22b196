//! A bucket's collections manifest, as Couchbase Server keeps it: the bucket's scopes, each
//! holding collections, every one with a numeric id the data path carries in its keys and
//! DCP streams, and a manifest `uid` that grows with every change so a node (or a client)
//! can tell which of two manifests is newer.
//!
//! No I/O: the replicated metadata (`metadata::apply`) changes a bucket's manifest through the
//! operations here, every node applies the same changes in the same order, and the data path
//! asks the queries (`collection_id`, `has_collection`, ...) of the manifest its node serves.
//!
//! Layout:
//! - `manifest` — `Manifest`, `Scope`, `Collection` and the queries;
//! - `change` — creating and dropping scopes and collections;
//! - `name` — the rules a scope or collection name follows;
//! - `error` — `ManifestError` (why a change is refused), `Lookup` (why a name lookup found
//!   nothing);
//! - `check` — the invariants a manifest read back from disk must hold;
//! - `json` — the manifest as Couchbase's REST API and the SDKs read it.
//!
//! Rules that must stay true (from Couchbase, except where marked):
//! - scope `_default` (id 0) with collection `_default` (id 0) is always there: a client that
//!   knows nothing of collections reads and writes it. Couchbase lets the `_default`
//!   collection be dropped; Sluice refuses (a documented deviation), so such clients always
//!   have a home;
//! - ids 1..=7 are reserved; new scope ids and collection ids come from two counters that
//!   start at 8 and never go back, so an id is never reused after a drop: documents of a
//!   dropped collection may still sit on disk or in a DCP stream, and a reused id would give
//!   them to a collection they never belonged to;
//! - every successful change adds 1 to `uid`; a refused one changes nothing.

mod change;
mod check;
mod error;
mod json;
mod manifest;
mod name;

#[cfg(test)]
mod tests;

pub use check::ManifestInvariant;
pub use error::{Lookup, ManifestError};
pub use manifest::{
    Collection, Manifest, Scope, COLLECTIONS_PER_BUCKET_MAX, DEFAULT_ID, DEFAULT_NAME, FIRST_ID,
    MAX_TTL_S_MAX, SCOPES_PER_BUCKET_MAX,
};
pub use name::{check_name, NAME_BYTES_MAX};
