//! Parser table tests: statements to trees and canonical renderings, precedence, keyspace
//! forms, DML and DDL. Errors and limits are in `error_tests`.

use super::*;
use crate::ast::*;

fn render(s: &str) -> String {
    match parse(s) {
        Ok(stmt) => stmt.to_string(),
        Err(e) => panic!("{s}: {e}"),
    }
}

fn err(s: &str) -> String {
    match parse(s) {
        Ok(stmt) => panic!("{s} parsed as {stmt}"),
        Err(e) => {
            assert_eq!(e.code(), 3000, "{s}: {e}");
            e.to_string()
        }
    }
}

/// The rendering of a one-term `SELECT expr`.
fn expr(s: &str) -> String {
    render(&format!("SELECT {s}"))
        .trim_start_matches("SELECT ")
        .to_owned()
}

#[test]
fn operator_precedence_follows_couchbase() {
    let cases = [
        ("1 + 2 * 3", "(1 + (2 * 3))"),
        ("(1 + 2) * 3", "((1 + 2) * 3)"),
        ("1 - 2 - 3", "((1 - 2) - 3)"),
        ("a AND b OR c AND d", "((`a` AND `b`) OR (`c` AND `d`))"),
        ("NOT a = b", "(NOT (`a` = `b`))"),
        ("NOT NOT a", "(NOT (NOT `a`))"),
        ("-a.b * 2", "((-`a`.`b`) * 2)"),
        ("- -1", "(-(-1))"),
        ("a || b + c", "(`a` || (`b` + `c`))"),
        ("a < b = c", "((`a` < `b`) = `c`)"),
        ("a = b < c", "(`a` = (`b` < `c`))"),
        ("a = b IS NULL", "(`a` = (`b` IS NULL))"),
        ("a + b IS NOT MISSING", "((`a` + `b`) IS NOT MISSING)"),
        ("a IS NULL IS NULL", "((`a` IS NULL) IS NULL)"),
        ("a IS UNKNOWN", "(`a` IS NOT VALUED)"),
        ("a IS NOT KNOWN", "(`a` IS NOT VALUED)"),
        ("a IS NOT UNKNOWN", "(`a` IS VALUED)"),
        ("a BETWEEN 1 AND 2 AND b", "((`a` BETWEEN 1 AND 2) AND `b`)"),
        (
            "a NOT BETWEEN b + 1 AND c",
            "(`a` NOT BETWEEN (`b` + 1) AND `c`)",
        ),
        ("a LIKE 'x%' = TRUE", "((`a` LIKE \"x%\") = TRUE)"),
        // yacc decides at the NOT token, which binds as loosely as prefix NOT.
        ("a = b NOT IN c", "((`a` = `b`) NOT IN `c`)"),
        ("a AND b NOT LIKE c", "(`a` AND (`b` NOT LIKE `c`))"),
        ("a == b", "(`a` = `b`)"),
        ("a <> b", "(`a` != `b`)"),
        (
            "x IN [1, 2] OR y NOT IN $arr",
            "((`x` IN [1, 2]) OR (`y` NOT IN $arr))",
        ),
    ];
    for (input, want) in cases {
        assert_eq!(expr(input), want, "{input}");
    }
}

#[test]
fn primaries() {
    let cases = [
        ("'it''s'", "\"it's\""),
        ("\"q\\\"\\n\"", "\"q\\\"\\n\""),
        ("1.5e3", "1500.0"),
        ("TRUE, false, NuLl, MISSING", "TRUE, FALSE, NULL, MISSING"),
        ("[1, [], {}]", "[1, [], {}]"),
        ("{\"a\": 1, 'b': [x]}", "{\"a\": 1, \"b\": [`x`]}"),
        ("{a, b.c AS d}", "{\"a\": `a`, \"d\": `b`.`c`}"),
        ("a[0].b[-1]", "`a`[0].`b`[(-1)]"),
        ("a.[b || 'c']", "`a`.[(`b` || \"c\")]"),
        ("`we``ird`.`a.b`", "`we``ird`.`a.b`"),
        ("type, `user`.`default`", "`type`, `user`.`default`"),
        ("$1, ?, ?, $name, @other", "$1, $1, $2, $name, $other"),
        (
            "CASE WHEN a THEN 1 ELSE 2 END",
            "CASE WHEN `a` THEN 1 ELSE 2 END",
        ),
        (
            "CASE a WHEN 1 THEN 'x' WHEN 2 THEN 'y' END",
            "CASE `a` WHEN 1 THEN \"x\" WHEN 2 THEN \"y\" END",
        ),
        (
            "ANY v IN a SATISFIES v > 1 END",
            "ANY `v` IN `a` SATISFIES (`v` > 1) END",
        ),
        (
            "SOME v IN a SATISFIES v END",
            "ANY `v` IN `a` SATISFIES `v` END",
        ),
        (
            "EVERY v IN a SATISFIES v END",
            "EVERY `v` IN `a` SATISFIES `v` END",
        ),
        (
            "ANY AND EVERY v IN a SATISFIES v END",
            "ANY AND EVERY `v` IN `a` SATISFIES `v` END",
        ),
        (
            "lower(x), Type(x), tostr(1)",
            "LOWER(`x`), TYPE(`x`), TO_STRING(1)",
        ),
        (
            "count(*), COUNT(DISTINCT x), sum(ALL x), array_agg(x)",
            "COUNT(*), COUNT(DISTINCT `x`), SUM(`x`), ARRAY_AGG(`x`)",
        ),
        (
            "META().id, meta(d).cas, META(`d`).expiration",
            "META().`id`, META(`d`).`cas`, META(`d`).`expiration`",
        ),
        ("IFMISSING(a, b, c, d)", "IFMISSING(`a`, `b`, `c`, `d`)"),
    ];
    for (input, want) in cases {
        assert_eq!(expr(input), want, "{input}");
    }
}

