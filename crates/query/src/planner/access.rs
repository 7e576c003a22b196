//! The planner's answer: how rows are fetched.

use std::ops::Bound;

use crate::value::Value;

/// How the executor finds the documents a SELECT reads. Whatever it is, the executor
/// fetches each document and applies the whole WHERE again: spans may hold more than the
/// matching documents, never less.
#[derive(Debug, Clone, PartialEq)]
pub enum Access {
    /// No FROM: the statement reads no document.
    None,
    /// `USE KEYS`: fetch these documents by key, in this order (duplicates kept, as the
    /// expression named them).
    KeyLookup { keys: Vec<String> },
    /// Scan a secondary index's entries (`index_key::encode_key` bytes) in `spans`; each
    /// entry ends with the document key to fetch. No spans: nothing can match.
    IndexScan {
        index: String,
        spans: Vec<Span>,
        /// What the spans were built from, for EXPLAIN (before overlapping spans merged).
        ranges: Vec<ScanRange>,
    },
    /// Scan a primary index's entries (raw document-key bytes) in `spans`.
    PrimaryScan {
        index: String,
        spans: Vec<Span>,
        ranges: Vec<ScanRange>,
    },
}

impl Access {
    /// The index a scan reads (none for a key lookup or no FROM).
    pub fn index(&self) -> Option<&str> {
        match self {
            Access::IndexScan { index, .. } | Access::PrimaryScan { index, .. } => Some(index),
            Access::None | Access::KeyLookup { .. } => None,
        }
    }
}

/// A half-open byte range, `start <= entry < end`. A plan's spans are sorted by `start`,
/// never overlap or touch, and each is non-empty (`start < end`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Span {
    pub start: Vec<u8>,
    pub end: Vec<u8>,
}

impl Span {
    pub fn contains(&self, entry: &[u8]) -> bool {
        self.start.as_slice() <= entry && entry < self.end.as_slice()
    }
}

/// One span as ranges over the index keys, leading key first: the keys before the last
/// are equal to one value (`low == high`, both included), the last may be a range. Keys
/// after the last are unconstrained.
#[derive(Debug, Clone, PartialEq)]
pub struct ScanRange {
    pub keys: Vec<KeyRange>,
}

/// The values one index key ranges over in a span, by collation.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyRange {
    /// The index key as SQL++ text (`` `status` ``, `` META().`id` ``).
    pub index_key: String,
    pub low: Bound<Value>,
    pub high: Bound<Value>,
}
