//! The canonical form query expressions and index keys are matched in.

use super::normalize::{canonical, conjuncts, is_constant};
use super::test_util::expr;
use crate::ast::Ident;

/// The canonical form's text, or None.
fn canon(text: &str, alias: &str) -> Option<String> {
    canonical(&expr(text), &Ident::new(alias)).map(|e| e.to_string())
}

fn same(query: &str, alias: &str, key: &str, keyspace: &str) -> bool {
    let q = canonical(&expr(query), &Ident::new(alias));
    q.is_some() && q == canonical(&expr(key), &Ident::new(keyspace))
}

#[test]
fn the_alias_is_stripped_from_document_paths() {
    assert_eq!(canon("d.status", "d").as_deref(), Some("`status`"));
    assert_eq!(canon("status", "d").as_deref(), Some("`status`"));
    assert_eq!(
        canon("d.address.city", "d").as_deref(),
        Some("`address`.`city`")
    );
    assert_eq!(canon("d.['status']", "d").as_deref(), Some("`status`"));
    assert_eq!(canon("d.tags[d.i]", "d").as_deref(), Some("`tags`[`i`]"));
    assert_eq!(canon("META(d).id", "d").as_deref(), Some("META().`id`"));
}

#[test]
fn query_expressions_match_index_keys() {
    let pairs = [
        ("d.status", "d", "status", "default"),
        ("status", "default", "default.status", "default"),
        ("default.status", "default", "status", "default"),
        ("d.address.city", "d", "address.city", "default"),
        ("d.tags[0]", "d", "tags[0]", "default"),
        ("d.tags[-1].name", "d", "default.tags[-1].name", "default"),
        ("LOWER(d.name)", "d", "LOWER(name)", "default"),
        ("IFMISSING(d.a, d.b)", "d", "IFMISSING(a, b)", "default"),
        ("d.a + 1", "d", "a + 1", "default"),
        ("META().id", "d", "META(airline).id", "airline"),
        (
            "ANY v IN d.tags SATISFIES v = d.x END",
            "d",
            "ANY v IN tags SATISFIES v = x END",
            "default",
        ),
    ];
    for (q, alias, key, ks) in pairs {
        assert!(
            same(q, alias, key, ks),
            "{q} (as {alias}) vs {key} (on {ks})"
        );
    }
}

#[test]
fn different_paths_do_not_match() {
    let pairs = [
        // With alias `d`, `default.status` is the field `default` of the document.
        ("default.status", "d", "status", "default"),
        ("d.status", "d", "Status", "default"),
        ("d.a.b", "d", "a", "default"),
        ("d.tags[0]", "d", "tags[1]", "default"),
        ("LOWER(d.name)", "d", "UPPER(name)", "default"),
        ("d.a + 1", "d", "a + 1.5", "default"),
        ("d.a", "d", "b", "default"),
    ];
    for (q, alias, key, ks) in pairs {
        assert!(
            !same(q, alias, key, ks),
            "{q} (as {alias}) vs {key} (on {ks})"
        );
    }
}

#[test]
fn what_has_no_canonical_form() {
    // The whole document, another keyspace's META, a dynamic name.
    assert_eq!(canon("d", "d"), None);
    assert_eq!(canon("LOWER(d)", "d"), None);
    assert_eq!(canon("META(x).id", "d"), None);
    assert_eq!(canon("d.[d.k]", "d"), None);
    assert_eq!(canon("d[0]", "d"), None);
    // `d.v` inside ANY v would read the variable once the alias is stripped.
    assert_eq!(canon("ANY v IN d.t SATISFIES d.v = v END", "d"), None);
}

#[test]
fn variables_shadow_the_alias_and_fields() {
    // Inside `ANY d IN ...`, `d` is the element, not the document.
    assert_eq!(
        canon("ANY d IN d.tags SATISFIES d.x = 1 END", "d").as_deref(),
        Some("ANY `d` IN `tags` SATISFIES (`d`.`x` = 1) END")
    );
}

#[test]
fn constants_read_no_document() {
    for c in [
        "1",
        "'a'",
        "[1, $p]",
        "?",
        "-1 + 2",
        "LOWER('A')",
        "ANY v IN [1] SATISFIES v > 0 END",
    ] {
        assert!(is_constant(&expr(c)), "{c}");
    }
    for c in [
        "a",
        "d.a",
        "META().id",
        "COUNT(*)",
        "ANY v IN a SATISFIES v > 0 END",
        "[1, a]",
    ] {
        assert!(!is_constant(&expr(c)), "{c}");
    }
    let e = expr("ANY v IN [1] SATISFIES v > w END");
    assert!(!is_constant(&e));
}

#[test]
fn conjuncts_flatten_nested_ands_only() {
    let e = expr("a = 1 AND (b = 2 AND c = 3) AND (d = 4 OR e = 5)");
    let parts: Vec<String> = conjuncts(&e).into_iter().map(ToString::to_string).collect();
    assert_eq!(
        parts,
        [
            "(`a` = 1)",
            "(`b` = 2)",
            "(`c` = 3)",
            "((`d` = 4) OR (`e` = 5))"
        ]
    );
}
