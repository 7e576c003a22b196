//! Helpers shared by the planner's tests.

use serde_json::Value as J;

use super::{plan_access, Access, IndexInfo, Span};
use crate::ast::{Expr, IndexKey, Select, Statement};
use crate::error::Result;
use crate::eval::Params;
use crate::index_key::encode_key;
use crate::value::Value;
use crate::{parse, parse_expression};

pub(crate) fn select(text: &str) -> Select {
    match parse(text) {
        Ok(Statement::Select(s)) => s,
        other => panic!("{text:?} is not a SELECT: {other:?}"),
    }
}

pub(crate) fn expr(text: &str) -> Expr {
    parse_expression(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

/// An online secondary index; a key ending in `!` is INCLUDE MISSING.
pub(crate) fn index(name: &str, keys: &[&str]) -> IndexInfo {
    IndexInfo {
        keys: keys
            .iter()
            .map(|k| IndexKey {
                expr: expr(k.trim_end_matches('!')),
                descending: false,
                include_missing: k.ends_with('!'),
            })
            .collect(),
        ..IndexInfo::secondary(name, Vec::new())
    }
}

pub(crate) fn partial(name: &str, keys: &[&str], condition: &str) -> IndexInfo {
    IndexInfo {
        condition: Some(expr(condition)),
        ..index(name, keys)
    }
}

pub(crate) fn offline(ix: IndexInfo) -> IndexInfo {
    IndexInfo {
        online: false,
        ..ix
    }
}

pub(crate) fn try_plan(text: &str, indexes: &[IndexInfo], params: &Params) -> Result<Access> {
    plan_access(&select(text), indexes, params)
}

pub(crate) fn plan(text: &str, indexes: &[IndexInfo]) -> Access {
    try_plan(text, indexes, &Params::new()).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// The chosen index and its spans, for a scan of either kind.
pub(crate) fn scan(access: &Access) -> (&str, &[Span]) {
    match access {
        Access::IndexScan { index, spans, .. } | Access::PrimaryScan { index, spans, .. } => {
            (index, spans)
        }
        other => panic!("not a scan: {other:?}"),
    }
}

/// The entry a document with these index key values and key would have.
pub(crate) fn entry(values: &[J], doc_key: &str) -> Vec<u8> {
    let values: Vec<Value> = values.iter().cloned().map(Value::Json).collect();
    encode_key(&values, doc_key.as_bytes()).expect("small keys encode")
}

pub(crate) fn covered(spans: &[Span], entry: &[u8]) -> bool {
    spans.iter().any(|s| s.contains(entry))
}

/// Checks the spans are sorted, non-empty, and neither overlap nor touch.
pub(crate) fn assert_well_formed(spans: &[Span]) {
    for s in spans {
        assert!(s.start < s.end, "empty span {s:?}");
    }
    for w in spans.windows(2) {
        if let [a, b] = w {
            assert!(
                a.end < b.start,
                "spans out of order or overlapping: {a:?} {b:?}"
            );
        }
    }
}

/// The entry the index service writes for `row` in `ix` (the document key for a primary
/// index), or why it writes none: the partial index's condition leaves the document out,
/// or its leading key is MISSING (without INCLUDE MISSING).
pub(crate) fn index_entry(
    ix: &IndexInfo,
    row: &crate::eval::Row,
) -> std::result::Result<Vec<u8>, String> {
    if ix.primary {
        return Ok(row.key.as_bytes().to_vec());
    }
    // Index keys and conditions read the document under the keyspace's name.
    let alias = crate::ast::Ident::new("default");
    let none = Params::new();
    let eval = |e| crate::eval::evaluate_row(e, &alias, row, &none).unwrap_or(Value::Missing);
    if let Some(cond) = &ix.condition {
        if !eval(cond).truthy() {
            return Err(format!("the partial index {} leaves it out", ix.name));
        }
    }
    let values: Vec<Value> = ix.keys.iter().map(|k| eval(&k.expr)).collect();
    let leading_missing = values.first().is_none_or(Value::is_missing);
    if leading_missing && !ix.keys.first().is_some_and(|k| k.include_missing) {
        return Err(format!(
            "its leading key is MISSING, so {} has no entry",
            ix.name
        ));
    }
    encode_key(&values, row.key.as_bytes()).map_err(|e| e.to_string())
}

/// Runs a property test's cases: `<PREFIX>_SEED=<n>` replays one; otherwise
/// `<PREFIX>_CASES` cases (default `cases`) from `base` on, after which `check` asserts
/// on the coverage counters the cases kept (so a generator gone dull fails loudly; a
/// replay checks none). The counters are printed either way.
pub(crate) fn run_property<C: Default + std::fmt::Debug>(
    prefix: &str,
    base: u64,
    cases: u64,
    mut case: impl FnMut(u64, &mut C),
    check: impl FnOnce(&C, usize),
) {
    let env = |name: String| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let (seeds, replay): (Vec<u64>, bool) = match env(format!("{prefix}_SEED")) {
        Some(seed) => (vec![seed], true),
        None => {
            let n = env(format!("{prefix}_CASES")).unwrap_or(cases);
            ((0..n).map(|i| base.wrapping_add(i)).collect(), false)
        }
    };
    let n = seeds.len();
    let mut cov = C::default();
    for seed in seeds {
        case(seed, &mut cov);
    }
    println!("{cov:?}");
    if !replay {
        check(&cov, n);
    }
}
