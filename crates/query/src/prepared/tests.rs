#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use super::*;
use crate::parse;

fn prepare_stmt(text: &str) -> Prepare {
    match parse(text).unwrap() {
        Statement::Prepare(p) => p,
        other => panic!("{text}: {other:?}"),
    }
}

#[test]
fn an_anonymous_statement_is_named_after_its_text_and_context() {
    let mut c = PreparedCache::new();
    let a = c.prepare(&prepare_stmt("PREPARE SELECT 1"), "").unwrap();
    // Spelled differently, the same statement: the same entry.
    let b = c.prepare(&prepare_stmt("prepare   select 1;"), "").unwrap();
    assert_eq!(a.name, b.name);
    assert_eq!(c.len(), 1);
    assert_eq!(a.name.len(), 36);
    assert_eq!(a.name.matches('-').count(), 4);
    // Another context or another statement: another name.
    let other_ctx = c
        .prepare(&prepare_stmt("PREPARE SELECT 1"), "default:b.s")
        .unwrap();
    let other_text = c.prepare(&prepare_stmt("PREPARE SELECT 2"), "").unwrap();
    assert_ne!(a.name, other_ctx.name);
    assert_ne!(a.name, other_text.name);
    assert_eq!(c.len(), 3);
    assert_eq!(c.get(&a.name, "").unwrap().text, "SELECT 1");
    let listed: Vec<String> = c.entries().iter().map(|p| p.text.clone()).collect();
    // Least recently used first: `SELECT 1` was just read.
    assert_eq!(listed, ["SELECT 1", "SELECT 2", "SELECT 1"]);
    assert_eq!(c.entries()[2].query_context, "");
}

#[test]
fn a_name_holds_one_statement_and_lives_in_its_context() {
    let mut c = PreparedCache::new();
    let p = c
        .prepare(&prepare_stmt("PREPARE p1 FROM SELECT 1"), "")
        .unwrap();
    assert_eq!(p.name, "p1");
    let taken = c.prepare(&prepare_stmt("PREPARE FORCE p1 AS SELECT 2"), "");
    assert_eq!(taken.unwrap_err().code(), 4060);
    // The same statement again, FORCE or not, refreshes it.
    c.prepare(&prepare_stmt("PREPARE FORCE `p1` AS SELECT 1"), "")
        .unwrap();
    assert_eq!(c.len(), 1);
    let missing = c.get("p1", "default:b.s").unwrap_err();
    assert_eq!(missing.code(), 4040);
    assert_eq!(
        missing.to_string(),
        "No such prepared statement: p1, context: default:b.s"
    );
    assert_eq!(
        c.get("nope", "").unwrap_err().to_string(),
        "No such prepared statement: nope, context: unset"
    );
}

#[test]
fn the_least_recently_used_goes_first_past_either_bound() {
    let mut c = PreparedCache::with_bounds(3, 1 << 20);
    for n in 1..=3 {
        c.prepare(&prepare_stmt(&format!("PREPARE p{n} AS SELECT {n}")), "")
            .unwrap();
    }
    c.get("p1", "").unwrap(); // p2 is now the least recently used
    c.prepare(&prepare_stmt("PREPARE p4 AS SELECT 4"), "")
        .unwrap();
    assert_eq!(c.len(), 3);
    assert_eq!(c.get("p2", "").unwrap_err().code(), 4040);
    for kept in ["p1", "p3", "p4"] {
        c.get(kept, "").unwrap();
    }

    // By bytes: each text is `SELECT 'xxxx…'`, 100 bytes; 250 bytes hold two.
    let mut c = PreparedCache::with_bounds(100, 250);
    let pad = "x".repeat(91);
    for n in 0..5 {
        c.prepare(
            &prepare_stmt(&format!("PREPARE q{n} AS SELECT '{pad}'")),
            "",
        )
        .unwrap();
        assert!(c.text_bytes <= 250 && c.len() <= 2, "{}", c.text_bytes);
    }
    assert_eq!(c.len(), 2);
    c.get("q4", "").unwrap();
    c.get("q3", "").unwrap();
    // One statement larger than the whole bound is still kept (alone).
    let huge = "y".repeat(400);
    c.prepare(
        &prepare_stmt(&format!("PREPARE big AS SELECT '{huge}'")),
        "",
    )
    .unwrap();
    assert_eq!(c.len(), 1);
    c.get("big", "").unwrap();
}

#[test]
fn a_uuid_is_written_in_its_canonical_groups() {
    let b: [u8; 16] = [
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x46, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee,
        0xff,
    ];
    assert_eq!(uuid_text(&b), "00112233-4455-4677-8899-aabbccddeeff");
}

/// `text` (a PREPARE of a SELECT) prepared in `c`.
fn prepared_select(c: &mut PreparedCache, text: &str) -> Arc<Prepared> {
    let p = c.prepare(&prepare_stmt(text), "").unwrap();
    assert!(matches!(p.statement, Statement::Select(_)), "{text}");
    p
}

#[test]
fn a_prepared_select_keeps_its_planner_while_its_indexes_stay_the_same() {
    use crate::planner::{Access, IndexInfo};
    use crate::Params;

    let mut c = PreparedCache::new();
    let p = prepared_select(&mut c, "PREPARE SELECT META().id FROM b WHERE n = $n");
    let Statement::Select(s) = &p.statement else {
        unreachable!()
    };
    let params = Params::new().with_named("n", serde_json::json!(7));
    let n = crate::parse_expression("n").unwrap();
    let by_n: Arc<[IndexInfo]> = vec![IndexInfo::secondary("by_n", vec![n])].into();
    let made = std::cell::Cell::new(0);
    let planner = |stamp: u64, indexes: &Arc<[IndexInfo]>| {
        p.access_planner(s, PlanStamp([stamp, 0, 0]), || {
            made.set(made.get() + 1);
            indexes.clone()
        })
    };
    let first = planner(1, &by_n);
    // The same stamp: the same planner, made once.
    assert!(Arc::ptr_eq(&first, &planner(1, &by_n)));
    assert_eq!(made.get(), 1);
    match first.choose(s, &params).unwrap() {
        Access::IndexScan { index, .. } => assert_eq!(index, "by_n"),
        other => panic!("{other:?}"),
    }
    // Another stamp (the index dropped): made again, over what is there now.
    let none: Arc<[IndexInfo]> = Vec::new().into();
    let second = planner(2, &none);
    assert_eq!(made.get(), 2);
    assert!(!Arc::ptr_eq(&first, &second));
    assert_eq!(second.choose(s, &params).unwrap_err().code(), 4000);
    let primary: Arc<[IndexInfo]> = vec![IndexInfo::primary("#primary")].into();
    match planner(3, &primary).choose(s, &params).unwrap() {
        Access::PrimaryScan { index, .. } => assert_eq!(index, "#primary"),
        other => panic!("{other:?}"),
    }

    // The compiled clauses are kept; a statement that does not compile fails each run.
    let a = p.compiled(s).unwrap();
    let b = p.compiled(s).unwrap();
    assert!(std::ptr::eq(a.shape_ptr(), b.shape_ptr()));
    let bad = prepared_select(&mut c, "PREPARE SELECT 1 FROM b WHERE COUNT(*) > 1");
    let Statement::Select(bad_s) = &bad.statement else {
        unreachable!()
    };
    for _ in 0..2 {
        assert!(bad.compiled(bad_s).is_err());
    }
}
