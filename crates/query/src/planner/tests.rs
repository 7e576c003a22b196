//! Sargability and spans: which predicates narrow an index scan, and to which bytes.

use serde_json::json;

use super::test_util::*;
use super::{Access, Span, MAX_SPANS};
use crate::eval::{evaluate_row, Params, Row};
use crate::index_key::{lower_bound, prefix_range, type_range, upper_bound};
use crate::value::{Type, Value};

fn v(j: serde_json::Value) -> Value {
    Value::Json(j)
}

fn span((start, end): (Vec<u8>, Vec<u8>)) -> Span {
    Span { start, end }
}

fn point(j: serde_json::Value) -> Span {
    span(prefix_range(&[v(j)]).expect("encodes"))
}

const END: u8 = 0xFF;

fn spans_for(where_: &str, keys: &[&str]) -> Vec<Span> {
    let text = format!("SELECT * FROM default d WHERE {where_}");
    let access = plan(&text, &[index("ix", keys)]);
    let (name, spans) = scan(&access);
    assert_eq!(name, "ix", "{where_}");
    assert_well_formed(spans);
    spans.to_vec()
}

#[test]
fn equality_is_one_point_whichever_side_and_spelling() {
    for w in [
        "status = 'open'",
        "'open' = status",
        "d.status = 'open'",
        "d.['status'] = 'open'",
        "status IN ['open']",
        "status BETWEEN 'open' AND 'open'",
        "status LIKE 'open'",
    ] {
        assert_eq!(spans_for(w, &["status"]), vec![point(json!("open"))], "{w}");
    }
    let no_alias = plan(
        "SELECT * FROM default WHERE default.status = 'open'",
        &[index("ix", &["status"])],
    );
    assert_eq!(scan(&no_alias).1, [point(json!("open"))]);
}

#[test]
fn nested_paths_elements_and_functions_match_index_keys() {
    let cases = [
        ("d.address.city = 'Oslo'", "address.city"),
        ("address.city = 'Oslo'", "default.address.city"),
        ("d.tags[0] = 'Oslo'", "tags[0]"),
        ("LOWER(d.name) = 'Oslo'", "LOWER(name)"),
        ("META(d).id = 'Oslo'", "META().id"),
        ("META().id = 'Oslo'", "META(default).id"),
    ];
    for (w, key) in cases {
        assert_eq!(
            spans_for(w, &[key]),
            vec![point(json!("Oslo"))],
            "{w} on {key}"
        );
    }
}

#[test]
fn comparisons_collate_across_types_so_ranges_run_past_the_type() {
    // The evaluator answers TRUE for a string above a number: spans must hold strings.
    let row = Row::new("k", json!({"a": "x"}));
    let cond = expr("a > 5");
    let got = evaluate_row(&cond, &crate::ast::Ident::new("d"), &row, &Params::new());
    assert_eq!(got.expect("evaluates"), Value::TRUE);

    let gt = spans_for("a > 5", &["a"]);
    assert_eq!(
        gt,
        vec![Span {
            start: lower_bound(&v(json!(5)), false).expect("encodes"),
            end: vec![END]
        }]
    );
    assert!(covered(&gt, &entry(&[json!("x")], "k")));
    assert!(!covered(&gt, &entry(&[json!(5)], "k")));
    assert!(!covered(&gt, &entry(&[json!(4.5)], "k")));

    // Below: everything above NULL (booleans too), never NULL itself.
    let le = spans_for("5 >= a", &["a"]);
    assert_eq!(
        le,
        vec![Span {
            start: lower_bound(&Value::NULL, false).expect("encodes"),
            end: upper_bound(&v(json!(5)), true).expect("encodes"),
        }]
    );
    assert!(covered(&le, &entry(&[json!(false)], "k")));
    assert!(!covered(&le, &entry(&[json!(null)], "k")));

    let between = spans_for("a BETWEEN 1 AND 'b'", &["a"]);
    assert!(covered(&between, &entry(&[json!("a")], "k")));
    assert!(!covered(&between, &entry(&[json!("b0")], "k")));
}

#[test]
fn contradictions_and_unknown_constants_match_nothing() {
    for w in [
        "a = 1 AND a = 2",
        "a IN []",
        "a = NULL",
        "a > MISSING",
        "a BETWEEN 5 AND 1",
        "a < 1 AND a > 1",
        "a LIKE 5",
        "a IS NULL AND a IS NOT NULL",
        "a = 1 AND FALSE",
    ] {
        assert_eq!(spans_for(w, &["a"]), vec![], "{w}");
    }
}

#[test]
fn in_lists_ors_and_nots_union_and_complement() {
    assert_eq!(
        spans_for("a IN [3, 'x', 1, 3.0]", &["a"]),
        vec![point(json!(1)), point(json!(3)), point(json!("x"))]
    );
    let or = spans_for("a = 1 OR a > 10 OR (a = 2)", &["a"]);
    assert_eq!(or.len(), 3);
    assert!(covered(&or, &entry(&[json!(11)], "k")));
    assert!(!covered(&or, &entry(&[json!(10)], "k")));

    let not = spans_for("NOT (a < 5)", &["a"]);
    assert_eq!(
        not,
        vec![Span {
            start: lower_bound(&v(json!(5)), true).expect("encodes"),
            end: vec![END]
        }]
    );
    let ne = spans_for("a != 5", &["a"]);
    assert_eq!(ne.len(), 2);
    assert!(!covered(&ne, &entry(&[json!(5)], "k")));
    assert!(!covered(&ne, &entry(&[json!(null)], "k")));
    assert!(covered(&ne, &entry(&[json!("5")], "k")));
    // `[null] IN [[null]]` is FALSE, so NOT IN must keep [null].
    let not_in = spans_for("a NOT IN [[null], 2]", &["a"]);
    assert!(covered(&not_in, &entry(&[json!([null])], "k")));
    assert!(!covered(&not_in, &entry(&[json!(2)], "k")));
}

