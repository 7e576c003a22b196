//! EXPLAIN: the plan as Couchbase shapes it (`{"plan": {"#operator": "Sequence",
//! "~children": [...]}, "text": ...}`), listing only what Sluice really runs: the scan,
//! a Fetch of every document unless the index covers the statement (then the scan lists
//! its `covers`, as Couchbase's does), then the pipeline's stages in its order (WHERE,
//! grouping, HAVING, projection, DISTINCT, ORDER BY, OFFSET, LIMIT).
//!
//! Grouping is one pass here, so it appears as one `FinalGroup` where Couchbase shows
//! Initial/Intermediate/Final phases. Span bounds are SQL++ constants as text, as
//! Couchbase prints them (`"low": "\"open\""`); `inclusion` is 1 for an included low, 2
//! for an included high, 3 for both.

use std::ops::Bound;

use serde_json::{json, Map, Value as J};

use super::access::{Access, KeyRange, ScanRange};
use super::cover::Cover;
use crate::ast::{Expr, KeyspaceRef, Projection, ResultTerm, Select};
use crate::value::Value;

/// The EXPLAIN document for `select` planned as `access`; `ordered`: the access path yields
/// the rows in the ORDER BY's order (`access_is_ordered`), so no Order stage runs (as
/// Couchbase shows a plan that uses its index's order); `cover`: the index covers the
/// statement (`covering`), so no document is fetched.
pub fn explain(select: &Select, access: &Access, ordered: bool, cover: Option<&Cover>) -> J {
    let ks = select
        .from
        .as_ref()
        .map_or_else(Map::new, |f| keyspace_fields(&f.keyspace));
    let with_ks = |mut op: Map<String, J>| {
        op.extend(ks.clone());
        J::Object(op)
    };
    let mut scan = scan(select, access, &with_ks);
    if let (Some(c), J::Object(op)) = (cover, &mut scan) {
        op.insert("covers".into(), c.covers().into());
    }
    let mut seq = vec![scan];
    if !matches!(access, Access::None) && cover.is_none() {
        seq.push(with_ks(operator("Fetch")));
    }
    let grouped = is_grouped(select);
    let mut parallel = Vec::new();
    if let Some(w) = &select.filter {
        parallel.push(json!({"#operator": "Filter", "condition": w.to_string()}));
    }
    let mut after = Vec::new();
    if grouped {
        after.push(json!({
            "#operator": "FinalGroup",
            "group_keys": select.group_by.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "aggregates": aggregates(select),
        }));
        if let Some(h) = &select.having {
            after.push(json!({"#operator": "Filter", "condition": h.to_string()}));
        }
    }
    let project = if grouped { &mut after } else { &mut parallel };
    project.push(initial_project(select));
    if select.distinct {
        project.push(json!({"#operator": "Distinct"}));
    }
    seq.push(json!({
        "#operator": "Parallel",
        "~child": {"#operator": "Sequence", "~children": parallel},
    }));
    seq.extend(after);
    if !select.order_by.is_empty() && !ordered {
        let terms: Vec<J> = select
            .order_by
            .iter()
            .map(|t| {
                let mut term = json!({"expr": t.expr.to_string()});
                if t.descending {
                    term["desc"] = J::Bool(true);
                }
                term
            })
            .collect();
        seq.push(json!({"#operator": "Order", "sort_terms": terms}));
    }
    for (name, e) in [("Offset", &select.offset), ("Limit", &select.limit)] {
        if let Some(e) = e {
            seq.push(json!({"#operator": name, "expr": e.to_string()}));
        }
    }
    seq.push(json!({"#operator": "FinalProject"}));
    json!({
        "plan": {"#operator": "Sequence", "~children": seq},
        "text": select.to_string(),
    })
}

fn operator(name: &str) -> Map<String, J> {
    let mut m = Map::new();
    m.insert("#operator".into(), name.into());
    m
}

fn scan(select: &Select, access: &Access, with_ks: &dyn Fn(Map<String, J>) -> J) -> J {
    match access {
        Access::None => json!({"#operator": "DummyScan"}),
        Access::KeyLookup { keys } => {
            let mut op = operator("KeyScan");
            let text = select
                .from
                .as_ref()
                .and_then(|f| f.use_keys.as_ref())
                .map_or_else(|| json!(keys).to_string(), ToString::to_string);
            op.insert("keys".into(), text.into());
            J::Object(op)
        }
        // A primary scan narrowed by META().id predicates is an index scan of the
        // primary index, as Couchbase shows it.
        Access::PrimaryScan { index, ranges, .. } if ranges.is_empty() => {
            let mut op = operator("PrimaryScan3");
            op.insert("index".into(), index.as_str().into());
            op.insert("using".into(), "gsi".into());
            with_ks(op)
        }
        Access::IndexScan { index, ranges, .. } | Access::PrimaryScan { index, ranges, .. } => {
            let mut op = operator("IndexScan3");
            op.insert("index".into(), index.as_str().into());
            op.insert("spans".into(), ranges.iter().map(span).collect());
            op.insert("using".into(), "gsi".into());
            with_ks(op)
        }
    }
}

