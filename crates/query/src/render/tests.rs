//! Round trips: rendering parses back to the same tree, for a table of statements and for
//! seeded random expressions.

use crate::ast::*;
use crate::functions::{AggFunc, Func};
use crate::{parse, parse_expression};

#[test]
fn statements_round_trip() {
    let statements = [
        "SELECT DISTINCT RAW LOWER(name) AS n FROM `travel-sample`.inventory.hotel WHERE country IN ['France', \"UK\"] ORDER BY n DESC LIMIT $lim OFFSET ?",
        "SELECT d.*, META(d).id, a[0].`b c`, x.[y] AS z FROM default:b AS d USE KEYS $keys WHERE ANY t IN d.tags SATISFIES t LIKE 'a\\\\_%' END",
        "SELECT t, COUNT(DISTINCT x), AVG(p) avg_p FROM b GROUP BY t, u HAVING SUM(p) > 10 ORDER BY t NULLS LAST, avg_p DESC NULLS FIRST",
        "SELECT CASE WHEN a IS NOT VALUED THEN -1 WHEN a BETWEEN 1 AND 2 THEN {'k': [a, MISSING]} END FROM b",
        "SELECT 'tab\\tquote\\'' || \"\\u00e9\\ud83d\\ude00\", 1.25e-7, 9223372036854775807, 18446744073709551616",
        "SELECT * FROM system:keyspaces",
        "EXPLAIN DELETE FROM b WHERE NOT (a = 1 OR b != 2) LIMIT 3 RETURNING RAW META().id",
        "UPSERT INTO s.c (KEY, VALUE) VALUES (UUID_NOT_A_FUNC, 1)",
        "UPDATE `b` SET a.b[1] = IFMISSINGORNULL(c, d, 0) UNSET e RETURNING a",
        "CREATE INDEX `i``x` ON `b`(LOWER(name) DESC INCLUDE MISSING, `a\\\\b`) WHERE t = 'x' USING GSI WITH {\"nodes\": [\"n1:8091\"], \"num_partition\": 8, \"x\": 1.5}",
        "CREATE PRIMARY INDEX IF NOT EXISTS `p` ON default:b.s.c USING GSI",
        "DROP PRIMARY INDEX `p` IF EXISTS ON b USING GSI",
        "BUILD INDEX ON default:`b`.`s`.`c`('a', `b`)",
        "SELECT `` FROM `b`",
        "PREPARE SELECT META().id FROM b WHERE email = $e",
        "PREPARE FORCE `q-1` AS UPDATE b SET n = n + 1 WHERE k = ?",
        "PREPARE p FROM EXPLAIN SELECT 1",
        "EXECUTE `q-1` USING [1, 'a']",
        "EXECUTE p USING {'$e': 'x@y'}",
        "EXECUTE 'p'",
    ];
    for s in statements {
        let Ok(stmt) = parse(s) else {
            // UUID_NOT_A_FUNC is a plain name there; everything here must parse.
            panic!("{s}: {:?}", parse(s));
        };
        let text = stmt.to_string();
        let again = parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(again, stmt, "{s}\n{text}");
        assert_eq!(again.to_string(), text);
    }
}

/// xorshift64*: a tiny seeded generator, enough to spread test cases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

fn gen_string(rng: &mut Rng) -> String {
    let alphabet = [
        'a', 'Z', '_', '0', ' ', '`', '\'', '"', '\\', '\n', '\u{1}', 'é', '😀', '%', '.', '$',
    ];
    (0..rng.below(6)).map(|_| *rng.pick(&alphabet)).collect()
}

fn gen_ident(rng: &mut Rng) -> Ident {
    if rng.below(3) == 0 {
        Ident::new(gen_string(rng))
    } else {
        Ident::new(*rng.pick(&["a", "b", "select", "type", "x1", "_"]))
    }
}

fn gen_literal(rng: &mut Rng) -> Literal {
    match rng.below(6) {
        0 => Literal::Missing,
        1 => Literal::Null,
        2 => Literal::Bool(rng.below(2) == 0),
        3 => Literal::Number((rng.next() >> rng.below(64)).min(i64::MAX as u64).into()),
        4 => {
            let f = f64::from_bits(rng.next() >> 2).abs();
            let f = if f.is_finite() { f } else { 0.5 };
            Literal::Number(serde_json::Number::from_f64(f).unwrap_or_else(|| 1.into()))
        }
        _ => Literal::String(gen_string(rng)),
    }
}

