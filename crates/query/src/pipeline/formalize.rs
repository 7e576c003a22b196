//! Formalization, as Couchbase's formalizer does it with one keyspace in FROM: a free name
//! `x` means the field `alias.x`. Afterwards two spellings of one path (`name` and
//! `b.name`) are the same tree, which is what matching GROUP BY keys needs.

use crate::ast::{Expr, Ident};

/// `expr` with every name that is neither the keyspace alias nor in `bound` (variables,
/// projection aliases) rewritten as a field of the alias. Without FROM, names stay.
pub(crate) fn formalize(expr: &Expr, alias: Option<&Ident>, bound: &[Ident]) -> Expr {
    match (expr, alias) {
        (Expr::Ident(name), Some(a)) if a != name && !bound.contains(name) => Expr::Field {
            base: Box::new(Expr::Ident(a.clone())),
            name: name.clone(),
        },
        _ => expr.map_children(bound, |child, scope| formalize(child, alias, scope)),
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
