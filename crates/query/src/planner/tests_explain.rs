//! EXPLAIN's shape.

use serde_json::json;

use super::test_util::*;
use super::{explain, IndexInfo};

fn explained(text: &str, indexes: &[IndexInfo]) -> serde_json::Value {
    let s = select(text);
    let access = plan(text, indexes);
    let ordered = super::access_is_ordered(&s, &access, indexes);
    let cover = super::covering(&s, &access, indexes);
    explain(&s, &access, ordered, cover.as_ref())
}

#[test]
fn an_index_scan_then_fetch_then_filter_and_project() {
    let got = explained(
        "SELECT * FROM default WHERE status = 'open'",
        &[index("ix_status", &["status"])],
    );
    assert_eq!(
        got,
        json!({
            "plan": {"#operator": "Sequence", "~children": [
                {
                    "#operator": "IndexScan3",
                    "index": "ix_status",
                    "keyspace": "default",
                    "namespace": "default",
                    "spans": [{"range": [{
                        "index_key": "`status`",
                        "low": "\"open\"",
                        "high": "\"open\"",
                        "inclusion": 3
                    }]}],
                    "using": "gsi"
                },
                {"#operator": "Fetch", "keyspace": "default", "namespace": "default"},
                {"#operator": "Parallel", "~child": {"#operator": "Sequence", "~children": [
                    {"#operator": "Filter", "condition": "(`status` = \"open\")"},
                    {"#operator": "InitialProject", "result_terms": [{"expr": "self", "star": true}]}
                ]}},
                {"#operator": "FinalProject"}
            ]},
            "text": "SELECT * FROM `default` WHERE (`status` = \"open\")"
        })
    );
}

#[test]
fn ranges_show_only_the_bounds_they_have() {
    let got = explained(
        "SELECT a FROM default:b.s.c WHERE a > 5 AND a IS NOT NULL",
        &[index("ia", &["a"])],
    );
    let scan = &got["plan"]["~children"][0];
    assert_eq!(scan["bucket"], "b");
    assert_eq!(scan["scope"], "s");
    assert_eq!(scan["keyspace"], "c");
    assert_eq!(
        scan["spans"],
        json!([{"range": [{"index_key": "`a`", "low": "5", "inclusion": 0}]}])
    );
}

#[test]
fn key_scans_primary_scans_and_the_tail_of_the_pipeline() {
    let got = explained(
        "SELECT DISTINCT name FROM default USE KEYS ['k1'] ORDER BY name DESC LIMIT 2 OFFSET 1",
        &[],
    );
    let ops: Vec<&str> = got["plan"]["~children"]
        .as_array()
        .expect("children")
        .iter()
        .map(|op| op["#operator"].as_str().expect("operator"))
        .collect();
    assert_eq!(
        ops,
        [
            "KeyScan",
            "Fetch",
            "Parallel",
            "Order",
            "Offset",
            "Limit",
            "FinalProject"
        ]
    );
    assert_eq!(got["plan"]["~children"][0]["keys"], "[\"k1\"]");
    assert_eq!(
        got["plan"]["~children"][3]["sort_terms"],
        json!([{"expr": "`name`", "desc": true}])
    );

    let primary = [IndexInfo::primary("#primary")];
    let full = explained(
        "SELECT COUNT(*) FROM default GROUP BY a HAVING COUNT(*) > 1",
        &primary,
    );
    let kids = &full["plan"]["~children"];
    assert_eq!(kids[0]["#operator"], "PrimaryScan3");
    assert_eq!(kids[3]["#operator"], "FinalGroup");
    assert_eq!(kids[3]["aggregates"], json!(["COUNT(*)"]));
    assert_eq!(kids[4]["#operator"], "Filter");
    assert_eq!(kids[5]["#operator"], "InitialProject");

    let narrowed = explained("SELECT * FROM default WHERE META().id LIKE 'u:%'", &primary);
    let scan = &narrowed["plan"]["~children"][0];
    assert_eq!(scan["#operator"], "IndexScan3");
    assert_eq!(scan["index"], "#primary");
    assert_eq!(
        scan["spans"],
        json!([{"range": [{
            "index_key": "META().`id`", "low": "\"u:\"", "high": "\"u;\"", "inclusion": 1
        }]}])
    );

    let none = explained("SELECT 1", &[]);
    assert_eq!(none["plan"]["~children"][0]["#operator"], "DummyScan");
    assert_eq!(none["plan"]["~children"][1]["#operator"], "Parallel");
}

#[test]
fn an_order_the_index_gives_runs_no_order_stage() {
    let ops = |text: &str| -> Vec<String> {
        explained(text, &[index("ix_k", &["k", "v"])])["plan"]["~children"]
            .as_array()
            .expect("children")
            .iter()
            .map(|op| op["#operator"].as_str().expect("operator").to_owned())
            .collect()
    };
    let served = ops("SELECT * FROM default d WHERE d.k >= 5 ORDER BY d.k, v LIMIT 3");
    assert_eq!(
        served,
        ["IndexScan3", "Fetch", "Parallel", "Limit", "FinalProject"]
    );
    for sorted in [
        "SELECT * FROM default WHERE k >= 5 ORDER BY k DESC LIMIT 3",
        "SELECT * FROM default WHERE k >= 5 ORDER BY v LIMIT 3",
        "SELECT * FROM default WHERE k >= 5 ORDER BY k NULLS LAST LIMIT 3",
    ] {
        assert!(ops(sorted).contains(&"Order".to_owned()), "{sorted}");
    }
}

#[test]
fn a_covered_scan_lists_its_covers_and_fetches_nothing() {
    let ix = [index("ix_k", &["k"])];
    let got = explained("SELECT META().id, k FROM default WHERE k >= 5", &ix);
    let kids = got["plan"]["~children"].as_array().expect("children");
    assert_eq!(kids[0]["#operator"], "IndexScan3");
    assert_eq!(
        kids[0]["covers"],
        json!(["cover (`k`)", "cover ((meta().id))"])
    );
    assert!(kids.iter().all(|op| op["#operator"] != "Fetch"), "{got}");
    // Reading more than the index holds: a Fetch, and no covers.
    let fetched = explained("SELECT META().id, k, v FROM default WHERE k >= 5", &ix);
    let kids = fetched["plan"]["~children"].as_array().expect("children");
    assert!(kids[0].get("covers").is_none() && kids[1]["#operator"] == "Fetch");
}
