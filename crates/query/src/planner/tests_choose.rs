//! Choosing among indexes, primary scans, and the "no index" error.

use super::test_util::*;
use super::{Access, IndexInfo, Span};
use crate::error::QueryError;
use crate::eval::Params;

fn chosen(where_: &str, indexes: &[IndexInfo]) -> String {
    let access = plan(&format!("SELECT * FROM default d WHERE {where_}"), indexes);
    scan(&access).0.to_owned()
}

#[test]
fn more_equalities_then_more_keys_then_fewer_keys_then_name() {
    let ixs = [
        index("a_only", &["a"]),
        index("a_b", &["a", "b"]),
        index("b_a", &["b", "a"]),
        index("a_b_c", &["a", "b", "c"]),
    ];
    assert_eq!(chosen("a = 1 AND b = 2", &ixs), "a_b");
    assert_eq!(chosen("a = 1 AND b > 2", &ixs), "a_b");
    assert_eq!(chosen("a > 1 AND b = 2", &ixs), "b_a");
    assert_eq!(chosen("a = 1", &ixs), "a_only");
    assert_eq!(chosen("a = 1 AND c = 2", &ixs), "a_b_c");
    let twins = [index("zeta", &["a"]), index("alpha", &["a"])];
    assert_eq!(chosen("a = 1", &twins), "alpha");
}

#[test]
fn offline_indexes_are_never_chosen() {
    let ixs = [
        offline(index("fast", &["a"])),
        IndexInfo::primary("#primary"),
    ];
    let a = plan("SELECT * FROM default WHERE a = 1", &ixs);
    assert!(matches!(a, Access::PrimaryScan { ref index, .. } if index == "#primary"));
    let err = try_plan(
        "SELECT * FROM default WHERE a = 1",
        &[
            offline(index("fast", &["a"])),
            offline(IndexInfo::primary("#primary")),
        ],
        &Params::new(),
    );
    assert_eq!(err.map_err(|e| e.code()), Err(4000));
}

#[test]
fn an_unconstrained_or_missing_admitting_leading_key_is_unusable() {
    let ixs = [index("ab", &["a", "b"]), IndexInfo::primary("#primary")];
    for w in [
        "b = 1",
        "a = 1 OR b = 1",
        "a IS MISSING",
        "a IS NOT VALUED",
        "NOT (a IS NOT MISSING)",
        "a + 1 = 2",
        "a = b",
        "a LIKE '%x'",
        "ANY x IN a SATISFIES x = 1 END",
    ] {
        assert_eq!(chosen(w, &ixs), "#primary", "{w}");
    }
    // INCLUDE MISSING makes IS MISSING a point on the MISSING entries.
    let with_missing = [index("am", &["a!"]), IndexInfo::primary("#primary")];
    assert_eq!(chosen("a IS MISSING", &with_missing), "am");
}

#[test]
fn include_missing_full_scans_come_after_the_primary_index() {
    let am = index("am", &["a!", "b"]);
    assert_eq!(
        chosen("b = 1", &[am.clone(), IndexInfo::primary("#p")]),
        "#p"
    );
    let a = plan("SELECT * FROM default d WHERE b = 1", &[am]);
    match a {
        Access::IndexScan { index, spans, .. } => {
            assert_eq!(index, "am");
            assert_eq!(
                spans,
                vec![Span {
                    start: vec![],
                    end: vec![0xFF]
                }]
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn partial_indexes_need_their_condition_among_the_conjuncts() {
    let ixs = [
        partial("hotels", &["name"], "type = 'hotel' AND default.active"),
        IndexInfo::primary("#primary"),
    ];
    let w = "d.active AND d.name = 'Ritz' AND type = 'hotel'";
    assert_eq!(chosen(w, &ixs), "hotels");
    assert_eq!(chosen("name = 'Ritz' AND type = 'hotel'", &ixs), "#primary");
    assert_eq!(
        chosen("name = 'Ritz' AND (type = 'hotel' OR active)", &ixs),
        "#primary"
    );
}

#[test]
fn primary_scans_narrow_on_meta_id() {
    let ixs = [IndexInfo::primary("#primary")];
    let spans = |w: &str| {
        let a = plan(&format!("SELECT * FROM default d WHERE {w}"), &ixs);
        let (_, s) = scan(&a);
        assert_well_formed(s);
        s.to_vec()
    };
    let sp = |a: &[u8], b: &[u8]| Span {
        start: a.to_vec(),
        end: b.to_vec(),
    };
    assert_eq!(spans("META().id = 'k1'"), vec![sp(b"k1", b"k1\0")]);
    assert_eq!(spans("META(d).id > 'm'"), vec![sp(b"m\0", &[0xFF])]);
    assert_eq!(spans("META().id <= 'm'"), vec![sp(b"", b"m\0")]);
    assert_eq!(
        spans("META().id LIKE 'user:%'"),
        vec![sp(b"user:", b"user;")]
    );
    assert_eq!(
        spans("META().id BETWEEN 'a' AND 'c'"),
        vec![sp(b"a", b"c\0")]
    );
    assert_eq!(
        spans("META().id IN ['b', 'a', 7]"),
        vec![sp(b"a", b"a\0"), sp(b"b", b"b\0")]
    );
    assert_eq!(spans("META().id < 5"), vec![]);
    assert_eq!(spans("a = 1"), vec![sp(b"", &[0xFF])]);
    let a = plan("SELECT * FROM default WHERE a = 1", &ixs);
    assert!(matches!(a, Access::PrimaryScan { ref ranges, .. } if ranges.is_empty()));
}

#[test]
fn no_index_is_couchbase_error_4000_naming_the_keyspace() {
    let cases = [
        ("SELECT * FROM default WHERE a = 1", "`default`"),
        (
            "SELECT * FROM default:travel.inventory.airline WHERE a = 1",
            "default:`travel`.`inventory`.`airline`",
        ),
    ];
    for (text, ks) in cases {
        let err = try_plan(text, &[index("bx", &["b"])], &Params::new()).expect_err("no index");
        assert_eq!(err.code(), 4000);
        assert_eq!(
            err,
            QueryError::NoIndexAvailable {
                keyspace: ks.into()
            }
        );
        assert_eq!(
            err.to_string(),
            format!(
                "No index available on keyspace {ks} that matches your query. Use CREATE \
                 PRIMARY INDEX ON {ks} to create a primary index, or check that your \
                 expected index is online."
            )
        );
    }
}

#[test]
fn a_constant_where_decides_alone() {
    let ixs = [index("a", &["a"])];
    assert_eq!(scan(&plan("SELECT * FROM default WHERE 1 = 2", &ixs)).1, []);
    // A true constant constrains nothing.
    let err = try_plan("SELECT * FROM default WHERE 1 = 1", &ixs, &Params::new());
    assert_eq!(err.map_err(|e| e.code()), Err(4000));
}
