//! Table tests of the filter language: what parses, what it means, what is refused.

use serde_json::{json, Value as J};

use super::{Filter, FilterError, Reads, Subject, FILTER_DEPTH_MAX, FILTER_TEXT_BYTES_MAX};

fn airport() -> J {
    json!({
        "airportname": "La Teste De Buch",
        "country": "France",
        "geo": {"alt": 49, "lat": 44.59639},
        "icao": null,
        "id": 1283,
        "type": "airport",
        "value": 7,
        "order": {"total": 12.5},
        "a b": {"c": "spaced"},
        "schedule": [{"flight": "AA679"}, {"flight": "AA253"}],
        "date": "2019-01-25",
        "when": "2019-01-25T18:40:37Z"
    })
}

fn xattrs() -> J {
    json!({"color": "blue", "_sync": {"rev": 3}})
}

fn matches(filter: &str, key: &str) -> bool {
    let (body, xattrs) = (airport(), xattrs());
    let f = Filter::compile(filter).unwrap_or_else(|e| panic!("{filter:?}: {e}"));
    f.matches(&Subject {
        key: Some(key),
        body: Some(&body),
        xattrs: Some(&xattrs),
    })
}

#[test]
fn expressions_over_body_key_and_xattrs() {
    let cases: &[(&str, bool)] = &[
        (r#"REGEXP_CONTAINS(country, "France")"#, true),
        (r#"REGEXP_CONTAINS(country, "^Fr")"#, true),
        (r#"REGEXP_CONTAINS(country, "Spain")"#, false),
        (r#"REGEXP_CONTAINS(META().id, "airport_1")"#, true),
        (r#"REGEXP_CONTAINS(META().id, "^airline")"#, false),
        (r#"REGEXP_CONTAINS(META().xattrs.color, "blue")"#, true),
        (r#"META().xattrs._sync.rev = 3"#, true),
        (r#"META().id = "airport_1283""#, true),
        (
            r#"country = "France" AND airportname = "La Teste De Buch""#,
            true,
        ),
        (
            r#"country == "France" AND NOT airportname = "La Teste De Buch""#,
            false,
        ),
        (r#"country = "Spain" OR country = "France""#, true),
        (r#"country != "Spain""#, true),
        (r#"country <> "France""#, false),
        ("geo.alt >= 49", true),
        ("geo.alt > 49", false),
        ("geo.alt < 50 AND geo.lat <= 44.59639", true),
        ("id % 7 <= 3", true), // 1283 % 7 = 2
        ("id + 1 = 1284", true),
        ("id - 3 * 2 = 1277", true),
        ("-id = -1283", true),
        ("id / 2 > 641", true),
        (r#"schedule[0].flight = "AA679""#, true),
        (r#"schedule[1].flight = "AA679""#, false),
        ("schedule[5].flight IS MISSING", true),
        ("icao IS NULL", true),
        ("icao IS NOT NULL", false),
        ("nothing IS NOT NULL", true), // XDCR: a missing field is not null
        ("nothing IS NULL", false),
        ("nothing IS MISSING", true),
        ("icao IS NOT MISSING", true),
        ("EXISTS(country)", true),
        ("EXISTS(geo.alt)", true),
        ("EXISTS(nothing)", false),
        ("EXISTS(icao)", true),
        ("NOT EXISTS(nothing)", true),
        // SQL++ keywords are plain field names here.
        ("value = 7", true),
        ("order.total > 12", true),
        ("type = 'airport'", true),
        ("`a b`.c = \"spaced\"", true),
        ("`country` = \"France\"", true),
        // Parentheses and precedence: AND binds tighter than OR.
        ("country = \"Spain\" AND id = 1 OR id = 1283", true),
        ("country = \"Spain\" AND (id = 1 OR id = 1283)", false),
        ("(country = \"France\") AND (geo.alt = 49)", true),
        ("TRUE", true),
        ("FALSE", false),
        ("NOT FALSE", true),
        // Functions.
        ("ABS(-3) = 3", true),
        ("POW(2, 10) = 1024", true),
        ("ROUND(geo.lat) = 45", true),
        ("FLOOR(geo.lat) = 44", true),
        ("CEIL(order.total) = 13", true),
        ("SQRT(16) = 4", true),
        ("PI() > 3.14 AND PI() < 3.15", true),
        ("E() > 2.71", true),
        ("LOG(1000) = 3", true),
        ("DATE(date) >= DATE(\"2019-01-25\")", true),
        ("DATE(date) > DATE(\"2019-01-25\")", false),
        ("DATE(when) > DATE(\"2019-01-25T18:00:00Z\")", true),
        ("DATE(when) < DATE(\"2019-01-25T20:40:37+02:00\")", false),
        // Comparisons across types follow SQL++'s collation; against MISSING or NULL they
        // are not TRUE.
        ("country > 5", true),
        ("nothing = 1", false),
        ("NOT nothing = 1", false),
        ("icao = NULL", false),
        ("SQRT(country) = 1", false),
        ("REGEXP_CONTAINS(id, \"12\")", false),
    ];
    for (filter, want) in cases {
        assert_eq!(matches(filter, "airport_1283"), *want, "{filter}");
    }
}

#[test]
fn bare_regular_expressions_filter_keys() {
    let cases: &[(&str, &str, bool)] = &[
        ("^order::", "order::1", true),
        ("^order::", "x-order::1", false),
        ("airline|hotel", "unitedairline", true),
        ("airline|hotel", "marriothotel", true),
        ("airline|hotel", "airport", false),
        // A bare name is not a condition: it is a key regex.
        ("orders", "my-orders-1", true),
        ("orders", "order", false),
        ("a.b", "aXb", true),
        ("[0-9]+$", "k42", true),
    ];
    for (filter, key, want) in cases {
        let f = Filter::compile(filter).unwrap();
        assert!(f.reads().key_only(), "{filter}");
        let got = f.matches(&Subject {
            key: Some(key),
            ..Subject::default()
        });
        assert_eq!(got, *want, "{filter} on {key}");
    }
}

#[test]
fn what_a_filter_reads() {
    let reads = |f: &str| Filter::compile(f).unwrap().reads();
    assert_eq!(reads(r#"META().id = "k""#), Reads::default());
    assert!(reads(r#"REGEXP_CONTAINS(META().id, "^k") AND 1 = 1"#).key_only());
    assert_eq!(
        reads("country = 1"),
        Reads {
            body: true,
            xattrs: false
        }
    );
    assert_eq!(
        reads("META().xattrs.a = 1"),
        Reads {
            body: false,
            xattrs: true
        }
    );
}

#[test]
fn a_deletion_without_body_is_judged_by_key() {
    let f = Filter::compile(r#"REGEXP_CONTAINS(META().id, "^keep")"#).unwrap();
    let keep = Subject {
        key: Some("keep-1"),
        ..Subject::default()
    };
    assert!(f.matches(&keep));
    let body = Filter::compile("EXISTS(country)").unwrap();
    assert!(!body.matches(&keep));
    // A binary body or a non-UTF-8 key reads as MISSING.
    assert!(!f.matches(&Subject::default()));
}

#[test]
fn refusals() {
    let invalid = |f: &str| match Filter::compile(f) {
        Err(FilterError::Invalid { expression, regex }) => (expression, regex),
        other => panic!("{f:?}: {other:?}"),
    };
    // Neither an expression nor a regex.
    let (why, re) = invalid("country = (");
    assert!(why.contains("byte"), "{why}");
    assert!(!re.is_empty());
    invalid("((");
    invalid("UNKNOWN_FN(a) = 1 AND (");
    assert!(invalid("[").0.contains("expected"));
    // Things that are expressions but wrong.
    for bad in [
        "REGEXP_CONTAINS(country, \"(\")",
        "REGEXP_CONTAINS(META().id, \"^air(?!l)\")",
    ] {
        assert!(
            matches!(Filter::compile(bad), Err(FilterError::BadPattern { .. })),
            "{bad}"
        );
    }
    assert_eq!(Filter::compile("").unwrap_err(), FilterError::Empty);
    assert_eq!(Filter::compile("  ").unwrap_err(), FilterError::Empty);
    let long = format!("META().id = \"{}\"", "k".repeat(FILTER_TEXT_BYTES_MAX));
    assert_eq!(Filter::compile(&long).unwrap_err(), FilterError::TooLong);
    let deep = format!(
        "{}TRUE{}",
        "(".repeat(FILTER_DEPTH_MAX + 1),
        ")".repeat(FILTER_DEPTH_MAX + 1)
    );
    assert_eq!(Filter::compile(&deep).unwrap_err(), FilterError::TooDeep);
    let nots = format!("{}TRUE", "NOT ".repeat(FILTER_DEPTH_MAX + 1));
    assert_eq!(Filter::compile(&nots).unwrap_err(), FilterError::TooDeep);
    let chain = format!("a{} = 1", " + a".repeat(FILTER_DEPTH_MAX + 1));
    assert_eq!(Filter::compile(&chain).unwrap_err(), FilterError::TooDeep);
    let path = format!("a{} = 1", ".b".repeat(FILTER_DEPTH_MAX + 1));
    assert_eq!(Filter::compile(&path).unwrap_err(), FilterError::TooDeep);
    // A pattern whose compiled form is over the bound is refused, not built, as a key
    // regex or inside REGEXP_CONTAINS.
    let huge = "\\w{1000}\\w{1000}\\w{1000}";
    assert!(matches!(
        Filter::compile(huge),
        Err(FilterError::Invalid { .. })
    ));
    // In a string, a backslash is escaped (JSON's rules).
    let escaped = huge.replace('\\', "\\\\");
    let inside = format!("REGEXP_CONTAINS(META().id, \"{escaped}\")");
    assert!(
        matches!(
            Filter::compile(&inside),
            Err(FilterError::BadPattern { .. })
        ),
        "{inside}"
    );
    // Long AND/OR chains are flat: no depth.
    let ors = vec!["META().id = \"k\""; 200].join(" OR ");
    assert!(Filter::compile(&ors).is_ok());
}

#[test]
fn expressions_that_are_not_conditions_fall_back_to_regex_or_fail() {
    // `id + 1` is an expression but not a condition, and as a regex `+ 1` is fine.
    let f = Filter::compile("id + 1").unwrap();
    assert!(f.reads().key_only());
    // META().cas is not offered: not an expression; as a regex it is one.
    assert!(Filter::compile("META().cas = 1")
        .unwrap()
        .reads()
        .key_only());
    // Wrong argument counts make it a regex too, if they can.
    assert!(Filter::compile("POW(2) = 1").unwrap().reads().key_only());
}
