//! Parser errors: Couchbase's wording and positions, checks made while parsing, refused
//! forms, and the size and nesting limits.

use super::*;

fn err(s: &str) -> String {
    match parse(s) {
        Ok(stmt) => panic!("{s} parsed as {stmt}"),
        Err(e) => {
            assert_eq!(e.code(), 3000, "{s}: {e}");
            e.to_string()
        }
    }
}

#[test]
fn errors_match_couchbase_test_suite() {
    // Expected texts from couchbase/query's test cases (test/*/cases).
    assert_eq!(
        err("SELECT details.* AS D FROM default:catalog ORDER BY D"),
        "syntax error - line 1, column 18, near 'SELECT details.* ', at: AS (reserved word)"
    );
    assert_eq!(
        err("SELECT lineItems.* AS D FROM orders ORDER BY D"),
        "syntax error - line 1, column 20, near 'SELECT lineItems.* ', at: AS (reserved word)"
    );
    assert_eq!(
        err("this isn't a query"),
        "syntax error - line 1, column 6, near 'this ', at: isn"
    );
    assert_eq!(err("SELECT * FROM"), "syntax error - at end of input");
    assert_eq!(
        err("SELECT catalog.title, C.title, C.type FROM default:catalog AS C ORDER BY catalog.title"),
        "Duplicate result alias 'title' (near line 1, column 25)."
    );
    assert_eq!(
        err("SELECT title, details.format, details.title, title  FROM default:catalog WHERE pricing.list > 300"),
        "Duplicate result alias 'title' (near line 1, column 39)."
    );
}

#[test]
fn error_positions_and_context() {
    assert_eq!(
        err("SELECT FROM b"),
        "syntax error - line 1, column 8, near 'SELECT ', at: FROM (reserved word)"
    );
    assert_eq!(
        err("SLECT name"),
        "syntax error - line 1, column 7, near 'SLECT ', at: name"
    );
    assert_eq!(
        err("  FROM b"),
        "syntax error - line 1, column 1, at: FROM (reserved word)"
    );
    assert_eq!(
        err("SELECT a = b = c"),
        "syntax error - line 1, column 14, near 'SELECT a = b ', at: ="
    );
    assert_eq!(
        err("SELECT a,\n  b c d"),
        "syntax error - line 2, column 7, near '...b c ', at: d"
    );
    assert_eq!(
        err("SELECT aaaaaaaaaa + bbbbbbbbbb + cccccccccc FROM"),
        "syntax error - at end of input"
    );
    assert_eq!(
        err("SELECT aaaaaaaaaa + bbbbbbbbbb + cccccccccc )"),
        "syntax error - line 1, column 45, near '...bbbbbb + cccccccccc ', at: )"
    );
    assert_eq!(
        err("SELECT 'abc"),
        "syntax error: invalid quoted string - missing closing quote - line 1, column 8, near 'SELECT ', at: 'abc"
    );
    assert_eq!(
        err("SELECT \"a\\qb\""),
        "syntax error: invalid quoted string - invalid escape sequence - line 1, column 8, near 'SELECT ', at: \"a\\q"
    );
    assert_eq!(
        err("SELECT 12ab"),
        "syntax error: invalid number - line 1, column 8, near 'SELECT ', at: 12ab"
    );
    assert_eq!(
        err("SELECT * FROM ` b`"),
        "Invalid identifier ' b' (near line 1, column 15)"
    );
    assert_eq!(
        err("SELECT a.* + 1 FROM b"),
        "syntax error - line 1, column 12, near 'SELECT a.* ', at: +"
    );
    assert_eq!(
        err("SELECT 1 + a.* FROM b"),
        "syntax error - line 1, column 14, near 'SELECT 1 + a.', at: *"
    );
    assert_eq!(
        err("SELECT a NOT b"),
        "syntax error - line 1, column 14, near 'SELECT a NOT ', at: b"
    );
    assert_eq!(
        err("SELECT x BETWEEN NOT a AND b"),
        "syntax error - line 1, column 18, near 'SELECT x BETWEEN ', at: NOT (reserved word)"
    );
    assert_eq!(
        err("EXPLAIN EXPLAIN SELECT 1"),
        "syntax error - line 1, column 9, near 'EXPLAIN ', at: EXPLAIN (reserved word)"
    );
    assert_eq!(err(""), "syntax error - at end of input");
    assert_eq!(parse("1 + 1").unwrap_err(), QueryError::InvalidInput);
    assert_eq!(parse("1 + 1").unwrap_err().code(), 3083);
}

