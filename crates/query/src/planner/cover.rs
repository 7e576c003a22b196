//! Covering scans: when the chosen index holds every value a SELECT reads of its documents,
//! the rows are built from the index entries and no document is fetched, as Couchbase
//! answers a query its index covers.
//!
//! # What covers
//!
//! A statement reads the document through *paths* (`d.address.city`, a bare `status`) and
//! through `META()`. The index covers the statement when every path the statement reads
//! anywhere (projection, WHERE, GROUP BY, HAVING, ORDER BY) starts with one of the index's
//! keys that is itself a plain path, and `META()` is only ever read as `META().id` (the
//! entry's document key). A key that is an expression (`LOWER(name)`) covers nothing: the
//! value it stores is not a value of the document. The whole document (`*`, `d`, `d.*`)
//! or any other metadata (`META().cas`) is never covered. A primary index covers only
//! `META().id`. A key holds its path's whole value, so it covers the paths below it too
//! (an index on `address` covers `address.city`).
//!
//! # The row a covered entry becomes
//!
//! A document holding exactly the keys' values at their paths (a MISSING key value is left
//! out, as the document had no such field), keyed by the entry's document key. Every path
//! the statement reads evaluates on it as on the real document, so the pipeline runs
//! unchanged, WHERE included. Values are the index's: a number comes back in its canonical
//! form (`1.0` as `1`), as Couchbase's covered queries return what its index stores. The
//! entry is as fresh as the index: a document changed since is seen as the index saw it,
//! which is what `request_plus` / `at_plus` bound. The index store keeps each entry's
//! document expiry, and the executor leaves out an entry whose document has expired, as a
//! fetch would find it gone (Couchbase's covered queries may return such a document
//! until its expiry pager runs).

use std::ops::ControlFlow;

use serde_json::{Map, Value as J};

use super::access::Access;
use super::index::IndexInfo;
use super::normalize::canonical_in;
use super::order::{explicit_aliases, root_is};
use crate::ast::{Expr, Ident, Literal, Projection, ResultTerm, Select};
use crate::eval::{DocMeta, Row};
use crate::value::Value;

/// How to build rows from the entries of an index that covers a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cover {
    /// Per index key, in key order: the document path it holds, or `None` for a key that
    /// is an expression (its value is not put in the row).
    paths: Vec<Option<Vec<String>>>,
    /// The positions of the keys that hold a path, shorter paths first: placed in this
    /// order, a key's whole value stands for the keys below it. Fixed once, not per row.
    placing: Vec<usize>,
    /// The keys' texts and `META().id`, as EXPLAIN lists what the scan covers.
    covers: Vec<String>,
}

/// The cover of `select` by the index `access` scans, if that index covers it.
pub fn covering(select: &Select, access: &Access, indexes: &[IndexInfo]) -> Option<Cover> {
    let name = access.index()?;
    cover_of(select, indexes.iter().find(|ix| ix.name == name)?)
}

/// The cover of `select` by the index `ix`, if it covers it.
pub(crate) fn cover_of(select: &Select, ix: &IndexInfo) -> Option<Cover> {
    let from = select.from.as_ref()?;
    if from.use_keys.is_some() {
        return None;
    }
    let index_alias = from.keyspace.default_alias();
    let paths: Vec<Option<Vec<String>>> = ix
        .keys
        .iter()
        .map(|k| canonical_in(&k.expr, index_alias, &[]).and_then(|e| doc_path(&e, &[])))
        .collect();
    let usable: Vec<&[String]> = paths.iter().flatten().map(Vec::as_slice).collect();
    let alias = from.alias();
    let reads = |e: &Expr, bound: &[Ident]| {
        canonical_in(e, alias, bound).is_some_and(|c| covered(&c, bound, &usable))
    };
    let projected = match &select.projection {
        Projection::Raw { expr, .. } => reads(expr, &[]),
        Projection::Terms(terms) => terms.iter().all(|t| match t {
            ResultTerm::Star => false,
            ResultTerm::ExprStar(e) | ResultTerm::Expr { expr: e, .. } => reads(e, &[]),
        }),
    };
    // ORDER BY may name a result (`AS x ... ORDER BY x`): that is a projected value, read
    // through the projection, which was checked already.
    let aliases: Vec<Ident> = explicit_aliases(&select.projection)
        .into_iter()
        .cloned()
        .collect();
    let alias_refs: Vec<&Ident> = aliases.iter().collect();
    let clauses = projected
        && select.filter.iter().all(|e| reads(e, &[]))
        && select.group_by.iter().all(|e| reads(e, &[]))
        && select.having.iter().all(|e| reads(e, &[]))
        && select
            .order_by
            .iter()
            .all(|t| root_is(&t.expr, &alias_refs) || reads(&t.expr, &aliases))
        && [&select.limit, &select.offset]
            .into_iter()
            .flatten()
            .all(|e| reads(e, &[]));
    if !clauses {
        return None;
    }
    let mut covers: Vec<String> = ix
        .keys
        .iter()
        .map(|k| format!("cover ({})", k.expr))
        .collect();
    covers.push("cover ((meta().id))".to_owned());
    let mut placing: Vec<usize> = (0..paths.len()).filter(|&i| paths[i].is_some()).collect();
    placing.sort_by_key(|&i| paths[i].as_ref().map_or(0, Vec::len));
    Some(Cover {
        paths,
        placing,
        covers,
    })
}

