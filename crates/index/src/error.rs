//! The crate's one error type.

use sluice_query::index_key::IndexKeyError;

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The storage engine failed; the index may be behind but is not corrupt (every write
    /// is one atomic batch with its position).
    #[error("index storage: {0}")]
    Storage(#[from] fjall::Error),
    /// Bytes in the store that this version cannot read.
    #[error("index store is corrupt: {0}")]
    Corrupt(String),
    #[error("index {name} already exists on {keyspace}")]
    Exists { name: String, keyspace: String },
    #[error("no index with id {0}")]
    NoSuchIndex(u32),
    /// A stored definition whose text no longer parses.
    #[error("index definition {name}: {source}")]
    Definition {
        name: String,
        #[source]
        source: sluice_query::QueryError,
    },
    /// A document's key values do not fit an index entry (too long or nested too deep).
    #[error("index key: {0}")]
    Key(#[from] IndexKeyError),
}

pub type Result<T> = std::result::Result<T, IndexError>;
