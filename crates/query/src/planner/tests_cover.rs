//! Which statements an index covers, and the rows covered entries become.

use serde_json::json;

use super::test_util::*;
use super::{covering, IndexInfo};
use crate::value::Value;

fn covers(text: &str, indexes: &[IndexInfo]) -> bool {
    let s = select(text);
    covering(&s, &plan(text, indexes), indexes).is_some()
}

#[test]
fn a_statement_reading_only_index_keys_and_meta_id_is_covered() {
    let ix = [
        index("ix_kv", &["k", "v.w"]),
        index("ix_low", &["LOWER(name)"]),
    ];
    for text in [
        "SELECT META().id, d.k FROM default d WHERE k >= 5 ORDER BY k LIMIT 100",
        "SELECT RAW META(d).id FROM default d WHERE d.k = 1",
        "SELECT k, v.w FROM default WHERE k BETWEEN 1 AND 9",
        // Below a key is covered too: the key holds the whole value.
        "SELECT v.w.x, v.w[0] FROM default WHERE k > 0",
        "SELECT k, COUNT(*) AS n FROM default WHERE k > 0 GROUP BY k HAVING COUNT(*) > 1",
        "SELECT k AS x FROM default WHERE k > 0 ORDER BY x DESC",
        "SELECT 1 FROM default WHERE k IS VALUED",
        "SELECT k FROM default WHERE k > 0 AND ANY t IN v.w SATISFIES t = META().id END",
        "SELECT d.['k'] FROM default d WHERE k > 0",
    ] {
        assert!(covers(text, &ix), "{text}");
    }
    let primary = [IndexInfo::primary("#primary")];
    assert!(covers("SELECT RAW META().id FROM default", &primary));
    assert!(covers(
        "SELECT META().id FROM default WHERE META().id LIKE 'u:%' ORDER BY META().id",
        &primary
    ));
}

#[test]
fn the_whole_document_other_metadata_or_an_unindexed_path_needs_the_fetch() {
    let ix = [
        index("ix_kv", &["k", "v.w"]),
        index("ix_low", &["LOWER(name)"]),
    ];
    for text in [
        "SELECT * FROM default WHERE k > 0",
        "SELECT d FROM default d WHERE k > 0",
        "SELECT d.* FROM default d WHERE k > 0",
        "SELECT META() FROM default WHERE k > 0",
        "SELECT META().cas FROM default WHERE k > 0",
        // Above a key: `v` holds more than `v.w`.
        "SELECT v FROM default WHERE k > 0",
        "SELECT k FROM default WHERE k > 0 AND other = 1",
        "SELECT k FROM default WHERE k > 0 ORDER BY other",
        "SELECT k FROM default WHERE k > 0 GROUP BY k, other",
        "SELECT k FROM default d WHERE k > 0 AND d.[k] = 1",
        // An expression key is no path: its value is not the document's.
        "SELECT META().id FROM default WHERE LOWER(name) = 'x'",
        "SELECT k FROM default USE KEYS 'a'",
    ] {
        assert!(!covers(text, &ix), "{text}");
    }
    let primary = [IndexInfo::primary("#primary")];
    assert!(!covers("SELECT META().id, k FROM default", &primary));
}

#[test]
fn a_covered_entry_becomes_a_document_of_its_key_paths() {
    let ix = [index("ix", &["k", "v.w", "LOWER(name)", "v", "m"])];
    let text = "SELECT META().id FROM default WHERE k > 0";
    let cover = covering(&select(text), &plan(text, &ix), &ix).expect("covered");
    let row = cover.row(
        vec![
            Value::Json(json!(7)),
            Value::Json(json!([1])),
            Value::Json(json!("x")),
            Value::Json(json!({"w": [1], "z": 2})),
            Value::Missing,
        ],
        b"doc-1",
    );
    assert_eq!(row.key, "doc-1");
    // `v` holds `v.w` already; the expression key and the MISSING one add nothing.
    assert_eq!(row.doc, json!({"k": 7, "v": {"w": [1], "z": 2}}));

    let nested = [index("ix", &["a.b", "a.c"])];
    let text = "SELECT a.b, a.c FROM default WHERE a.b > 0";
    let cover = covering(&select(text), &plan(text, &nested), &nested).expect("covered");
    let row = cover.row(vec![Value::Json(json!(1)), Value::Missing], b"k");
    assert_eq!(row.doc, json!({"a": {"b": 1}}));
    assert_eq!(
        cover.covers(),
        ["cover (`a`.`b`)", "cover (`a`.`c`)", "cover ((meta().id))"]
    );
}
