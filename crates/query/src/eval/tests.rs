//! Evaluator tests: the MISSING/NULL truth tables of Couchbase's documentation, operators,
//! names, parameters and META().

use serde_json::json;

use super::*;
use crate::parse_expression;

fn ev(text: &str) -> Value {
    let e = parse_expression(text).unwrap_or_else(|err| panic!("{text}: {err}"));
    evaluate(&e, &Params::new()).unwrap_or_else(|err| panic!("{text}: {err}"))
}

/// The value as text: `MISSING` or its JSON.
fn show(v: &Value) -> String {
    v.as_json()
        .map_or_else(|| "MISSING".to_owned(), ToString::to_string)
}

fn check(cases: &[(&str, &str)]) {
    for (text, want) in cases {
        assert_eq!(show(&ev(text)), *want, "{text}");
    }
}

#[test]
fn and_or_not_truth_tables() {
    // Couchbase's docs, Logical Operators: rows x columns of TRUE, FALSE, NULL, MISSING.
    let values = ["TRUE", "FALSE", "NULL", "MISSING"];
    let and = [
        ["true", "false", "null", "MISSING"],
        ["false", "false", "false", "false"],
        ["null", "false", "null", "MISSING"],
        ["MISSING", "false", "MISSING", "MISSING"],
    ];
    let or = [
        ["true", "true", "true", "true"],
        ["true", "false", "null", "MISSING"],
        ["true", "null", "null", "null"],
        ["true", "MISSING", "null", "MISSING"],
    ];
    for (i, a) in values.iter().enumerate() {
        for (j, b) in values.iter().enumerate() {
            assert_eq!(show(&ev(&format!("{a} AND {b}"))), and[i][j], "{a} AND {b}");
            assert_eq!(show(&ev(&format!("{a} OR {b}"))), or[i][j], "{a} OR {b}");
        }
    }
    check(&[
        ("NOT TRUE", "false"),
        ("NOT FALSE", "true"),
        ("NOT NULL", "null"),
        ("NOT MISSING", "MISSING"),
    ]);
    // Non-booleans by truthiness.
    check(&[
        ("NOT 0", "true"),
        ("NOT 'a'", "false"),
        ("[] OR {}", "false"),
        ("1 AND 'x'", "true"),
    ]);
}

#[test]
fn comparisons_with_missing_and_null() {
    check(&[
        ("MISSING = 1", "MISSING"),
        ("NULL = 1", "null"),
        ("NULL = MISSING", "MISSING"),
        ("NULL = NULL", "null"),
        ("1 = 1.0", "true"),
        ("1 = '1'", "false"),
        ("1 != '1'", "true"),
        ("1 < 'a'", "true"),
        ("'b' > 'a'", "true"),
        ("[1, 2] < [1, 3]", "true"),
        ("[1] < [1, 0]", "true"),
        ("{'a': 1} = {'a': 1.0}", "true"),
        ("[1, NULL] = [1, NULL]", "null"),
        ("FALSE < TRUE", "true"),
        ("NULL < 1", "null"),
        ("MISSING < NULL", "MISSING"),
        ("2 BETWEEN 1 AND 3", "true"),
        ("2 NOT BETWEEN 1 AND 3", "false"),
        ("NULL BETWEEN 1 AND 3", "null"),
        ("2 BETWEEN MISSING AND 3", "MISSING"),
        ("2 BETWEEN NULL AND 1", "null"),
    ]);
}

#[test]
fn is_tests() {
    // Couchbase's docs, Boolean Logic: "Comparing NULL and MISSING values".
    let values = ["1", "NULL", "MISSING"];
    let table = [
        ("IS NULL", ["false", "true", "MISSING"]),
        ("IS NOT NULL", ["true", "false", "MISSING"]),
        ("IS MISSING", ["false", "false", "true"]),
        ("IS NOT MISSING", ["true", "true", "false"]),
        ("IS VALUED", ["true", "false", "false"]),
        ("IS NOT VALUED", ["false", "true", "true"]),
    ];
    for (test, results) in table {
        for (v, want) in values.iter().zip(results) {
            assert_eq!(show(&ev(&format!("{v} {test}"))), want, "{v} {test}");
        }
    }
}

#[test]
fn in_and_like() {
    check(&[
        ("1 IN [1, 2]", "true"),
        ("3 IN [1, 2]", "false"),
        ("3 IN [1, NULL]", "null"),
        ("1 IN [1, NULL]", "true"),
        ("NULL IN []", "false"),
        ("NULL IN [1]", "null"),
        ("MISSING IN [1]", "MISSING"),
        ("1 IN 'x'", "null"),
        ("3 NOT IN [1, 2]", "true"),
        ("'abc' LIKE 'a%'", "true"),
        ("'abc' LIKE 'a_'", "false"),
        ("'abc' NOT LIKE '%z%'", "true"),
        ("1 LIKE '1'", "null"),
        ("MISSING LIKE 'a'", "MISSING"),
    ]);
}