#[test]
fn select_clauses() {
    let cases = [
        (
            "select distinct raw name from `travel-sample` where type = 'hotel' order by name limit 10 offset 5;",
            "SELECT DISTINCT RAW `name` FROM `travel-sample` WHERE (`type` = \"hotel\") ORDER BY `name` LIMIT 10 OFFSET 5",
        ),
        ("SELECT ELEMENT x FROM b", "SELECT RAW `x` FROM `b`"),
        ("SELECT VALUE x v FROM b", "SELECT RAW `x` AS `v` FROM `b`"),
        ("SELECT ALL *, d.*, x y FROM b d", "SELECT *, `d`.*, `x` AS `y` FROM `b` AS `d`"),
        ("SELECT (a + b).* FROM b", "SELECT (`a` + `b`).* FROM `b`"),
        ("SELECT * FROM b USE KEYS ['a', \"b\"]", "SELECT * FROM `b` USE KEYS [\"a\", \"b\"]"),
        ("SELECT * FROM b USE PRIMARY KEYS $1", "SELECT * FROM `b` USE KEYS $1"),
        (
            "SELECT t, COUNT(*) AS n FROM b GROUP BY t HAVING COUNT(*) > 1 ORDER BY n DESC NULLS FIRST, t NULLS LAST",
            "SELECT `t`, COUNT(*) AS `n` FROM `b` GROUP BY `t` HAVING (COUNT(*) > 1) ORDER BY `n` DESC NULLS FIRST, `t` NULLS LAST",
        ),
        ("SELECT 1 OFFSET 2 LIMIT 3", "SELECT 1 LIMIT 3 OFFSET 2"),
        ("SELECT x FROM b -- trailing\n /* block */ ;;", "SELECT `x` FROM `b`"),
        ("EXPLAIN SELECT 1", "EXPLAIN SELECT 1"),
        ("SELECT /*+ INDEX(b idx) */ x FROM b", "SELECT `x` FROM `b`"),
    ];
    for (input, want) in cases {
        assert_eq!(render(input), want, "{input}");
    }
}

#[test]
fn keyspaces() {
    let ks = |s: &str| match parse(&format!("SELECT * FROM {s}")) {
        Ok(Statement::Select(Select { from: Some(f), .. })) => (f.keyspace, f.alias),
        other => panic!("{s}: {other:?}"),
    };
    let id = Ident::new;
    assert_eq!(
        ks("default:b"),
        (
            KeyspaceRef::Bucket {
                namespace: Some(Namespace::Default),
                bucket: id("b")
            },
            None
        )
    );
    assert_eq!(
        ks("system:indexes AS idx"),
        (
            KeyspaceRef::Bucket {
                namespace: Some(Namespace::System),
                bucket: id("indexes")
            },
            Some(id("idx"))
        )
    );
    assert_eq!(
        ks("`default`:`b-1`.`s`.c x"),
        (
            KeyspaceRef::Collection {
                namespace: Some(Namespace::Default),
                bucket: id("b-1"),
                scope: id("s"),
                collection: id("c")
            },
            Some(id("x"))
        )
    );
    assert_eq!(
        ks("s.c"),
        (
            KeyspaceRef::Relative {
                scope: id("s"),
                collection: id("c")
            },
            None
        )
    );
    assert_eq!(ks("b.s.c").0.default_alias(), &id("c"));
    // Namespaces are looked up case-sensitively; `DEFAULT:b` is no namespace.
    assert!(parse("SELECT * FROM DEFAULT:b").is_err());
    assert!(parse("SELECT * FROM nope:b").is_err());
    assert!(parse("SELECT * FROM default:b.s").is_err());
}

