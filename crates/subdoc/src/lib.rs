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
//! `document` (the operations), `error` (one variant per per-path status), `xattr` (the
//! extended-attribute section: its codec, and the xattrs as one JSON object for paths),
//! `macros` (macro expansion in xattr values), `crc32c` (the checksum of
//! `${Mutation.value_crc32c}`).
#![deny(unsafe_code)]

mod crc32c;
mod document;
mod error;
pub mod macros;
pub mod path;
mod scan;
mod value;
pub mod xattr;

pub use crc32c::crc32c;
pub use document::{Document, LookupOp, Mutation, MutationOp};
pub use error::SubdocError;
pub use macros::{Macro, Placeholders};
pub use path::{Component, Index, Path, PATH_BYTES_MAX, PATH_COMPONENTS_MAX};
pub use value::check_document;
pub use xattr::{XattrError, Xattrs};

#[cfg(test)]
mod tests;
