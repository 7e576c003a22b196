//! The query planner: how a SELECT's rows are fetched. Sans-IO: it is handed the parsed
//! statement, the indexes of its keyspace and the parameters, and answers with an
//! [`Access`]: a key lookup, byte spans over an index, or an error when no index fits.
//!
//! # The contract with the executor
//!
//! The executor runs the access path, fetches every document it names, and always applies
//! the whole WHERE clause again in the pipeline. So spans only have to be a *superset* of
//! the entries of matching documents, never a subset: a span too wide costs reads, a span
//! too narrow loses rows. Every decision here leans that way: what is not understood
//! constrains nothing.
//!
//! Index entries are what `sluice-index` writes: `index_key::encode_key(values, doc_key)`
//! with each key evaluated as `evaluate_row(key, keyspace.default_alias(), row)` (an error
//! counts as MISSING), keys encoded ascending whatever their DESC, no entry when the leading
//! key is MISSING (unless `INCLUDE MISSING`) or a partial index's condition is not true.
//! A primary index's entries are the raw document-key bytes.
//!
//! # How predicates become spans
//!
//! 1. `normalize`: a query expression and an index key are compared in one canonical
//!    form, where a field of the document is a bare name (`d.address.city` with alias `d`
//!    and the index key `address.city` are the same tree).
//! 2. `predicate`: the WHERE becomes a tree of AND/OR/NOT over *atoms* (`key op
//!    constant`), constants evaluated once. For a given index key the tree yields two
//!    `interval::ValueSet`s: values the key may have when the WHERE is true, and when it
//!    is false (NOT needs the second: `NOT (a < 5)` is true exactly where `a < 5` is
//!    false). AND intersects, OR unions, NOT swaps the two. Tracking the false side
//!    separately, not as a complement, keeps three-valued logic honest: `a = 1` is
//!    neither true nor false for a NULL `a`.
//! 3. `atoms`: each operator's sets follow this crate's evaluator exactly, which decides
//!    what the executor accepts: comparisons collate across types (`"x" > 5` is TRUE
//!    here, so `a > 5` reaches past the numbers), NULL or MISSING operands accept nothing.
//! 4. `spans`: per-key value sets become byte ranges, equality prefixes first (one span
//!    per combination, capped), then one range key; `choose` ranks the usable indexes.
//!
//! Why sets of values and not bytes: intersections, unions and EXPLAIN's low/high all
//! read naturally on values, and `index_key` guarantees byte order is collation order, so
//! the translation to bytes happens once, at the end.

mod access;
mod atoms;
mod choose;
mod cover;
mod explain;
mod index;
mod interval;
mod like_prefix;
mod normalize;
mod order;
mod predicate;
mod spans;

#[cfg(test)]
mod prop_cover;
#[cfg(test)]
mod prop_gen;
#[cfg(test)]
mod prop_order;
#[cfg(test)]
mod prop_tests;
#[cfg(test)]
mod prop_where;
#[cfg(test)]
mod test_util;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_choose;
#[cfg(test)]
mod tests_cover;
#[cfg(test)]
mod tests_explain;
#[cfg(test)]
mod tests_normalize;

pub use access::{Access, KeyRange, ScanRange, Span};
pub use choose::{plan_access, AccessPlanner, MAX_SPANS};
pub use cover::{covering, Cover};
pub use explain::explain;
pub use index::IndexInfo;
pub use order::access_is_ordered;