/// `namespace`, `bucket`, `scope` and `keyspace` as far as the FROM spells them (a
/// relative `s.c` leaves the bucket to the query context).
fn keyspace_fields(k: &KeyspaceRef) -> Map<String, J> {
    let mut m = Map::new();
    let ns = k.namespace().map_or("default", |n| n.as_str());
    m.insert("namespace".into(), ns.into());
    match k {
        KeyspaceRef::Bucket { bucket, .. } => {
            m.insert("keyspace".into(), bucket.as_str().into());
        }
        KeyspaceRef::Collection {
            bucket,
            scope,
            collection,
            ..
        } => {
            m.insert("bucket".into(), bucket.as_str().into());
            m.insert("scope".into(), scope.as_str().into());
            m.insert("keyspace".into(), collection.as_str().into());
        }
        KeyspaceRef::Relative { scope, collection } => {
            m.insert("scope".into(), scope.as_str().into());
            m.insert("keyspace".into(), collection.as_str().into());
        }
    }
    m
}

fn span(r: &ScanRange) -> J {
    json!({"range": r.keys.iter().map(key_range).collect::<Vec<_>>()})
}

fn key_range(k: &KeyRange) -> J {
    let mut m = Map::new();
    m.insert("index_key".into(), k.index_key.as_str().into());
    let mut inclusion = 0;
    for (name, bound, bit) in [("low", &k.low, 1), ("high", &k.high, 2)] {
        match bound {
            Bound::Included(v) => {
                m.insert(name.into(), constant(v).into());
                inclusion |= bit;
            }
            Bound::Excluded(v) => {
                m.insert(name.into(), constant(v).into());
            }
            Bound::Unbounded => {}
        }
    }
    m.insert("inclusion".into(), inclusion.into());
    J::Object(m)
}

/// A value as SQL++ constant text: JSON is one, MISSING is the keyword.
fn constant(v: &Value) -> String {
    v.as_json()
        .map_or_else(|| "missing".to_owned(), ToString::to_string)
}

fn initial_project(select: &Select) -> J {
    let (terms, raw) = match &select.projection {
        Projection::Raw { expr, .. } => (vec![json!({"expr": expr.to_string()})], true),
        Projection::Terms(terms) => (terms.iter().map(result_term).collect(), false),
    };
    let mut op = json!({"#operator": "InitialProject", "result_terms": terms});
    if raw {
        op["raw"] = J::Bool(true);
    }
    if select.distinct {
        op["distinct"] = J::Bool(true);
    }
    op
}

fn result_term(t: &ResultTerm) -> J {
    match t {
        ResultTerm::Star => json!({"expr": "self", "star": true}),
        ResultTerm::ExprStar(e) => json!({"expr": e.to_string(), "star": true}),
        ResultTerm::Expr { expr, alias } => {
            let mut term = json!({"expr": expr.to_string()});
            if let Some(a) = alias {
                term["as"] = a.as_str().into();
            }
            term
        }
    }
}

fn projected(select: &Select) -> Vec<&Expr> {
    match &select.projection {
        Projection::Raw { expr, .. } => vec![expr],
        Projection::Terms(terms) => terms
            .iter()
            .filter_map(|t| match t {
                ResultTerm::Star => None,
                ResultTerm::ExprStar(e) | ResultTerm::Expr { expr: e, .. } => Some(e),
            })
            .collect(),
    }
}

/// As the pipeline decides: a GROUP BY, or an aggregate in the projection, HAVING or
/// ORDER BY.
fn is_grouped(select: &Select) -> bool {
    !select.group_by.is_empty()
        || projected(select)
            .into_iter()
            .chain(select.having.iter())
            .chain(select.order_by.iter().map(|t| &t.expr))
            .any(Expr::contains_aggregate)
}

/// The distinct aggregates, rendered, in the order they first appear.
fn aggregates(select: &Select) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut stack: Vec<&Expr> = projected(select);
    stack.extend(select.having.iter());
    stack.extend(select.order_by.iter().map(|t| &t.expr));
    stack.reverse();
    while let Some(e) = stack.pop() {
        if matches!(e, Expr::Aggregate { .. }) {
            let text = e.to_string();
            if !out.contains(&text) {
                out.push(text);
            }
            continue;
        }
        let mut children = e.children();
        children.reverse();
        stack.extend(children);
    }
    out
}