impl Cover {
    /// The row of one entry: `values` are the entry's index key values (none for a primary
    /// index), `doc_key` its document key.
    pub fn row(&self, mut values: Vec<Value>, doc_key: &[u8]) -> Row {
        assert!(
            values.len() == self.paths.len(),
            "an entry of this index has {} key values, not {}",
            self.paths.len(),
            values.len()
        );
        let mut doc = Map::new();
        for &i in &self.placing {
            // Each position is placed once: its value is moved out, not copied.
            let value = std::mem::replace(&mut values[i], Value::Missing);
            if let (Some(path), Value::Json(j)) = (&self.paths[i], value) {
                place(&mut doc, path, j);
            }
        }
        Row {
            key: String::from_utf8_lossy(doc_key).into_owned(),
            meta: DocMeta {
                cas: 0,
                expiration: 0,
                flags: 0,
                is_json: true,
            },
            doc: J::Object(doc),
        }
    }

    /// What EXPLAIN lists as covered: `cover (key)` per index key, then `META().id`.
    pub fn covers(&self) -> &[String] {
        &self.covers
    }
}

/// Puts `v` at `path` in `doc`, unless an ancestor's value is there already (it holds it).
fn place(doc: &mut Map<String, J>, path: &[String], v: J) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut at = doc;
    for name in parents {
        let next = at
            .entry(name.clone())
            .or_insert_with(|| J::Object(Map::new()));
        match next {
            J::Object(m) => at = m,
            // An ancestor's value, which is not an object: this path is MISSING in it.
            _ => return,
        }
    }
    at.entry(last.clone()).or_insert(v);
}

/// The document path a canonical expression is, if it is one: a free name, then field
/// steps (a field named by a string constant is a step too).
fn doc_path(e: &Expr, bound: &[Ident]) -> Option<Vec<String>> {
    match e {
        Expr::Ident(name) if !bound.contains(name) => Some(vec![name.as_str().to_owned()]),
        Expr::Field { base, name } => {
            let mut p = doc_path(base, bound)?;
            p.push(name.as_str().to_owned());
            Some(p)
        }
        Expr::DynamicField { base, name } => match &**name {
            Expr::Literal(Literal::String(s)) => {
                let mut p = doc_path(base, bound)?;
                p.push(s.clone());
                Some(p)
            }
            _ => None,
        },
        _ => None,
    }
}

/// Whether everything canonical `e` reads of the document is under one of `keys`.
fn covered(e: &Expr, bound: &[Ident], keys: &[&[String]]) -> bool {
    if let Some(path) = doc_path(e, bound) {
        return keys.iter().any(|k| path.starts_with(k));
    }
    match e {
        Expr::Field { base, name } if matches!(**base, Expr::Meta { keyspace: None }) => {
            name.as_str() == "id"
        }
        // Any other metadata, or META() as a whole.
        Expr::Meta { .. } => false,
        _ => e
            .try_for_each_child(bound, |child, scope| {
                if covered(child, scope, keys) {
                    ControlFlow::Continue(())
                } else {
                    ControlFlow::Break(())
                }
            })
            .is_continue(),
    }
}