#[test]
fn dml() {
    let cases = [
        (
            "INSERT INTO b (KEY, VALUE) VALUES ('k1', {'a': 1}), ('k2', {'a': 2}) RETURNING META().id",
            "INSERT INTO `b` (KEY, VALUE) VALUES (\"k1\", {\"a\": 1}), (\"k2\", {\"a\": 2}) RETURNING META().`id`",
        ),
        (
            "upsert into default:b.s.c as x values ($k, $v), values ('a', 1) returning raw x",
            "UPSERT INTO default:`b`.`s`.`c` AS `x` (KEY, VALUE) VALUES ($k, $v), (\"a\", 1) RETURNING RAW `x`",
        ),
        ("INSERT INTO b (PRIMARY KEY, VALUE) VALUES (1, 2)", "INSERT INTO `b` (KEY, VALUE) VALUES (1, 2)"),
        (
            "UPDATE b AS d USE KEYS 'k' SET d.a = 1, b[0].c = 'x', x.[f] = 2 UNSET d.old WHERE d.t = 1 LIMIT 5 RETURNING d.*",
            "UPDATE `b` AS `d` USE KEYS \"k\" SET `d`.`a` = 1, `b`[0].`c` = \"x\", `x`.[`f`] = 2 UNSET `d`.`old` WHERE (`d`.`t` = 1) LIMIT 5 RETURNING `d`.*",
        ),
        ("UPDATE b UNSET a, c", "UPDATE `b` UNSET `a`, `c`"),
        (
            "DELETE FROM b d USE KEYS ['a'] WHERE d.x IS MISSING LIMIT 1 RETURNING *",
            "DELETE FROM `b` AS `d` USE KEYS [\"a\"] WHERE (`d`.`x` IS MISSING) LIMIT 1 RETURNING *",
        ),
    ];
    for (input, want) in cases {
        assert_eq!(render(input), want, "{input}");
    }
}

#[test]
fn ddl() {
    let cases = [
        (
            "CREATE INDEX ix ON b(a, b.c DESC, d INCLUDE MISSING ASC) WHERE type = 'x' USING GSI WITH {'defer_build': true, 'num_replica': -1}",
            "CREATE INDEX `ix` ON `b`(`a`, `b`.`c` DESC, `d` INCLUDE MISSING) WHERE (`type` = \"x\") USING GSI WITH {\"defer_build\":true,\"num_replica\":-1}",
        ),
        ("CREATE INDEX IF NOT EXISTS ix ON s.c(a)", "CREATE INDEX `ix` IF NOT EXISTS ON `s`.`c`(`a`)"),
        ("CREATE INDEX ix IF NOT EXISTS ON b(a)", "CREATE INDEX `ix` IF NOT EXISTS ON `b`(`a`)"),
        ("CREATE PRIMARY INDEX ON b", "CREATE PRIMARY INDEX ON `b`"),
        ("CREATE PRIMARY INDEX IF NOT EXISTS ON b USING GSI", "CREATE PRIMARY INDEX IF NOT EXISTS ON `b` USING GSI"),
        ("CREATE PRIMARY INDEX `#primary` ON default:b WITH {}", "CREATE PRIMARY INDEX `#primary` ON default:`b` WITH {}"),
        ("DROP INDEX b.ix", "DROP INDEX `ix` ON `b`"),
        ("DROP INDEX IF EXISTS b.ix USING GSI", "DROP INDEX `ix` IF EXISTS ON `b` USING GSI"),
        ("DROP INDEX b.ix IF EXISTS", "DROP INDEX `ix` IF EXISTS ON `b`"),
        ("DROP INDEX default:b.s.c.ix", "DROP INDEX `ix` ON default:`b`.`s`.`c`"),
        ("DROP INDEX ix ON b.s.c", "DROP INDEX `ix` ON `b`.`s`.`c`"),
        ("DROP INDEX ix IF EXISTS ON b", "DROP INDEX `ix` IF EXISTS ON `b`"),
        ("DROP INDEX IF EXISTS ix ON b", "DROP INDEX `ix` IF EXISTS ON `b`"),
        ("DROP PRIMARY INDEX ON b", "DROP PRIMARY INDEX ON `b`"),
        ("DROP PRIMARY INDEX IF EXISTS ON b USING GSI", "DROP PRIMARY INDEX IF EXISTS ON `b` USING GSI"),
        ("DROP PRIMARY INDEX p IF EXISTS ON b", "DROP PRIMARY INDEX `p` IF EXISTS ON `b`"),
        ("BUILD INDEX ON b(ix1, `ix2`, 'ix3') USING GSI", "BUILD INDEX ON `b`(`ix1`, `ix2`, `ix3`) USING GSI"),
    ];
    for (input, want) in cases {
        assert_eq!(render(input), want, "{input}");
    }
    assert_eq!(
        parse("DROP INDEX b.ix").unwrap(),
        parse("DROP INDEX ix ON b").unwrap()
    );
    assert!(err("CREATE INDEX ix ON b(a) WITH {'a': x}")
        .starts_with("WITH value must be static (near line 1, column 30)"));
    assert!(parse("CREATE INDEX ix ON b(a) USING VIEW").is_err());
    assert!(parse("CREATE INDEX ix ON b(a DESC ASC)").is_err());
}