#[test]
fn functions_are_checked_while_parsing() {
    assert_eq!(
        err("SELECT foo(1)"),
        "Invalid function foo (resolving to default:foo) (near line 1, column 8)"
    );
    assert_eq!(
        err("SELECT LOWER()"),
        "Number of arguments to function LOWER must be 1 (near line 1, column 14)."
    );
    assert_eq!(
        err("SELECT substr('a')"),
        "Number of arguments to function substr must be between 2 and 3 (near line 1, column 15)."
    );
    assert_eq!(
        err("SELECT IFNULL(1)"),
        "Number of arguments to function IFNULL must be between 2 and 32767 (near line 1, column 15)."
    );
    assert_eq!(
        err("SELECT COUNT(a, b)"),
        "Number of arguments to function COUNT must be 1 (near line 1, column 14)."
    );
    assert!(parse("SELECT SUM(*)").is_err());
    assert!(parse("SELECT META(1)").is_err());
}

#[test]
fn unsupported_forms_fail_at_their_first_token() {
    let cases = [
        ("SELECT * FROM a JOIN b ON a.x = b.y", "JOIN"),
        ("SELECT (SELECT 1)", "SELECT"),
        ("SELECT a[1:2]", ":"),
        ("SELECT ANY v IN a, w IN b SATISFIES v END", ","),
        ("SELECT x FROM b GROUP BY x LETTING y = 1", "LETTING"),
        ("SELECT a LIKE b ESCAPE '!'", "ESCAPE"),
        ("INSERT INTO b (KEY k, VALUE v) SELECT 1", "k"),
        // A prepared statement prepares or executes no other.
        ("PREPARE PREPARE SELECT 1", "PREPARE"),
        ("PREPARE p AS EXECUTE q", "EXECUTE"),
        ("EXPLAIN PREPARE SELECT 1", "PREPARE"),
        ("PREPARE p SELECT 1", "p"),
        ("EXECUTE USING [1]", "USING"),
    ];
    for (input, at) in cases {
        let e = err(input);
        assert!(e.contains(&format!("at: {at}")), "{input}: {e}");
    }
}

#[test]
fn nesting_is_bounded() {
    // Parentheses recurse without deepening the tree: bounded at twice the tree limit.
    let parens = |n: usize| format!("SELECT {}1{}", "(".repeat(n), ")".repeat(n));
    assert!(parse(&parens(MAX_RECURSION)).is_ok());
    assert!(err(&parens(MAX_RECURSION + 1)).contains("nested too deeply"));
    // Chains deepen the tree without recursion: they are bounded too.
    let path = |n: usize| format!("SELECT a{}", ".b".repeat(n));
    assert!(parse(&path(MAX_NESTING - 1)).is_ok());
    assert!(err(&path(MAX_NESTING)).contains("nested deeper"));
    let sum = |n: usize| format!("SELECT 1{}", " + 1".repeat(n));
    assert!(parse(&sum(MAX_NESTING - 1)).is_ok());
    assert!(err(&sum(MAX_NESTING)).contains("nested deeper"));
    assert!(err(&format!("SELECT {}1", "NOT ".repeat(200))).contains("nested"));
    assert!(err(&format!("SELECT {}1", "[".repeat(100_000))).contains("nested"));
    assert!(err(&format!("SELECT {}", "- ".repeat(100_000))).contains("nested"));
    assert!(err(&format!("SELECT {}", "(".repeat(100_000))).contains("nested too deeply"));
}

#[test]
fn length_is_bounded() {
    let long = format!("SELECT '{}'", "x".repeat(MAX_STATEMENT_BYTES));
    assert!(err(&long).contains("longer than"));
    let ok = format!("SELECT '{}'", "x".repeat(MAX_STATEMENT_BYTES - 20));
    assert!(parse(&ok).is_ok());
}

#[test]
fn deepest_input_fits_a_small_stack() {
    // Half the default test-thread stack: the recursion limit leaves a wide margin.
    let worst = [
        format!(
            "SELECT {}1{}",
            "(".repeat(MAX_RECURSION),
            ")".repeat(MAX_RECURSION)
        ),
        format!(
            "SELECT {}1{}",
            "[".repeat(MAX_RECURSION),
            "]".repeat(MAX_RECURSION)
        ),
        format!(
            "SELECT {}1{}",
            "LOWER(".repeat(MAX_RECURSION),
            ")".repeat(MAX_RECURSION)
        ),
        format!(
            "SELECT {}1{}",
            "a[".repeat(MAX_RECURSION / 2),
            "]".repeat(MAX_RECURSION / 2)
        ),
        format!("SELECT {}TRUE", "NOT (".repeat(MAX_NESTING - 1)) + &")".repeat(MAX_NESTING - 1),
        format!("SELECT {}1", "{'a': ".repeat(MAX_RECURSION)) + &"}".repeat(MAX_RECURSION),
    ];
    let handle = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || worst.iter().map(|s| parse(s).is_ok()).collect::<Vec<_>>())
        .unwrap();
    let results = handle.join().unwrap();
    assert_eq!(results.len(), 6);
}
