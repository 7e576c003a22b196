//! What the planner knows of an index.

use crate::ast::{Expr, IndexKey};

/// One index on the statement's keyspace, as the index service describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexInfo {
    pub name: String,
    /// The keys as `CREATE INDEX` wrote them, relative to the keyspace (`status`,
    /// `address.city`, `LOWER(name)`); empty for a primary index.
    pub keys: Vec<IndexKey>,
    /// A partial index's `WHERE`: only documents it is true for have entries.
    pub condition: Option<Expr>,
    /// Entries are the document keys' raw bytes, one per document.
    pub primary: bool,
    /// Built and caught up. A deferred or building index holds too few entries to be read.
    pub online: bool,
}

impl IndexInfo {
    /// An online secondary index on `keys`, none of them DESC or INCLUDE MISSING.
    pub fn secondary(name: &str, keys: Vec<Expr>) -> Self {
        IndexInfo {
            name: name.to_owned(),
            keys: keys
                .into_iter()
                .map(|expr| IndexKey {
                    expr,
                    descending: false,
                    include_missing: false,
                })
                .collect(),
            condition: None,
            primary: false,
            online: true,
        }
    }

    /// An online primary index (Couchbase names the default one `#primary`).
    pub fn primary(name: &str) -> Self {
        IndexInfo {
            name: name.to_owned(),
            keys: Vec::new(),
            condition: None,
            primary: true,
            online: true,
        }
    }
}
