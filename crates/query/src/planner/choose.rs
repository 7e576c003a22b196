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
use std::sync::{Arc, OnceLock};

use super::access::Access;
use super::cover::{cover_of, Cover};
use super::index::IndexInfo;
use super::normalize::{canonical, conjuncts};
use super::predicate::{Constraint, Pred, PredShape};
use super::spans::{index_spans, primary_spans};
use crate::ast::{Expr, Ident, Select};
use crate::error::{QueryError, Result};
use crate::eval::{evaluate_keys, Params};

pub use super::spans::MAX_SPANS;

/// How `select` reads its keyspace, given the keyspace's indexes and the statement's
/// parameters. Fails with [`QueryError::NoIndexAvailable`] when nothing can answer it, or
/// with an evaluation error from USE KEYS or a constant in the WHERE.
pub fn plan_access(select: &Select, indexes: &[IndexInfo], params: &Params) -> Result<Access> {
    AccessPlanner::new(select, indexes.into()).choose(select, params)
}

/// The access planning of one SELECT over one set of indexes, made ready once: which
/// indexes its WHERE can use at all (online, a partial index's condition implied) and
/// each one's keys in canonical form, none of which depends on the parameters. A prepared
/// statement keeps one while its keyspace's indexes stay the same; each run then only
/// evaluates its parameters into spans ([`AccessPlanner::choose`]), and a cover is worked
/// out once per index ([`AccessPlanner::cover`]).
pub struct AccessPlanner {
    indexes: Arc<[IndexInfo]>,
    /// The usable secondary indexes, in `indexes`' order.
    secondary: Vec<Candidate>,
    /// The usable primary index that comes first by name.
    primary: Option<usize>,
    /// The WHERE's predicate, but for its constants.
    pred: PredShape,
    /// Per index of `indexes`: its cover of the statement, once asked for.
    covers: Vec<OnceLock<Option<Arc<Cover>>>>,
}

/// A secondary index the statement may use.
struct Candidate {
    /// Its position in [`AccessPlanner::indexes`].
    at: usize,
    /// Per key: its text (as EXPLAIN shows it) and its canonical form (`None`: a key
    /// no predicate can constrain).
    keys: Vec<(String, Option<Expr>)>,
}

impl std::fmt::Debug for AccessPlanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = |at: usize| self.indexes[at].name.as_str();
        f.debug_struct("AccessPlanner")
            .field(
                "secondary",
                &self
                    .secondary
                    .iter()
                    .map(|c| name(c.at))
                    .collect::<Vec<_>>(),
            )
            .field("primary", &self.primary.map(name))
            .finish_non_exhaustive()
    }
}

impl AccessPlanner {
    /// Ready to plan `select` over `indexes`.
    pub fn new(select: &Select, indexes: Arc<[IndexInfo]>) -> AccessPlanner {
        let mut secondary = Vec::new();
        let mut primary: Option<usize> = None;
        let mut pred = PredShape::Opaque;
        if let Some(from) = select.from.as_ref().filter(|f| f.use_keys.is_none()) {
            let alias = from.alias();
            // Index keys and conditions are written against the keyspace's own name.
            let index_alias = from.keyspace.default_alias();
            if let Some(w) = &select.filter {
                pred = PredShape::new(w, alias);
            }
            let query_conjuncts: Vec<Expr> = match &select.filter {
                Some(w) => conjuncts(w)
                    .into_iter()
                    .filter_map(|c| canonical(c, alias))
                    .collect(),
                None => Vec::new(),
            };
            for (at, ix) in indexes.iter().enumerate() {
                if !(ix.online && implied(ix.condition.as_ref(), index_alias, &query_conjuncts)) {
                    continue;
                }
                if ix.primary {
                    if primary.is_none_or(|p| ix.name < indexes[p].name) {
                        primary = Some(at);
                    }
                    continue;
                }
                let keys = ix
                    .keys
                    .iter()
                    .map(|k| (k.expr.to_string(), canonical(&k.expr, index_alias)))
                    .collect();
                secondary.push(Candidate { at, keys });
            }
        }
        let covers = indexes.iter().map(|_| OnceLock::new()).collect();
        AccessPlanner {
            indexes,
            secondary,
            primary,
            pred,
            covers,
        }
    }

    /// How `select` (the statement this planner was made for) reads its keyspace with
    /// `params`: see [`plan_access`].
    pub fn choose(&self, select: &Select, params: &Params) -> Result<Access> {
        let Some(from) = &select.from else {
            return Ok(Access::None);
        };
        if let Some(keys) = &from.use_keys {
            return Ok(Access::KeyLookup {
                keys: evaluate_keys(keys, params)?,
            });
        }
        let pred = self.pred.bind(params)?;
        let mut best: Option<(Rank<'_>, Access)> = None;
        let mut include_missing: Option<&Candidate> = None;
        for c in &self.secondary {
            let ix = &self.indexes[c.at];
            let keys: Vec<(&str, Constraint)> = c
                .keys
                .iter()
                .map(|(text, key)| (text.as_str(), constraint(&pred, key.as_ref())))
                .collect();
            let Some((first_key, (_, leading))) = ix.keys.first().zip(keys.first()) else {
                continue;
            };
            match leading {
                Some(set) if set.excludes_missing() || first_key.include_missing => {}
                None if first_key.include_missing => {
                    if include_missing.is_none_or(|cur| ix.name < self.indexes[cur.at].name) {
                        include_missing = Some(c);
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

        if let Some(at) = self.primary {
            let meta_id = Expr::field(Expr::Meta { keyspace: None }, "id");
            let set = pred.sets(&meta_id).0.filter(|s| !s.is_all());
            let (spans, ranges) = primary_spans(&meta_id.to_string(), &set);
            return Ok(Access::PrimaryScan {
                index: self.indexes[at].name.clone(),
                spans,
                ranges,
            });
        }
        if let Some(c) = include_missing {
            let keys: Vec<(&str, Constraint)> = c
                .keys
                .iter()
                .map(|(text, _)| (text.as_str(), None))
                .collect();
            let (spans, ranges) = index_spans(&keys);
            return Ok(Access::IndexScan {
                index: self.indexes[c.at].name.clone(),
                spans,
                ranges,
            });
        }
        Err(QueryError::NoIndexAvailable {
            keyspace: from.keyspace.to_string(),
        })
    }

    /// The cover of `select` (the statement this planner was made for) by the index
    /// `access` scans, if it covers it: see [`covering`]. Worked out once per index.
    pub fn cover(&self, select: &Select, access: &Access) -> Option<Arc<Cover>> {
        let name = access.index()?;
        let at = self.indexes.iter().position(|ix| ix.name == name)?;
        self.covers[at]
            .get_or_init(|| cover_of(select, &self.indexes[at]).map(Arc::new))
            .clone()
    }
}

/// Where the WHERE holds the index key `key` (canonical), or None when it says nothing
/// about it.
fn constraint(pred: &Pred, key: Option<&Expr>) -> Constraint {
    pred.sets(key?).0.filter(|s| !s.is_all())
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
    fn of(ix: &'a IndexInfo, keys: &[(&str, Constraint)]) -> Self {
        let pinned = |c: &Constraint| c.as_ref().is_some_and(|s| s.points().is_some());
        Rank {
            equal_leading: Reverse(keys.iter().take_while(|(_, c)| pinned(c)).count()),
            constrained: Reverse(keys.iter().filter(|(_, c)| c.is_some()).count()),
            key_count: ix.keys.len(),
            name: &ix.name,
        }
    }
}