#[test]
fn arithmetic_and_strings() {
    check(&[
        ("1 + 2", "3"),
        ("7 / 2", "3.5"),
        ("6 / 3", "2"),
        ("1 / 0", "null"),
        ("7 % 3", "1"),
        ("-7 % 3", "-1"),
        ("7.5 % 2", "1.5"),
        ("9223372036854775807 + 1", "9.223372036854776e+18"),
        ("1 + '1'", "null"),
        ("1 + NULL", "null"),
        ("NULL + MISSING", "MISSING"),
        ("-'a'", "null"),
        ("-(-3)", "3"),
        ("'a' || 'b'", "\"ab\""),
        ("'a' || 1", "null"),
        ("'a' || MISSING", "MISSING"),
    ]);
}

#[test]
fn constructors_paths_case_and_quantifiers() {
    check(&[
        ("[1, MISSING, NULL]", "[1,null,null]"),
        ("{'a': 1, 'b': MISSING}", "{\"a\":1}"),
        ("{'a': 1, 2: 3}", "null"),
        ("{'a': {'b': [10, 20]}}.a.b[1]", "20"),
        ("[10, 20, 30][-1]", "30"),
        ("[10][5]", "MISSING"),
        ("[10][0.5]", "null"),
        ("{'a': 1}.b", "MISSING"),
        ("'x'.a", "MISSING"),
        ("{'ab': 1}.['a' || 'b']", "1"),
        ("CASE WHEN 1 = 2 THEN 'a' WHEN 2 = 2 THEN 'b' END", "\"b\""),
        ("CASE WHEN FALSE THEN 1 END", "null"),
        (
            "CASE 2 WHEN 1 THEN 'one' WHEN 2 THEN 'two' ELSE 'many' END",
            "\"two\"",
        ),
        ("ANY v IN [1, 2, 3] SATISFIES v > 2 END", "true"),
        ("ANY v IN [] SATISFIES TRUE END", "false"),
        ("EVERY v IN [] SATISFIES FALSE END", "true"),
        ("EVERY v IN [1, 2] SATISFIES v > 0 END", "true"),
        ("ANY AND EVERY v IN [] SATISFIES TRUE END", "false"),
        ("ANY AND EVERY v IN [1] SATISFIES v = 1 END", "true"),
        ("ANY v IN MISSING SATISFIES TRUE END", "MISSING"),
        ("ANY v IN 'abc' SATISFIES TRUE END", "null"),
        (
            "ANY v IN [[1], [2]] SATISFIES ANY w IN v SATISFIES w = 2 END END",
            "true",
        ),
    ]);
}

#[test]
fn names_meta_and_parameters() {
    let row = Row {
        key: "k1".into(),
        meta: DocMeta {
            cas: 42,
            expiration: 7,
            flags: 3,
            is_json: true,
        },
        doc: json!({"name": "n", "d": "field named like the alias", "tags": ["x"]}),
    };
    let params = Params::new()
        .with_positional([json!(10), json!("two")])
        .with_named("$who", json!("me"));
    let alias = Ident::new("d");
    let run = |text: &str| {
        let e = parse_expression(text).unwrap();
        evaluate_row(&e, &alias, &row, &params)
    };
    assert_eq!(run("name").unwrap(), Value::string("n"));
    assert_eq!(run("d.name").unwrap(), Value::string("n"));
    // The alias wins over a field of the same name.
    assert_eq!(
        run("d.d").unwrap(),
        Value::string("field named like the alias")
    );
    assert_eq!(run("nope").unwrap(), Value::Missing);
    assert_eq!(run("META().id").unwrap(), Value::string("k1"));
    assert_eq!(run("META(d).cas").unwrap(), Value::Json(json!(42)));
    assert_eq!(
        run("META(d)").unwrap(),
        Value::Json(json!({"cas": 42, "expiration": 7, "flags": 3, "id": "k1", "type": "json"}))
    );
    assert!(run("META(other)").is_err());
    assert_eq!(run("$1 + ?").unwrap(), Value::Json(json!(20)));
    assert_eq!(run("$2 || $who").unwrap(), Value::string("twome"));
    let unbound = run("$3").unwrap_err();
    assert_eq!(
        unbound,
        QueryError::UnboundPositionalParameter { position: 3 }
    );
    assert_eq!(unbound.code(), 5010);
    assert_eq!(unbound.to_string(), "No value for positional parameter $3.");
    assert_eq!(
        run("$nope").unwrap_err().to_string(),
        "No value for named parameter $nope."
    );
    // A variable shadows fields; the alias stays reachable.
    assert_eq!(
        run("ANY name IN tags SATISFIES name = 'x' END").unwrap(),
        Value::TRUE
    );
    assert!(run("COUNT(*)").is_err());
}

