//! Formalization, as Couchbase's formalizer does it with one keyspace in FROM: a free name
//! `x` means the field `alias.x`. Afterwards two spellings of one path (`name` and
//! `b.name`) are the same tree, which is what matching GROUP BY keys needs.

use crate::ast::{Expr, Ident, WhenThen};

/// `expr` with every name that is neither the keyspace alias nor in `bound` (variables,
/// projection aliases) rewritten as a field of the alias. Without FROM, names stay.
pub(crate) fn formalize(expr: &Expr, alias: Option<&Ident>, bound: &[Ident]) -> Expr {
    let f = |e: &Expr| formalize(e, alias, bound);
    let bx = |e: &Expr| Box::new(f(e));
    match expr {
        Expr::Ident(name) => match alias {
            Some(a) if a != name && !bound.contains(name) => Expr::Field {
                base: Box::new(Expr::Ident(a.clone())),
                name: name.clone(),
            },
            _ => expr.clone(),
        },
        Expr::Literal(_) | Expr::Param(_) | Expr::Meta { .. } => expr.clone(),
        Expr::Array(items) => Expr::Array(items.iter().map(f).collect()),
        Expr::Object(pairs) => Expr::Object(pairs.iter().map(|(k, v)| (f(k), f(v))).collect()),
        Expr::Field { base, name } => Expr::Field {
            base: bx(base),
            name: name.clone(),
        },
        Expr::DynamicField { base, name } => Expr::DynamicField {
            base: bx(base),
            name: bx(name),
        },
        Expr::Element { base, index } => Expr::Element {
            base: bx(base),
            index: bx(index),
        },
        Expr::Unary { op, operand } => Expr::Unary {
            op: *op,
            operand: bx(operand),
        },
        Expr::Binary { op, left, right } => Expr::Binary {
            op: *op,
            left: bx(left),
            right: bx(right),
        },
        Expr::Between {
            expr,
            low,
            high,
            negated,
        } => Expr::Between {
            expr: bx(expr),
            low: bx(low),
            high: bx(high),
            negated: *negated,
        },
        Expr::Is { expr, test } => Expr::Is {
            expr: bx(expr),
            test: *test,
        },
        Expr::Case {
            operand,
            whens,
            otherwise,
        } => Expr::Case {
            operand: operand.as_deref().map(bx),
            whens: whens
                .iter()
                .map(|w| WhenThen {
                    when: f(&w.when),
                    then: f(&w.then),
                })
                .collect(),
            otherwise: otherwise.as_deref().map(bx),
        },
        Expr::Call { func, args } => Expr::Call {
            func: *func,
            args: args.iter().map(f).collect(),
        },
        Expr::Aggregate {
            func,
            distinct,
            arg,
        } => Expr::Aggregate {
            func: *func,
            distinct: *distinct,
            arg: arg.as_deref().map(bx),
        },
        Expr::Collection {
            quantifier,
            var,
            source,
            satisfies,
        } => {
            let mut inner = bound.to_vec();
            inner.push(var.clone());
            Expr::Collection {
                quantifier: *quantifier,
                var: var.clone(),
                source: bx(source),
                satisfies: Box::new(formalize(satisfies, alias, &inner)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_expression;

    fn formal(text: &str) -> String {
        formalize(
            &parse_expression(text).unwrap(),
            Some(&Ident::new("b")),
            &[Ident::new("y")],
        )
        .to_string()
    }

    #[test]
    fn free_names_become_fields_of_the_alias() {
        assert_eq!(formal("name"), "`b`.`name`");
        assert_eq!(formal("b.name"), "`b`.`name`");
        assert_eq!(formal("y"), "`y`");
        assert_eq!(formal("a.c[0]"), "`b`.`a`.`c`[0]");
        assert_eq!(
            formal("ANY v IN tags SATISFIES v = x END"),
            "ANY `v` IN `b`.`tags` SATISFIES (`v` = `b`.`x`) END"
        );
    }
}