fn gen_expr(rng: &mut Rng, depth: usize) -> Expr {
    let b = |rng: &mut Rng| Box::new(gen_expr(rng, depth - 1));
    if depth == 0 {
        return match rng.below(4) {
            0 => Expr::Ident(gen_ident(rng)),
            1 => Expr::Param(if rng.below(2) == 0 {
                Param::Positional(1 + rng.below(20) as u32)
            } else {
                Param::Named((*rng.pick(&["x", "name", "_1"])).to_owned())
            }),
            2 => Expr::Meta {
                keyspace: (rng.below(2) == 0).then(|| gen_ident(rng)),
            },
            _ => Expr::Literal(gen_literal(rng)),
        };
    }
    let ops = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Mod,
        BinaryOp::Concat,
        BinaryOp::Eq,
        BinaryOp::Ne,
        BinaryOp::Lt,
        BinaryOp::Le,
        BinaryOp::Gt,
        BinaryOp::Ge,
        BinaryOp::And,
        BinaryOp::Or,
        BinaryOp::Like,
        BinaryOp::NotLike,
        BinaryOp::In,
        BinaryOp::NotIn,
    ];
    let tests = [
        IsTest::Null,
        IsTest::NotNull,
        IsTest::Missing,
        IsTest::NotMissing,
        IsTest::Valued,
        IsTest::NotValued,
    ];
    match rng.below(14) {
        0 => Expr::Array(
            (0..rng.below(3))
                .map(|_| gen_expr(rng, depth - 1))
                .collect(),
        ),
        1 => Expr::Object(
            (0..rng.below(3))
                .map(|_| (gen_expr(rng, depth - 1), gen_expr(rng, depth - 1)))
                .collect(),
        ),
        2 => Expr::Field {
            base: b(rng),
            name: gen_ident(rng),
        },
        3 => Expr::DynamicField {
            base: b(rng),
            name: b(rng),
        },
        4 => Expr::Element {
            base: b(rng),
            index: b(rng),
        },
        5 => Expr::Unary {
            op: if rng.below(2) == 0 {
                UnaryOp::Neg
            } else {
                UnaryOp::Not
            },
            operand: b(rng),
        },
        6 | 7 => Expr::Binary {
            op: *rng.pick(&ops),
            left: b(rng),
            right: b(rng),
        },
        8 => Expr::Between {
            expr: b(rng),
            low: b(rng),
            high: b(rng),
            negated: rng.below(2) == 0,
        },
        9 => Expr::Is {
            expr: b(rng),
            test: *rng.pick(&tests),
        },
        10 => Expr::Case {
            operand: (rng.below(2) == 0).then(|| b(rng)),
            whens: (0..1 + rng.below(2))
                .map(|_| WhenThen {
                    when: gen_expr(rng, depth - 1),
                    then: gen_expr(rng, depth - 1),
                })
                .collect(),
            otherwise: (rng.below(2) == 0).then(|| b(rng)),
        },
        11 => {
            let funcs: Vec<Func> = Func::all().collect();
            let func = *rng.pick(&funcs);
            let (min, max) = func.arity();
            let n = min + rng.below(max.min(min + 2) - min + 1);
            Expr::Call {
                func,
                args: (0..n).map(|_| gen_expr(rng, depth - 1)).collect(),
            }
        }
        12 => {
            let func = *rng.pick(&AggFunc::ALL);
            let star = func == AggFunc::Count && rng.below(3) == 0;
            Expr::Aggregate {
                func,
                distinct: !star && rng.below(2) == 0,
                arg: (!star).then(|| b(rng)),
            }
        }
        _ => Expr::Collection {
            quantifier: *rng.pick(&[Quantifier::Any, Quantifier::Every, Quantifier::AnyAndEvery]),
            var: gen_ident(rng),
            source: b(rng),
            satisfies: b(rng),
        },
    }
}

#[test]
fn random_expressions_round_trip() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    for i in 0..3000 {
        let e = gen_expr(&mut rng, 1 + i % 5);
        let text = e.to_string();
        let back = parse_expression(&text).unwrap_or_else(|err| panic!("case {i}: {text}\n{err}"));
        assert_eq!(back, e, "case {i}: {text}");
        // As a projection term, too, where a following alias or `.*` must not confuse it.
        let stmt = format!("SELECT {text} AS `v`, 1 FROM b");
        let parsed = parse(&stmt).unwrap_or_else(|err| panic!("case {i}: {stmt}\n{err}"));
        assert_eq!(parse(&parsed.to_string()).ok(), Some(parsed), "case {i}");
    }
}