#[test]
fn use_keys() {
    let keys =
        |text: &str| evaluate_keys(&parse_expression(text).unwrap(), &Params::new()).unwrap();
    assert_eq!(keys("'a'"), vec!["a"]);
    assert_eq!(keys("['a', 1, 'b']"), vec!["a", "b"]);
    assert!(keys("1").is_empty());
}

#[test]
fn trees_at_the_nesting_limit_evaluate_and_render() {
    // The deepest trees the parser accepts, on a test thread's small stack.
    let nots = format!("{}TRUE", "NOT ".repeat(crate::MAX_NESTING - 1));
    assert_eq!(ev(&nots), Value::FALSE);
    let path = format!("{{'a': 1}}{}", ".a".repeat(crate::MAX_NESTING - 2));
    assert_eq!(ev(&path), Value::Missing);
    let sum = format!("1{}", " + 1".repeat(crate::MAX_NESTING - 1));
    assert_eq!(ev(&sum), Value::Json(json!(128)));
    // A right-nested chain renders with the most parentheses per level.
    let mut right = crate::ast::Expr::Literal(crate::ast::Literal::Bool(true));
    for _ in 1..crate::MAX_NESTING {
        right = crate::ast::Expr::binary(BinaryOp::And, crate::ast::Expr::ident("a"), right);
    }
    let right = right.to_string();
    assert_eq!(ev(&right), Value::Missing);
    for text in [nots, path, sum, right] {
        let e = parse_expression(&text).unwrap();
        assert_eq!(parse_expression(&e.to_string()).unwrap(), e);
    }
}

/// A row environment that holds nothing by reference: every path evaluates its base whole,
/// as before paths were read in place.
struct Whole<'a>(RowEnv<'a>);

impl Env for Whole<'_> {
    fn ident(&self, name: &Ident) -> Result<Value> {
        self.0.ident(name)
    }
    fn meta(&self, keyspace: Option<&Ident>) -> Result<Value> {
        self.0.meta(keyspace)
    }
    fn param(&self, p: &Param) -> Result<Value> {
        self.0.param(p)
    }
    fn aggregate(&self, expr: &Expr) -> Result<Value> {
        self.0.aggregate(expr)
    }
}

#[test]
fn paths_read_in_place_give_what_the_whole_value_gives() {
    let row = Row {
        key: "k\"1".into(),
        meta: DocMeta {
            cas: 9,
            expiration: 0,
            flags: 5,
            is_json: false,
        },
        doc: json!({
            "a": {"b": {"c": 1}, "n": null, "s": "str", "arr": [{"x": 1}, {"x": 2}]},
            "d": {"e": "the alias's namesake"},
            "num": 3,
        }),
    };
    let params = Params::new().with_named("f", json!("b"));
    let alias = Ident::new("d");
    let cases = [
        "d.a.b.c",
        "d.a.b",
        "d.a.n",
        "d.a.n.x",
        "d.a.s.x",
        "d.num.x",
        "d.nope",
        "d.nope.x",
        "a.b.c",
        "a.s",
        "d.d.e",
        "num.x",
        "nope.x",
        "META().id",
        "META(d).cas",
        "META().flags",
        "META().expiration",
        "META().type",
        "META().nope",
        "META(d).id.x",
        "d.a.[$f].c",
        "d.a.arr[1].x",
        "ANY v IN d.a.arr SATISFIES v.x = 2 END",
        "ANY a IN d.a.arr SATISFIES a.x = 1 END",
        "ANY v IN d.a.arr SATISFIES v.x.y IS MISSING END",
        "EVERY v IN d.a.arr SATISFIES v.x > 0 END",
    ];
    for text in cases {
        let e = parse_expression(text).unwrap_or_else(|err| panic!("{text}: {err}"));
        let in_place = eval(&e, &RowEnv::new(Some((&alias, &row)), &params));
        let whole = eval(&e, &Whole(RowEnv::new(Some((&alias, &row)), &params)));
        assert_eq!(in_place, whole, "{text}");
    }
    // A keyspace that is not the alias is the same error either way.
    let e = parse_expression("META(other).id").unwrap();
    let in_place = eval(&e, &RowEnv::new(Some((&alias, &row)), &params));
    let whole = eval(&e, &Whole(RowEnv::new(Some((&alias, &row)), &params)));
    assert!(in_place.is_err());
    assert_eq!(in_place, whole);
    // Without a row, META() and names are MISSING.
    let e = parse_expression("META().id").unwrap();
    assert_eq!(eval(&e, &RowEnv::new(None, &params)), Ok(Value::Missing));
}
