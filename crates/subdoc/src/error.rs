//! What a sub-document operation can fail with, one variant per per-path status Couchbase
//! defines (the server maps each to its SUBDOC_* status code).

/// Why a path operation failed. Nothing was changed when one of these is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SubdocError {
    /// The path names nothing in the document (or a parent of it is missing).
    #[error("the path does not exist in the document")]
    PathEnoent,
    /// The path goes through, or names, a value of the wrong kind (a key into an array, an
    /// index into an object, a counter on a string).
    #[error("the path does not match the document's structure")]
    PathMismatch,
    /// The path is not valid syntax, or not valid for this operation.
    #[error("the path is not valid for this operation")]
    PathEinval,
    /// The path is longer than its byte limit or has too many components.
    #[error("the path is too long or too deep")]
    PathE2big,
    /// The document is nested deeper than a path can reach.
    #[error("the document is nested too deeply")]
    DocE2deep,
    /// The value cannot be inserted: not JSON, empty, not a single primitive where one is
    /// needed, or a counter result outside 64 bits.
    #[error("the value cannot be inserted at this path")]
    ValueCantInsert,
    /// The document body is not JSON.
    #[error("the document is not JSON")]
    DocNotJson,
    /// The number at the path does not fit in a signed 64-bit integer.
    #[error("the existing number is outside the 64-bit range")]
    NumErange,
    /// The counter's delta is not a non-zero signed 64-bit integer.
    #[error("the delta is not a valid non-zero integer")]
    DeltaEinval,
    /// The path already exists (dict_add), or the value is already in the array
    /// (array_add_unique).
    #[error("the path already exists")]
    PathEexists,
    /// Inserting the value would nest the document too deeply.
    #[error("inserting the value would nest the document too deeply")]
    ValueEtoodeep,
}
