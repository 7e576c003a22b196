//! Choosing the access path: USE KEYS, else the best usable secondary index, else a
//! primary index, else a secondary index whose leading key includes MISSING (a full
//! scan of it holds every document), else Couchbase's "no index" error.
//!
//! A secondary index is usable only when the WHERE pins its leading key away from MISSING
//! (a document whose leading key is MISSING has no entry, so a scan would miss it), unless
//! that key is `INCLUDE MISSING`; and, for a partial index, when the WHERE implies its
//! condition. Among usable ones the rank is: more leading keys pinned to values, then
//! more keys constrained, then fewer keys, then the name (so the choice is deterministic).

use std::cmp::Reverse;

use super::access::Access;
use super::index::IndexInfo;
use super::normalize::{canonical, conjuncts};
use super::predicate::{Constraint, Pred};
use super::spans::{index_spans, primary_spans};
use crate::ast::{Expr, Ident, Select};
use crate::error::{QueryError, Result};
use crate::eval::{evaluate_keys, Params};

pub use super::spans::MAX_SPANS;

/// How `select` reads its keyspace, given the keyspace's indexes and the statement's
/// parameters. Fails with [`QueryError::NoIndexAvailable`] when nothing can answer it, or
/// with an evaluation error from USE KEYS or a constant in the WHERE.
pub fn plan_access(select: &Select, indexes: &[IndexInfo], params: &Params) -> Result<Access> {
    let Some(from) = &select.from else {
        return Ok(Access::None);
    };
    if let Some(keys) = &from.use_keys {
        return Ok(Access::KeyLookup {
            keys: evaluate_keys(keys, params)?,
        });
    }
    let alias = from.alias();
    // Index keys and conditions are written against the keyspace's own name.
    let index_alias = from.keyspace.default_alias();
    let pred = match &select.filter {
        Some(w) => Pred::build(w, alias, params)?,
        None => Pred::Opaque,
    };
    let query_conjuncts: Vec<Expr> = match &select.filter {
        Some(w) => conjuncts(w)
            .into_iter()
            .filter_map(|c| canonical(c, alias))
            .collect(),
        None => Vec::new(),
    };
    let usable: Vec<&IndexInfo> = indexes
        .iter()
        .filter(|ix| ix.online && implied(ix.condition.as_ref(), index_alias, &query_conjuncts))
        .collect();

    let mut best: Option<(Rank<'_>, Access)> = None;
    let mut include_missing: Option<&IndexInfo> = None;
    for ix in usable.iter().filter(|ix| !ix.primary) {
        let keys: Vec<(String, Constraint)> = ix
            .keys
            .iter()
            .map(|k| (k.expr.to_string(), constraint(&pred, &k.expr, index_alias)))
            .collect();
        let Some((first_key, (_, leading))) = ix.keys.first().zip(keys.first()) else {
            continue;
        };
        match leading {
            Some(set) if set.excludes_missing() || first_key.include_missing => {}
            None if first_key.include_missing => {
                if include_missing.is_none_or(|cur| ix.name < cur.name) {
                    include_missing = Some(ix);
                }
                continue;
            }
            _ => continue,
        }
        let rank = Rank::of(ix, &keys);
        if best.as_ref().is_some_and(|(b, _)| *b <= rank) {
            continue;
        }
        let (spans, ranges) = index_spans(&keys);
        let access = Access::IndexScan {
            index: ix.name.clone(),
            spans,
            ranges,
        };
        best = Some((rank, access));
    }
    if let Some((_, access)) = best {
        return Ok(access);
    }

    let primary = usable
        .iter()
        .filter(|ix| ix.primary)
        .min_by(|a, b| a.name.cmp(&b.name));
    if let Some(ix) = primary {
        let meta_id = Expr::field(Expr::Meta { keyspace: None }, "id");
        let set = pred.sets(&meta_id).0.filter(|s| !s.is_all());
        let (spans, ranges) = primary_spans(&meta_id.to_string(), &set);
        return Ok(Access::PrimaryScan {
            index: ix.name.clone(),
            spans,
            ranges,
        });
    }
    if let Some(ix) = include_missing {
        let keys: Vec<(String, Constraint)> =
            ix.keys.iter().map(|k| (k.expr.to_string(), None)).collect();
        let (spans, ranges) = index_spans(&keys);
        return Ok(Access::IndexScan {
            index: ix.name.clone(),
            spans,
            ranges,
        });
    }
    Err(QueryError::NoIndexAvailable {
        keyspace: from.keyspace.to_string(),
    })
}

/// Where the WHERE holds the index key `key`, or None when it says nothing about it.
fn constraint(pred: &Pred, key: &Expr, index_alias: &Ident) -> Constraint {
    let key = canonical(key, index_alias)?;
    pred.sets(&key).0.filter(|s| !s.is_all())
}

/// Whether every conjunct of a partial index's condition is, canonically, one of the
/// query's conjuncts: then the WHERE being true makes the condition true. Deliberately
/// syntactic; `a > 5` does not imply `a > 3` here.
fn implied(condition: Option<&Expr>, index_alias: &Ident, query: &[Expr]) -> bool {
    let Some(condition) = condition else {
        return true;
    };
    conjuncts(condition)
        .into_iter()
        .all(|c| canonical(c, index_alias).is_some_and(|c| query.contains(&c)))
}

/// Smaller is better.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Rank<'a> {
    equal_leading: Reverse<usize>,
    constrained: Reverse<usize>,
    key_count: usize,
    name: &'a str,
}

impl<'a> Rank<'a> {
    fn of(ix: &'a IndexInfo, keys: &[(String, Constraint)]) -> Self {
        let pinned = |c: &Constraint| c.as_ref().is_some_and(|s| s.points().is_some());
        Rank {
            equal_leading: Reverse(keys.iter().take_while(|(_, c)| pinned(c)).count()),
            constrained: Reverse(keys.iter().filter(|(_, c)| c.is_some()).count()),
            key_count: ix.keys.len(),
            name: &ix.name,
        }
    }
}
