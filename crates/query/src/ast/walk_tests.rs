//! The walkers visit every child once, in `children()` order, with the right scope.

use std::collections::BTreeSet;
use std::ops::ControlFlow;

use super::{Expr, Ident};
use crate::parse::parse_expression;

/// One expression per variant, and per optional part where a variant has one.
const EVERY_VARIANT: &[&str] = &[
    "1",
    "[1, x]",
    "{'k': x, 'v': 2}",
    "x",
    "x.y",
    "x.[y]",
    "x[1]",
    "$1",
    "-x",
    "x + 1",
    "x NOT BETWEEN 1 AND 2",
    "x IS NOT MISSING",
    "CASE x WHEN 1 THEN 2 ELSE 3 END",
    "CASE WHEN x THEN 2 END",
    "LOWER(x)",
    "COUNT(*)",
    "SUM(DISTINCT x)",
    "META(x)",
    "ANY v IN x SATISFIES v = y END",
];

fn every_variant() -> Vec<Expr> {
    EVERY_VARIANT
        .iter()
        .map(|t| parse_expression(t).unwrap_or_else(|e| panic!("{t}: {e}")))
        .collect()
}

/// The variant's name; exhaustive, so a new variant fails to compile here until the list
/// above covers it.
fn variant(e: &Expr) -> &'static str {
    match e {
        Expr::Literal(_) => "Literal",
        Expr::Array(_) => "Array",
        Expr::Object(_) => "Object",
        Expr::Ident(_) => "Ident",
        Expr::Field { .. } => "Field",
        Expr::DynamicField { .. } => "DynamicField",
        Expr::Element { .. } => "Element",
        Expr::Param(_) => "Param",
        Expr::Unary { .. } => "Unary",
        Expr::Binary { .. } => "Binary",
        Expr::Between { .. } => "Between",
        Expr::Is { .. } => "Is",
        Expr::Case { .. } => "Case",
        Expr::Call { .. } => "Call",
        Expr::Aggregate { .. } => "Aggregate",
        Expr::Meta { .. } => "Meta",
        Expr::Collection { .. } => "Collection",
    }
}

#[test]
fn the_list_covers_every_variant() {
    let seen: BTreeSet<_> = every_variant().iter().map(variant).collect();
    assert_eq!(seen.len(), 17, "{seen:?}");
}

#[test]
fn every_child_is_visited_once_in_order() {
    for e in every_variant() {
        let expected: Vec<Expr> = e.children().into_iter().cloned().collect();

        let mut mapped = Vec::new();
        let same = e.map_children(&[], |c, _| {
            mapped.push(c.clone());
            c.clone()
        });
        assert_eq!(mapped, expected, "{e}");
        assert_eq!(same, e, "the identity rebuilds the same tree");

        let mut inspected = Vec::new();
        let flow = e.try_for_each_child(&[], |c, _| {
            inspected.push(c.clone());
            ControlFlow::<()>::Continue(())
        });
        assert!(flow.is_continue());
        assert_eq!(inspected, expected, "{e}");
    }
}

#[test]
fn each_child_is_replaced_in_its_own_place() {
    for e in every_variant() {
        let mut n = 0;
        let numbered = e.map_children(&[], |_, _| {
            n += 1;
            Expr::int(n)
        });
        let expected: Vec<Expr> = (1..=n).map(Expr::int).collect();
        let got: Vec<Expr> = numbered.children().into_iter().cloned().collect();
        assert_eq!(got, expected, "{e} became {numbered}");
    }
    let e = parse_expression("CASE x WHEN y THEN LOWER(z) END").unwrap();
    let marked = e.map_children(&[], |_, _| Expr::string("c"));
    assert_eq!(marked.to_string(), "CASE \"c\" WHEN \"c\" THEN \"c\" END");
}

#[test]
fn satisfies_sees_the_variable_and_source_does_not() {
    let e = parse_expression("ANY v IN x SATISFIES v = y END").unwrap();
    let outer = [Ident::new("o")];
    let expected = vec![
        ("`x`".to_owned(), vec![Ident::new("o")]),
        (
            "(`v` = `y`)".to_owned(),
            vec![Ident::new("o"), Ident::new("v")],
        ),
    ];

    let mut mapped = Vec::new();
    e.map_children(&outer, |c, scope| {
        mapped.push((c.to_string(), scope.to_vec()));
        c.clone()
    });
    assert_eq!(mapped, expected);

    let mut inspected = Vec::new();
    let _ = e.try_for_each_child(&outer, |c, scope| {
        inspected.push((c.to_string(), scope.to_vec()));
        ControlFlow::<()>::Continue(())
    });
    assert_eq!(inspected, expected);
}

#[test]
fn other_variants_pass_the_scope_unchanged() {
    let outer = [Ident::new("o")];
    for e in every_variant() {
        if matches!(e, Expr::Collection { .. }) {
            continue;
        }
        e.map_children(&outer, |c, scope| {
            assert_eq!(scope, outer, "{e}");
            c.clone()
        });
        let _ = e.try_for_each_child(&outer, |_, scope| {
            assert_eq!(scope, outer, "{e}");
            ControlFlow::<()>::Continue(())
        });
    }
}

#[test]
fn the_first_failure_stops_the_walk() {
    let e = parse_expression("[a, b, c]").unwrap();
    let mut visited = Vec::new();
    let failed = e.try_map_children(&[], |c, _| {
        visited.push(c.to_string());
        if c == &Expr::ident("b") {
            Err(c.to_string())
        } else {
            Ok(c.clone())
        }
    });
    assert_eq!(failed, Err("`b`".to_owned()));
    assert_eq!(visited, ["`a`", "`b`"]);

    let found = e.try_for_each_child(&[], |c, _| match c {
        Expr::Ident(id) if id.as_str() != "a" => ControlFlow::Break(id.as_str()),
        _ => ControlFlow::Continue(()),
    });
    assert_eq!(found, ControlFlow::Break("b"));
}
