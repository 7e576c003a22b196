//! The planner's safety property: for random documents, indexes and WHERE clauses, every
//! document the WHERE accepts is reachable through the chosen access path. For an index
//! scan, the document has an entry (its leading key is not MISSING, or the key includes
//! MISSING; a partial index's condition holds) and that entry lies inside a span; for a
//! primary scan, its key's bytes do. Entries are computed the way `sluice-index` writes
//! them. Replay a failure with `PLANNER_PROP_SEED=<seed>`; `PLANNER_PROP_CASES` runs more.

use serde_json::Value as J;

use super::prop_gen::{doc_key, document, indexes, Rng};
use super::prop_where::WhereGen;
use super::test_util::{assert_well_formed, covered, index_entry, run_property, select};
use super::{plan_access, Access, IndexInfo, Span};
use crate::ast::Ident;
use crate::error::QueryError;
use crate::eval::{evaluate_row, Params, Row};
use crate::value::Value;

const SEED: u64 = 0x5eed_91a7_2026;
const CASES: u64 = 10_000;
const DOCS_PER_CASE: usize = 48;

/// How often each outcome was exercised, so a generator gone dull fails loudly.
#[derive(Default, Debug)]
struct Coverage {
    index_scans: usize,
    narrowed_index_scans: usize,
    empty_scans: usize,
    primary_scans: usize,
    narrowed_primary_scans: usize,
    /// Scans narrowing a second key after an equality on the first.
    composite_scans: usize,
    no_index: usize,
    accepted_in_index_scans: usize,
    accepted_in_primary_scans: usize,
}

#[test]
fn every_accepted_document_is_inside_the_chosen_spans() {
    run_property::<Coverage>("PLANNER_PROP", SEED, CASES, run_case, |cov, cases| {
        assert!(cov.narrowed_index_scans * 5 > cases, "{cov:?}");
        assert!(cov.empty_scans * 50 > cases, "{cov:?}");
        assert!(cov.narrowed_primary_scans * 40 > cases, "{cov:?}");
        assert!(cov.no_index * 50 > cases, "{cov:?}");
        assert!(cov.composite_scans * 60 > cases, "{cov:?}");
        assert!(cov.accepted_in_index_scans > cases, "{cov:?}");
        assert!(cov.accepted_in_primary_scans > cases, "{cov:?}");
    });
}

fn run_case(seed: u64, cov: &mut Coverage) {
    let mut rng = Rng::new(seed);
    let ixs = indexes(&mut rng);
    let alias = if rng.chance(2) { "d" } else { "default" };
    let mut gen = WhereGen::new(&mut rng, alias);
    let cond = gen.condition(3);
    let params = std::mem::take(&mut gen.params);
    let used = std::mem::take(&mut gen.used);
    let from = if alias == "d" { "default d" } else { "default" };
    let text = format!("SELECT * FROM {from} WHERE {cond}");
    let stmt = select(&text);
    let fail = |what: &str| -> ! {
        panic!("seed {seed}: {what}\n  {text}\n  params {params:?}\n  indexes {ixs:#?}")
    };
    let access = match plan_access(&stmt, &ixs, &params) {
        Ok(a) => a,
        Err(QueryError::NoIndexAvailable { .. }) => {
            if ixs.iter().any(|i| i.primary && i.online) {
                fail("no index, yet an online primary index exists");
            }
            cov.no_index += 1;
            return;
        }
        Err(e) => fail(&format!("planning failed: {e}")),
    };
    let (index, spans) = match &access {
        Access::IndexScan { index, spans, .. } | Access::PrimaryScan { index, spans, .. } => {
            (index, spans)
        }
        other => fail(&format!("unexpected access {other:?}")),
    };
    assert_well_formed(spans);
    let Some(ix) = ixs.iter().find(|i| &i.name == index) else {
        fail(&format!("chose unknown index {index}"));
    };
    if !ix.online {
        fail("chose an offline index");
    }
    let full = spans.len() == 1 && spans[0].start.is_empty() && spans[0].end == [0xFF];
    match (&access, full) {
        (Access::IndexScan { .. }, _) => cov.index_scans += 1,
        (_, true) => cov.primary_scans += 1,
        _ => cov.narrowed_primary_scans += 1,
    }
    if matches!(access, Access::IndexScan { .. }) && !full {
        cov.narrowed_index_scans += 1;
    }
    if spans.is_empty() {
        cov.empty_scans += 1;
    }
    if let Access::IndexScan { ranges, .. } = &access {
        if ranges.iter().any(|r| r.keys.len() >= 2) {
            cov.composite_scans += 1;
        }
    }

    let filter = stmt.filter.as_ref().expect("the statement has a WHERE");
    let row_alias = Ident::new(alias);
    for _ in 0..DOCS_PER_CASE {
        let row = Row::new(doc_key(&mut rng, &used), document(&mut rng, &used));
        // A WHERE that fails to evaluate fails the query: no row to lose.
        let Ok(verdict) = evaluate_row(filter, &row_alias, &row, &params) else {
            continue;
        };
        if !verdict.truthy() {
            continue;
        }
        if let Err(why) = reachable(ix, spans, &row) {
            fail(&format!(
                "document {:?} {} is accepted but {why}",
                row.key, row.doc
            ));
        }
        if ix.primary {
            cov.accepted_in_primary_scans += 1;
        } else {
            cov.accepted_in_index_scans += 1;
        }
    }
}

/// Whether the scan finds `row`, computing its entry as the index service writes it.
fn reachable(ix: &IndexInfo, spans: &[Span], row: &Row) -> Result<(), String> {
    let entry = index_entry(ix, row)?;
    if covered(spans, &entry) {
        return Ok(());
    }
    if ix.primary {
        return Err(format!("its key is outside {spans:?}"));
    }
    let alias = Ident::new("default");
    let none = Params::new();
    let shown: Vec<J> = ix
        .keys
        .iter()
        .map(|k| {
            evaluate_row(&k.expr, &alias, row, &none)
                .unwrap_or(Value::Missing)
                .into_json_or_null()
        })
        .collect();
    Err(format!("its entry {shown:?} is outside {spans:?}"))
}
