//! The ordered-scan property: when `access_is_ordered` says an access path yields rows in
//! the ORDER BY's order, streaming them (no sort, stopping at OFFSET + LIMIT) gives exactly
//! what sorting them gives. Rows are fed in the order the index service's scan yields
//! them: entries computed as `sluice-index` writes them, in byte order, inside the plan's
//! spans. It also checks the decision itself both ways: an ORDER BY built from the chosen
//! index's leading keys is served; one changed so that the index order cannot serve it
//! (DESC, NULLS LAST, a key skipped, a term past the index's keys, a projection alias) is
//! not. Replay a failure with `PLANNER_ORDER_SEED=<seed>`.

use std::collections::BTreeSet;

use super::prop_gen::{doc_key, document, indexes, Rng};
use super::prop_where::WhereGen;
use super::test_util::{covered, index_entry, run_property, select};
use super::{access_is_ordered, plan_access, Access};
use crate::eval::Row;
use crate::pipeline::{run_select, Flow, Limits, Pipeline};

const SEED: u64 = 0x0bde_7b42_2026;
const CASES: u64 = 4_000;
const DOCS_PER_CASE: usize = 32;

#[derive(Default, Debug)]
struct Coverage {
    ordered: usize,
    /// Ordered cases where LIMIT stopped the stream before the scan's end.
    stopped_early: usize,
    refused: usize,
}

#[test]
fn streaming_in_index_order_gives_what_sorting_gives() {
    run_property::<Coverage>("PLANNER_ORDER", SEED, CASES, run_case, |cov, cases| {
        assert!(cov.ordered * 8 > cases, "{cov:?}");
        assert!(cov.stopped_early * 20 > cases, "{cov:?}");
        assert!(cov.refused * 8 > cases, "{cov:?}");
    });
}

/// How the ORDER BY differs from the index's leading keys (`None`: it does not).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Spoil {
    Desc,
    NullsLast,
    SkipFirstKey,
    PastTheKeys,
    ProjectionAlias,
}

fn run_case(seed: u64, cov: &mut Coverage) {
    let mut rng = Rng::new(seed);
    let ixs = indexes(&mut rng);
    let alias = if rng.chance(2) { "d" } else { "default" };
    let mut gen = WhereGen::new(&mut rng, alias);
    let cond = gen.condition(2);
    let params = std::mem::take(&mut gen.params);
    let used = std::mem::take(&mut gen.used);
    let from = if alias == "d" { "default d" } else { "default" };
    let Ok(access) = plan_access(
        &select(&format!("SELECT * FROM {from} WHERE {cond}")),
        &ixs,
        &params,
    ) else {
        return;
    };
    let (index, spans) = match &access {
        Access::IndexScan { index, spans, .. } | Access::PrimaryScan { index, spans, .. } => {
            (index.clone(), spans.clone())
        }
        _ => return,
    };
    let ix = ixs
        .iter()
        .find(|i| i.name == index)
        .expect("the chosen index");
    let keys: Vec<String> = if ix.primary {
        vec![format!("META({alias}).id")]
    } else {
        ix.keys.iter().map(|k| k.expr.to_string()).collect()
    };
    let spoil = match rng.below(10) {
        0 => Some(Spoil::Desc),
        1 => Some(Spoil::NullsLast),
        2 if keys.len() >= 2 => Some(Spoil::SkipFirstKey),
        3 => Some(Spoil::PastTheKeys),
        4 => Some(Spoil::ProjectionAlias),
        _ => None,
    };
    let mut terms: Vec<String> = keys[..1 + rng.below(keys.len())].to_vec();
    let mut projection = "*".to_string();
    match spoil {
        Some(Spoil::Desc) => {
            let i = rng.below(terms.len());
            terms[i] += " DESC";
        }
        Some(Spoil::NullsLast) => {
            let i = rng.below(terms.len());
            terms[i] += " NULLS LAST";
        }
        Some(Spoil::SkipFirstKey) => terms = keys[1..].to_vec(),
        Some(Spoil::PastTheKeys) => {
            terms = keys.clone();
            terms.push("c".into());
        }
        Some(Spoil::ProjectionAlias) => {
            // `a` here names the projection's result, not the document's field.
            projection = format!("{} AS a, *", terms[0]);
            terms[0] = "a".into();
            if keys[0] == "`a`" {
                projection = "b AS a, *".into();
            }
        }
        None => {}
    }
    let limit = 1 + rng.below(8);
    let offset = if rng.chance(3) { rng.below(4) } else { 0 };
    let text = format!(
        "SELECT {projection} FROM {from} WHERE {cond} ORDER BY {} LIMIT {limit} OFFSET {offset}",
        terms.join(", ")
    );
    let stmt = select(&text);
    let fail = |what: &str| -> ! {
        panic!("seed {seed}: {what}\n  {text}\n  params {params:?}\n  index {ix:#?}")
    };
    let ordered = access_is_ordered(&stmt, &access, &ixs);
    match (spoil, ordered) {
        (None, false) => fail("the index's own leading keys were not taken as its order"),
        (Some(s), true) => fail(&format!("served an ORDER BY the index cannot ({s:?})")),
        (None, true) => cov.ordered += 1,
        (Some(_), false) => {
            cov.refused += 1;
            return;
        }
    }

    // The scan: every reachable entry inside the spans, in byte order.
    let mut seen = BTreeSet::new();
    let mut entries: Vec<(Vec<u8>, Row)> = Vec::new();
    for _ in 0..DOCS_PER_CASE {
        let row = Row::new(doc_key(&mut rng, &used), document(&mut rng, &used));
        if !seen.insert(row.key.clone()) {
            continue;
        }
        if let Ok(entry) = index_entry(ix, &row) {
            if covered(&spans, &entry) {
                entries.push((entry, row));
            }
        }
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let rows: Vec<Row> = entries.into_iter().map(|(_, r)| r).collect();

    let Ok(sorted) = run_select(&stmt, rows.clone(), &params, Limits::default()) else {
        return; // an error evaluating some row: nothing to compare
    };
    let mut pipeline = Pipeline::new(&stmt, &params, Limits::default()).expect("planned");
    pipeline.rows_in_order();
    let mut streamed = Vec::new();
    let mut pushed = 0;
    for row in &rows {
        pushed += 1;
        match pipeline.push(row, &mut streamed) {
            Ok(Flow::Done) => break,
            Ok(Flow::More) => {}
            Err(e) => fail(&format!("streaming failed where sorting did not: {e}")),
        }
    }
    if pushed < rows.len() {
        cov.stopped_early += 1;
    }
    if let Err(e) = pipeline.finish(&mut streamed) {
        fail(&format!("finishing failed: {e}"));
    }
    if streamed != sorted {
        fail(&format!(
            "streamed {streamed:?}\n  sorted {sorted:?}\n  rows in scan order {:?}",
            rows.iter().map(|r| (&r.key, &r.doc)).collect::<Vec<_>>()
        ));
    }
}
