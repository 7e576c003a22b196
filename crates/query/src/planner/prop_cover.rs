//! Covering scans answer what fetching answers: for random documents, indexes, WHERE
//! clauses, projections and tails, whenever `covering` says the chosen index covers the
//! statement, the pipeline fed the rows built from the index entries gives the same
//! results as the pipeline fed the documents themselves, in the same scan order (values
//! compared by collation: an index gives a number back in its canonical form). Entries are
//! computed as `sluice-index` writes them and decoded as the store does. Replay a failure
//! with `PLANNER_COVER_SEED=<seed>`; `PLANNER_COVER_CASES` runs more.

use std::cmp::Ordering;

use super::cover::covering;
use super::prop_gen::{doc_key, document, indexes, Rng};
use super::prop_where::WhereGen;
use super::test_util::{covered, index_entry, run_property, select};
use super::{plan_access, Access};
use crate::collate::collate;
use crate::eval::Row;
use crate::index_key::decode_key;
use crate::pipeline::{run_select, Limits};
use crate::value::Value;

const SEED: u64 = 0xc0fe_2026_1128;
const CASES: u64 = 4_000;
const DOCS_PER_CASE: usize = 40;

#[derive(Default, Debug)]
struct Coverage {
    covered_index_scans: usize,
    covered_primary_scans: usize,
    not_covered: usize,
    results_compared: usize,
}

#[test]
fn covered_rows_give_what_the_documents_give() {
    run_property::<Coverage>("PLANNER_COVER", SEED, CASES, run_case, |cov, cases| {
        assert!(cov.covered_index_scans * 8 > cases, "{cov:?}");
        assert!(cov.covered_primary_scans * 100 > cases, "{cov:?}");
        assert!(cov.not_covered * 8 > cases, "{cov:?}");
        assert!(cov.results_compared > cases, "{cov:?}");
    });
}

/// A projection: mostly paths the catalog's keys hold, sometimes what no index covers.
fn projection(rng: &mut Rng, alias: &str) -> String {
    let pool = [
        "META().id".to_owned(),
        format!("META({alias}).id"),
        "a".to_owned(),
        format!("{alias}.a"),
        "b".to_owned(),
        "c".to_owned(),
        "a.x".to_owned(),
        "a.x.y".to_owned(),
        "[a, b] AS ab".to_owned(),
        "b || 'z' AS bz".to_owned(),
        "LOWER(a) AS la".to_owned(),
        "*".to_owned(),
        format!("{alias}.*"),
        "META().cas".to_owned(),
    ];
    if rng.chance(6) {
        return format!("RAW {}", rng.pick(&["META().id", "a", "b", "a.x"]));
    }
    let n = 1 + rng.below(3);
    let terms: Vec<String> = (0..n).map(|_| rng.pick(&pool)).collect();
    // Results are objects: one name per term.
    let mut seen = std::collections::BTreeSet::new();
    let terms: Vec<String> = terms.into_iter().filter(|t| seen.insert(name(t))).collect();
    terms.join(", ")
}

/// The name a projection term gives its result (for de-duplication only).
fn name(term: &str) -> String {
    term.rsplit([' ', '.']).next().unwrap_or(term).to_owned()
}

fn tail(rng: &mut Rng) -> String {
    let order = [
        "",
        " ORDER BY a",
        " ORDER BY b DESC, META().id",
        " ORDER BY META().id",
        " ORDER BY c",
    ];
    let limit = ["", " LIMIT 5", " LIMIT 3 OFFSET 2"];
    format!("{}{}", rng.pick(&order), rng.pick(&limit))
}

fn run_case(seed: u64, cov: &mut Coverage) {
    let mut rng = Rng::new(seed);
    let ixs = indexes(&mut rng);
    let alias = if rng.chance(2) { "d" } else { "default" };
    // Now and then a statement on the document key alone, which a primary index covers.
    let key_only = rng.chance(6);
    let proj = match key_only {
        true => rng.pick(&["META().id", "RAW META().id"]).to_owned(),
        false => projection(&mut rng, alias),
    };
    let tail = tail(&mut rng);
    let mut gen = WhereGen::new(&mut rng, alias);
    let cond = if key_only {
        let on_key = [
            "LIKE 'a%'",
            ">= 'b'",
            "< 'k2'",
            "IS VALUED",
            "BETWEEN 'a' AND 'user'",
        ];
        format!("META({alias}).id {}", gen.rng.pick(&on_key))
    } else {
        gen.condition(2)
    };
    let params = std::mem::take(&mut gen.params);
    let used = std::mem::take(&mut gen.used);
    let from = if alias == "d" { "default d" } else { "default" };
    let grouped = rng.chance(8);
    let text = if grouped {
        format!("SELECT a, COUNT(*) AS n FROM {from} WHERE {cond} GROUP BY a ORDER BY a")
    } else {
        format!("SELECT {proj} FROM {from} WHERE {cond}{tail}")
    };
    let stmt = select(&text);
    let Ok(access) = plan_access(&stmt, &ixs, &params) else {
        return;
    };
    let Some(cover) = covering(&stmt, &access, &ixs) else {
        cov.not_covered += 1;
        return;
    };
    let (index, spans) = match &access {
        Access::IndexScan { index, spans, .. } | Access::PrimaryScan { index, spans, .. } => {
            (index, spans)
        }
        other => panic!("seed {seed}: covered, yet no scan: {other:?}"),
    };
    let ix = ixs.iter().find(|i| &i.name == index).expect("chosen");
    match ix.primary {
        true => cov.covered_primary_scans += 1,
        false => cov.covered_index_scans += 1,
    }
    // The scan: every document's entry inside the spans, in entry order.
    let mut scanned: Vec<(Vec<u8>, Row)> = (0..DOCS_PER_CASE)
        .map(|i| {
            let key = format!("{}#{i}", doc_key(&mut rng, &used));
            Row::new(key, document(&mut rng, &used))
        })
        .filter_map(|row| {
            let entry = index_entry(ix, &row).ok()?;
            covered(spans, &entry).then_some((entry, row))
        })
        .collect();
    scanned.sort_by(|a, b| a.0.cmp(&b.0));
    let covered_rows: Vec<Row> = scanned
        .iter()
        .map(|(entry, _)| match ix.primary {
            true => cover.row(Vec::new(), entry),
            false => {
                let (values, key) = decode_key(entry).expect("entries decode");
                cover.row(values, &key)
            }
        })
        .collect();
    let fetched: Vec<Row> = scanned.into_iter().map(|(_, row)| row).collect();
    let want = run_select(&stmt, fetched, &params, Limits::default());
    let got = run_select(&stmt, covered_rows, &params, Limits::default());
    let fail = |what: String| -> ! {
        panic!("seed {seed}: {what}\n  {text}\n  params {params:?}\n  index {ix:#?}")
    };
    match (want, got) {
        (Ok(want), Ok(got)) => {
            let same = want.len() == got.len()
                && want.iter().zip(&got).all(|(w, g)| {
                    collate(&Value::Json(w.clone()), &Value::Json(g.clone())) == Ordering::Equal
                });
            if !same {
                fail(format!("fetched {want:?}\n  covered {got:?}"));
            }
            cov.results_compared += want.len();
        }
        (Err(_), Err(_)) => {}
        (want, got) => fail(format!("fetched {want:?}\n  covered {got:?}")),
    }
}
