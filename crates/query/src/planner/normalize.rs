//! One spelling for one document path, so a query expression can be matched to an index
//! key by tree equality.
//!
//! The canonical form reads a field of the document as a bare name: with the query
//! binding rows to `d`, `d.address.city`, `address.city` and `d.['address'].city` are all
//! `address.city`; an index key is normalized the same way against the keyspace's
//! default alias (`default.status` is `status`). `META(d)` becomes `META()`. A name bound
//! by ANY/EVERY stays what it is inside its scope. What cannot be spelled this way (the
//! whole document, META of another keyspace, a path that would be captured by a variable)
//! has no canonical form, so it matches no index key.

use std::ops::ControlFlow;

use crate::ast::{Expr, Ident, Literal};

/// The canonical form of `expr` where rows are bound to `alias`, or None.
pub(crate) fn canonical(expr: &Expr, alias: &Ident) -> Option<Expr> {
    canon(expr, alias, &[])
}

/// [`canonical`] where the names `bound` are not fields of the document (variables, or
/// results ORDER BY may name).
pub(crate) fn canonical_in(expr: &Expr, alias: &Ident, bound: &[Ident]) -> Option<Expr> {
    canon(expr, alias, bound)
}

/// Whether `expr` reads nothing of the document: no free name, no META(), no aggregate.
/// Such an expression has the same value for every row, so `evaluate` computes it once.
pub(crate) fn is_constant(expr: &Expr) -> bool {
    constant_in(expr, &[])
}

/// The operands of the top-level ANDs, left to right.
pub(crate) fn conjuncts(expr: &Expr) -> Vec<&Expr> {
    let mut out = Vec::new();
    let mut stack = vec![expr];
    while let Some(e) = stack.pop() {
        match e {
            Expr::Binary {
                op: crate::ast::BinaryOp::And,
                left,
                right,
            } => {
                stack.push(right);
                stack.push(left);
            }
            other => out.push(other),
        }
    }
    out
}

fn constant_in(expr: &Expr, bound: &[Ident]) -> bool {
    match expr {
        Expr::Ident(name) => bound.contains(name),
        Expr::Meta { .. } | Expr::Aggregate { .. } => false,
        _ => expr
            .try_for_each_child(bound, |child, scope| {
                if constant_in(child, scope) {
                    ControlFlow::Continue(())
                } else {
                    ControlFlow::Break(())
                }
            })
            .is_continue(),
    }
}

/// Whether `base` is the document itself here: the alias, not shadowed by a variable.
fn is_document(base: &Expr, alias: &Ident, bound: &[Ident]) -> bool {
    matches!(base, Expr::Ident(name) if name == alias && !bound.contains(name))
}

/// A field of the document as a bare name, unless a variable of that name would capture it.
fn document_field(name: &str, bound: &[Ident]) -> Option<Expr> {
    let id = Ident::new(name);
    (!bound.contains(&id)).then_some(Expr::Ident(id))
}

fn canon(expr: &Expr, alias: &Ident, bound: &[Ident]) -> Option<Expr> {
    Some(match expr {
        Expr::Ident(name) if bound.contains(name) => expr.clone(),
        // The whole document: no index key is written this way.
        Expr::Ident(name) if name == alias => return None,
        // META's argument names a keyspace, never a variable.
        Expr::Meta { keyspace: Some(k) } if k == alias => Expr::Meta { keyspace: None },
        Expr::Meta { keyspace: Some(_) } => return None,
        Expr::Field { base, name } if is_document(base, alias, bound) => {
            document_field(name.as_str(), bound)?
        }
        Expr::DynamicField { base, name } if is_document(base, alias, bound) => match &**name {
            Expr::Literal(Literal::String(s)) => document_field(s, bound)?,
            _ => return None,
        },
        // Any other name, literal, parameter or META() stays; the rest keeps its shape with
        // canonical children, and has no canonical form if one of them has none.
        _ => expr
            .try_map_children(bound, |child, scope| canon(child, alias, scope).ok_or(()))
            .ok()?,
    })
}
