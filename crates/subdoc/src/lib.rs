//! Sub-document operations: read and change parts of a JSON document by path, as Couchbase's
//! sub-document API does (lookups `get`, `exists`, `get_count`; mutations `dict_add`,
//! `dict_upsert`, `delete`, `replace`, the array operations and `counter`).
//!
//! Pure: bytes in, bytes out. The server decodes the wire request, reads the stored document,
//! calls [`Document::lookup`] / [`Document::apply`] for each path, and stores the result under
//! the document's CAS.
//!
//! Layout: `path` (the path syntax and its limits), `value` (what JSON is accepted),
//! `scan` (finding values by byte position, so a mutation keeps every other byte),
//! `document` (the operations), `error` (one variant per per-path status).
#![deny(unsafe_code)]

mod document;
mod error;
pub mod path;
mod scan;
mod value;

pub use document::{Document, LookupOp, Mutation, MutationOp};
pub use error::SubdocError;
pub use path::{Component, Index, Path, PATH_BYTES_MAX, PATH_COMPONENTS_MAX};
pub use value::check_document;

#[cfg(test)]
mod tests;
