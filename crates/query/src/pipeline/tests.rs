//! Pipeline tests: SELECTs over rows given in the test.

use serde_json::{json, Value as J};

use super::*;
use crate::ast::Statement;
use crate::error::{Clause, QueryError};
use crate::parse;

fn select(text: &str) -> Select {
    match parse(text) {
        Ok(Statement::Select(s)) => s,
        other => panic!("{text}: {other:?}"),
    }
}

fn rows(docs: &[J]) -> Vec<Row> {
    docs.iter()
        .enumerate()
        .map(|(i, d)| Row::new(format!("k{i}"), d.clone()))
        .collect()
}

fn run_with(text: &str, docs: &[J], params: &Params) -> Result<Vec<J>> {
    run_select(&select(text), rows(docs), params, Limits::default())
}

fn run(text: &str, docs: &[J]) -> Vec<J> {
    run_with(text, docs, &Params::new()).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn people() -> Vec<J> {
    vec![
        json!({"name": "ann", "age": 31, "city": "Oslo", "tags": ["a", "b"]}),
        json!({"name": "bob", "age": 17, "city": "Rome"}),
        json!({"name": "cid", "age": 45, "city": "Oslo", "tags": []}),
        json!({"name": "dan", "city": null}),
    ]
}

#[test]
fn filter_and_projection_names() {
    assert_eq!(
        run("SELECT name, age FROM p WHERE age > 20", &people()),
        vec![
            json!({"name": "ann", "age": 31}),
            json!({"name": "cid", "age": 45})
        ]
    );
    // `*` wraps the document in its alias; `alias.*` merges its fields.
    assert_eq!(
        run("SELECT * FROM p WHERE name = 'bob'", &people())[0],
        json!({"p": people()[1]})
    );
    assert_eq!(
        run("SELECT d.* FROM p AS d WHERE d.name = 'bob'", &people())[0],
        people()[1]
    );
    // Implicit names: the last path step, else $1, $2 in order; MISSING fields are dropped.
    assert_eq!(
        run(
            "SELECT META().id, p.tags[0], UPPER(name), age + 1, x.y.z FROM p WHERE name = 'ann'",
            &people()
        ),
        vec![json!({"id": "k0", "$1": "a", "$2": "ANN", "$3": 32})]
    );
    assert_eq!(
        run("SELECT META(p).cas AS c FROM p LIMIT 1", &people()),
        vec![json!({"c": 0})]
    );
    assert_eq!(
        run("SELECT 1 + 1, 'x' AS y", &[]),
        vec![json!({"$1": 2, "y": "x"})]
    );
}

#[test]
fn raw_distinct_offset_limit() {
    // A RAW MISSING yields no row; NULL does.
    assert_eq!(
        run("SELECT RAW age FROM p", &people()),
        vec![json!(31), json!(17), json!(45)]
    );
    assert_eq!(
        run("SELECT RAW city FROM p", &people()),
        vec![json!("Oslo"), json!("Rome"), json!("Oslo"), json!(null)]
    );
    assert_eq!(
        run("SELECT DISTINCT RAW city FROM p", &people()),
        vec![json!("Oslo"), json!("Rome"), json!(null)]
    );
    assert_eq!(
        run(
            "SELECT DISTINCT city FROM p WHERE city IS VALUED",
            &people()
        )
        .len(),
        2
    );
    assert_eq!(
        run("SELECT RAW name FROM p LIMIT 2 OFFSET 1", &people()),
        vec![json!("bob"), json!("cid")]
    );
    assert_eq!(
        run("SELECT RAW name FROM p OFFSET 3", &people()),
        vec![json!("dan")]
    );
    assert!(run("SELECT RAW name FROM p LIMIT 0", &people()).is_empty());
    let params = Params::new().with_named("n", json!(1));
    assert_eq!(
        run_with("SELECT RAW name FROM p LIMIT $n", &people(), &params).unwrap(),
        vec![json!("ann")]
    );
}

#[test]
fn streaming_stops_at_the_limit() {
    let s = select("SELECT RAW name FROM p WHERE age IS VALUED LIMIT 2");
    let params = Params::new();
    let mut p = Pipeline::new(&s, &params, Limits::default()).unwrap();
    let mut out = Vec::new();
    let flows: Vec<Flow> = rows(&people())
        .iter()
        .map(|r| p.push(r, &mut out).unwrap())
        .collect();
    // Done as soon as the last needed row is out.
    assert_eq!(flows, vec![Flow::More, Flow::Done, Flow::Done, Flow::Done]);
    assert_eq!(out, vec![json!("ann"), json!("bob")]);
    p.finish(&mut out).unwrap();
    assert_eq!(out.len(), 2);
}

#[test]
fn order_by_collates_mixed_types() {
    let docs = [
        json!({"v": "a"}),
        json!({"v": [1]}),
        json!({"v": 2}),
        json!({"v": null}),
        json!({}),
        json!({"v": true}),
        json!({"v": {"a": 1}}),
        json!({"v": false}),
        json!({"v": 1.5}),
    ];
    let got: Vec<J> = run("SELECT RAW IFMISSING(v, 'M') FROM t ORDER BY v", &docs);
    assert_eq!(
        got,
        vec![
            json!("M"),
            json!(null),
            json!(false),
            json!(true),
            json!(1.5),
            json!(2),
            json!("a"),
            json!([1]),
            json!({"a": 1})
        ]
    );
    let desc = run("SELECT RAW IFMISSING(v, 'M') FROM t ORDER BY v DESC", &docs);
    assert_eq!(desc.first(), Some(&json!({"a": 1})));
    assert_eq!(&desc[7..], &[json!(null), json!("M")]);
    let nulls_last = run(
        "SELECT RAW IFMISSING(v, 'M') FROM t ORDER BY v NULLS LAST",
        &docs,
    );
    assert_eq!(nulls_last.first(), Some(&json!(false)));
    assert_eq!(&nulls_last[7..], &[json!("M"), json!(null)]);
    let desc_nulls_first = run(
        "SELECT RAW IFMISSING(v, 'M') FROM t ORDER BY v DESC NULLS FIRST",
        &docs,
    );
    assert_eq!(
        &desc_nulls_first[..3],
        &[json!(null), json!("M"), json!({"a": 1})]
    );
}

#[test]
fn order_by_terms_aliases_and_stability() {
    assert_eq!(
        run(
            "SELECT name, city FROM p ORDER BY city DESC, name",
            &people()
        ),
        vec![
            json!({"name": "bob", "city": "Rome"}),
            json!({"name": "ann", "city": "Oslo"}),
            json!({"name": "cid", "city": "Oslo"}),
            json!({"name": "dan", "city": null}),
        ]
    );
    // An explicit alias may be ordered by, and shadows the document's field.
    assert_eq!(
        run(
            "SELECT RAW n FROM p WHERE age IS VALUED ORDER BY -age",
            &people()
        )
        .len(),
        0,
        "n is not a field"
    );
    assert_eq!(
        run(
            "SELECT name AS age FROM p WHERE age IS VALUED ORDER BY age DESC",
            &people()
        ),
        vec![
            json!({"age": "cid"}),
            json!({"age": "bob"}),
            json!({"age": "ann"})
        ]
    );
    assert_eq!(
        run(
            "SELECT RAW name FROM p ORDER BY city LIMIT 2 OFFSET 1",
            &people()
        ),
        vec![json!("ann"), json!("cid")]
    );
}

#[test]
fn group_by_and_aggregates() {
    let docs = [
        json!({"t": "x", "v": 1}),
        json!({"t": "x", "v": 2.5}),
        json!({"t": "y", "v": null}),
        json!({"t": "x", "v": 1}),
        json!({"t": "y"}),
        json!({"v": "s"}),
    ];
    let got = run(
        "SELECT t, COUNT(*) AS n, COUNT(v) AS nv, COUNT(DISTINCT v) AS dv, SUM(v) AS s, AVG(v) AS a, \
         MIN(v) AS lo, MAX(v) AS hi, ARRAY_AGG(v) AS all_v FROM b GROUP BY t ORDER BY t",
        &docs,
    );
    assert_eq!(
        got,
        vec![
            // The group whose key is MISSING: the key is not projected.
            json!({"n": 1, "nv": 1, "dv": 1, "s": null, "a": null, "lo": "s", "hi": "s", "all_v": ["s"]}),
            json!({"t": "x", "n": 3, "nv": 3, "dv": 2, "s": 4.5, "a": 1.5, "lo": 1, "hi": 2.5, "all_v": [1, 1, 2.5]}),
            json!({"t": "y", "n": 2, "nv": 0, "dv": 0, "s": null, "a": null, "lo": null, "hi": null, "all_v": [null]}),
        ]
    );
    assert_eq!(
        run(
            "SELECT t, SUM(v) AS s FROM b GROUP BY t HAVING COUNT(*) > 2",
            &docs
        ),
        vec![json!({"t": "x", "s": 4.5})]
    );
    assert_eq!(
        run(
            "SELECT RAW LOWER(t) FROM b WHERE t IS VALUED GROUP BY b.t ORDER BY COUNT(*) DESC",
            &docs
        ),
        vec![json!("x"), json!("y")]
    );
    assert_eq!(
        run(
            "SELECT COUNT(DISTINCT t) AS c, ARRAY_AGG(DISTINCT t) AS ts FROM b",
            &docs
        ),
        vec![json!({"c": 2, "ts": ["x", "y"]})]
    );
}

#[test]
fn whole_keyspace_aggregates_yield_one_row() {
    assert_eq!(
        run("SELECT COUNT(*), SUM(v), MAX(v) AS m FROM b", &[]),
        vec![json!({"$1": 0, "$2": null, "m": null})]
    );
    assert_eq!(
        run("SELECT RAW COUNT(*) FROM p WHERE age > 20", &people()),
        vec![json!(2)]
    );
    // With GROUP BY, no rows make no groups.
    assert!(run("SELECT t, COUNT(*) FROM b GROUP BY t", &[]).is_empty());
}

#[test]
fn planner_errors() {
    let e = run_with(
        "SELECT name FROM p WHERE COUNT(*) > 1",
        &people(),
        &Params::new(),
    )
    .unwrap_err();
    assert_eq!(
        e,
        QueryError::AggregateNotAllowed {
            clause: Clause::Where
        }
    );
    assert_eq!(e.to_string(), "Aggregates not allowed in WHERE.");
    let e = run_with(
        "SELECT name, COUNT(*) FROM p GROUP BY city",
        &people(),
        &Params::new(),
    )
    .unwrap_err();
    assert_eq!(e.code(), 4210);
    assert_eq!(
        e.to_string(),
        "Expression `p`.`name` must depend only on group keys or aggregates."
    );
    assert!(run_with("SELECT * FROM p GROUP BY city", &people(), &Params::new()).is_err());
    assert!(run_with("SELECT SUM(COUNT(*)) FROM p", &people(), &Params::new()).is_err());
    let e = run_with("SELECT name FROM p LIMIT 'x'", &people(), &Params::new()).unwrap_err();
    assert_eq!(
        (e.code(), e.to_string()),
        (5030, "Invalid LIMIT value \"x\"".to_owned())
    );
    let e = run_with("SELECT name FROM p LIMIT $1", &people(), &Params::new()).unwrap_err();
    assert_eq!(e.code(), 5010);
}

#[test]
fn buffering_is_bounded() {
    let docs: Vec<J> = (0..1000)
        .map(|i| json!({"i": i, "pad": "x".repeat(100)}))
        .collect();
    let limits = Limits {
        max_buffered_bytes: 10_000,
    };
    let params = Params::new();
    for text in [
        "SELECT pad FROM b ORDER BY i",
        "SELECT DISTINCT i FROM b",
        "SELECT i, COUNT(*) FROM b GROUP BY i",
        "SELECT ARRAY_AGG(pad) FROM b",
    ] {
        let e = run_select(&select(text), rows(&docs), &params, limits).unwrap_err();
        assert_eq!(e.code(), 5500, "{text}");
        assert!(
            e.to_string()
                .starts_with("Request has exceeded memory quota"),
            "{e}"
        );
    }
    // Streaming holds nothing.
    assert_eq!(
        run_select(&select("SELECT pad FROM b"), rows(&docs), &params, limits)
            .unwrap()
            .len(),
        1000
    );
}

#[test]
fn sdk_get_all_indexes_over_system_indexes() {
    // The statement couchbase-cxx-client sends for a bucket-level getAllIndexes.
    let text = "SELECT `idx`.* FROM system:indexes AS idx WHERE (bucket_id = $bucket_name OR \
                (bucket_id IS MISSING AND keyspace_id = $bucket_name)) AND `using` = \"gsi\" \
                ORDER BY is_primary DESC, name ASC";
    let indexes = [
        json!({"name": "by_type", "keyspace_id": "b", "using": "gsi", "state": "online"}),
        json!({"name": "#primary", "keyspace_id": "b", "is_primary": true, "using": "gsi", "state": "online"}),
        json!({"name": "coll_ix", "bucket_id": "b", "scope_id": "s", "keyspace_id": "c", "using": "gsi"}),
        json!({"name": "other", "keyspace_id": "other", "using": "gsi"}),
        json!({"name": "a_view", "keyspace_id": "b", "using": "view"}),
    ];
    let params = Params::new()
        .with_named("$bucket_name", json!("b"))
        .with_named("$scope_name", json!(""))
        .with_named("$collection_name", json!(""));
    let got = run_with(text, &indexes, &params).unwrap();
    let names: Vec<&J> = got.iter().map(|r| &r["name"]).collect();
    assert_eq!(names, vec!["#primary", "by_type", "coll_ix"]);
    assert_eq!(got[0], indexes[1]);
    // And the deferred-index listing.
    let deferred = "SELECT RAW name FROM system:indexes WHERE (bucket_id = $bucket_name OR \
                    (bucket_id IS MISSING AND keyspace_id = $bucket_name)) AND state = \"deferred\" \
                    AND `using` = \"gsi\" ORDER BY is_primary DESC, name ASC";
    let mut with_deferred = indexes.to_vec();
    with_deferred
        .push(json!({"name": "later", "keyspace_id": "b", "using": "gsi", "state": "deferred"}));
    assert_eq!(
        run_with(deferred, &with_deferred, &params).unwrap(),
        vec![json!("later")]
    );
}

#[test]
fn rows_in_order_stream_and_stop_at_offset_plus_limit() {
    let docs: Vec<J> = (0..10).map(|i| json!({"n": i})).collect();
    let s = select("SELECT RAW n FROM default ORDER BY n LIMIT 3 OFFSET 2");
    let none = Params::new();
    let mut p = Pipeline::new(&s, &none, Limits::default()).unwrap();
    p.rows_in_order();
    let mut out = Vec::new();
    let mut pushed = 0;
    for row in rows(&docs) {
        pushed += 1;
        if p.push(&row, &mut out).unwrap() == Flow::Done {
            break;
        }
    }
    // Out as they come, and nothing read past the fifth row.
    assert_eq!(
        (out.clone(), pushed),
        (vec![json!(2), json!(3), json!(4)], 5)
    );
    p.finish(&mut out).unwrap();
    assert_eq!(out.len(), 3);

    // Grouped results are sorted after the last row whatever the input order.
    let g = select("SELECT n, COUNT(*) AS c FROM default GROUP BY n ORDER BY n LIMIT 2");
    let mut p = Pipeline::new(&g, &none, Limits::default()).unwrap();
    p.rows_in_order();
    let mut out = Vec::new();
    for row in rows(&docs).into_iter().rev() {
        assert_eq!(p.push(&row, &mut out).unwrap(), Flow::More);
    }
    assert!(out.is_empty());
    p.finish(&mut out).unwrap();
    assert_eq!(out, vec![json!({"n": 0, "c": 1}), json!({"n": 1, "c": 1})]);
}