#[test]
fn like_prefixes_and_is_tests() {
    let like = spans_for("a LIKE 'ab%'", &["a"]);
    assert_eq!(
        like,
        vec![Span {
            start: lower_bound(&v(json!("ab")), true).expect("encodes"),
            end: lower_bound(&v(json!("ac")), true).expect("encodes"),
        }]
    );
    let escaped = spans_for(r"a LIKE 'a\\_%'", &["a"]);
    assert!(covered(&escaped, &entry(&[json!("a_c")], "k")));
    assert!(!covered(&escaped, &entry(&[json!("abc")], "k")));

    let not_null = spans_for("a IS NOT NULL", &["a"]);
    assert_eq!(not_null, spans_for("a IS VALUED", &["a"]));
    assert!(!covered(&not_null, &entry(&[json!(null)], "k")));
    assert!(covered(&not_null, &entry(&[json!(false)], "k")));
    assert_eq!(spans_for("a IS NULL", &["a"]), vec![point(json!(null))]);
    let not_missing = spans_for("a IS NOT MISSING", &["a"]);
    assert_eq!(
        not_missing,
        vec![span((type_range(Type::Null).0, vec![END]))]
    );
}

#[test]
fn composite_keys_narrow_after_equalities() {
    let eq_range = spans_for("b > 2 AND a = 1", &["a", "b"]);
    let (_, prefix_end) = prefix_range(&[v(json!(1))]).expect("encodes");
    let start =
        crate::index_key::lower_bound_after(&[v(json!(1))], &v(json!(2)), false).expect("encodes");
    assert_eq!(
        eq_range,
        vec![Span {
            start,
            end: prefix_end
        }]
    );

    let in_eq = spans_for("a IN [2, 1] AND b = 3", &["a", "b"]);
    let both = |a: i64| span(prefix_range(&[v(json!(a)), v(json!(3))]).expect("encodes"));
    assert_eq!(in_eq, vec![both(1), both(2)]);

    // A range on `a` ends the narrowing: `c` is left to the WHERE.
    let range_first = spans_for("a > 1 AND b = 3", &["a", "b"]);
    assert_eq!(range_first.len(), 1);
    assert!(covered(&range_first, &entry(&[json!(2), json!(4)], "k")));

    // Unconstrained middle key: only the prefix narrows.
    let gap = spans_for("a = 1 AND c = 3", &["a", "b", "c"]);
    assert_eq!(gap, vec![point(json!(1))]);
}

#[test]
fn cross_products_past_the_cap_fall_back_to_one_range() {
    let list: Vec<String> = (0..MAX_SPANS + 1).map(|i| i.to_string()).collect();
    let w = format!("a IN [{}]", list.join(", "));
    let spans = spans_for(&w, &["a"]);
    assert_eq!(
        spans,
        vec![Span {
            start: lower_bound(&v(json!(0)), true).expect("encodes"),
            end: upper_bound(&v(json!(MAX_SPANS)), true).expect("encodes"),
        }]
    );
    let small: Vec<String> = (0..40).map(|i| i.to_string()).collect();
    let w = format!("a IN [{0}] AND b IN [{0}]", small.join(", "));
    let spans = spans_for(&w, &["a", "b"]);
    // 40 × 40 passes the cap: `a` is pinned, `b` becomes one range per `a`.
    assert_eq!(spans.len(), 40);
}

#[test]
fn parameters_are_constants() {
    let params = Params::new()
        .with_named("s", json!("open"))
        .with_positional([json!([1, 2])]);
    let ix = [index("ix", &["status"])];
    let a = try_plan("SELECT * FROM default WHERE status = $s", &ix, &params).expect("plans");
    assert_eq!(scan(&a).1, [point(json!("open"))]);
    let a = try_plan("SELECT * FROM default WHERE status IN ?", &ix, &params).expect("plans");
    assert_eq!(scan(&a).1, [point(json!(1)), point(json!(2))]);
    let err = try_plan("SELECT * FROM default WHERE status = $nope", &ix, &params);
    assert_eq!(err.map_err(|e| e.code()), Err(5010));
}

#[test]
fn use_keys_and_no_from() {
    let a = plan(
        "SELECT * FROM default USE KEYS ['k1', 'k2'] WHERE a = 1",
        &[],
    );
    assert_eq!(
        a,
        Access::KeyLookup {
            keys: vec!["k1".into(), "k2".into()]
        }
    );
    let params = Params::new().with_named("k", json!("k9"));
    let a = try_plan("SELECT * FROM default USE KEYS $k", &[], &params).expect("plans");
    assert_eq!(
        a,
        Access::KeyLookup {
            keys: vec!["k9".into()]
        }
    );
    assert_eq!(plan("SELECT 1 + 1", &[]), Access::None);
}
