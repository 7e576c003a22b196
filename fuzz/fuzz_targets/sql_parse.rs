//! The SQL++ parser (`sluice_query::parse`) on arbitrary bytes. Checks: never a panic; an
//! accepted statement's rendering parses back to the same statement (and renders the same);
//! and an accepted SELECT runs through the row pipeline over a few fixed documents without
//! a panic (errors are fine).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_query::serde_json::json;
use sluice_query::{parse, run_select, Limits, Params, Row, Statement};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(stmt) = parse(text) else {
        return;
    };
    let rendered = stmt.to_string();
    let again = parse(&rendered);
    assert_eq!(again.as_ref(), Ok(&stmt), "{text:?} rendered as {rendered}");
    assert_eq!(
        again.map(|s| s.to_string()).as_deref(),
        Ok(rendered.as_str())
    );

    if let Statement::Select(select) = &stmt {
        let rows = [
            Row::new(
                "k1",
                json!({"a": 1, "b": "x", "c": [1, 2, {"d": null}], "e": {"f": true}}),
            ),
            Row::new("k2", json!({"a": 2.5, "b": null, "c": []})),
            Row::new("k3", json!("not an object")),
        ];
        let params = Params::new()
            .with_positional([json!(1), json!("two"), json!([3])])
            .with_named("x", json!({"y": 1}));
        let limits = Limits {
            max_buffered_bytes: 1 << 20,
        };
        let _ = run_select(select, rows, &params, limits);
    }
});
