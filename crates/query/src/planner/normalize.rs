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

use crate::ast::{Expr, Ident, Literal, WhenThen};

/// The canonical form of `expr` where rows are bound to `alias`, or None.
pub(crate) fn canonical(expr: &Expr, alias: &Ident) -> Option<Expr> {
    canon(expr, alias, &[])
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
        Expr::Collection {
            var,
            source,
            satisfies,
            ..
        } => {
            let mut inner = bound.to_vec();
            inner.push(var.clone());
            constant_in(source, bound) && constant_in(satisfies, &inner)
        }
        _ => expr.children().into_iter().all(|c| constant_in(c, bound)),
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
    let c = |e: &Expr| canon(e, alias, bound);
    let bx = |e: &Expr| c(e).map(Box::new);
    Some(match expr {
        Expr::Ident(name) if bound.contains(name) => expr.clone(),
        // The whole document: no index key is written this way.
        Expr::Ident(name) if name == alias => return None,
        Expr::Literal(_) | Expr::Ident(_) | Expr::Param(_) | Expr::Meta { keyspace: None } => {
            expr.clone()
        }
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
        Expr::Field { base, name } => Expr::Field {
            base: bx(base)?,
            name: name.clone(),
        },
        Expr::DynamicField { base, name } => Expr::DynamicField {
            base: bx(base)?,
            name: bx(name)?,
        },
        Expr::Element { base, index } => Expr::Element {
            base: bx(base)?,
            index: bx(index)?,
        },
        Expr::Array(items) => Expr::Array(items.iter().map(c).collect::<Option<_>>()?),
        Expr::Object(pairs) => Expr::Object(
            pairs
                .iter()
                .map(|(k, v)| Some((c(k)?, c(v)?)))
                .collect::<Option<_>>()?,
        ),
        Expr::Unary { op, operand } => Expr::Unary {
            op: *op,
            operand: bx(operand)?,
        },
        Expr::Binary { op, left, right } => Expr::Binary {
            op: *op,
            left: bx(left)?,
            right: bx(right)?,
        },
        Expr::Between {
            expr: e,
            low,
            high,
            negated,
        } => Expr::Between {
            expr: bx(e)?,
            low: bx(low)?,
            high: bx(high)?,
            negated: *negated,
        },
        Expr::Is { expr: e, test } => Expr::Is {
            expr: bx(e)?,
            test: *test,
        },
        Expr::Case {
            operand,
            whens,
            otherwise,
        } => Expr::Case {
            operand: optional(operand.as_deref(), bx)?,
            whens: whens
                .iter()
                .map(|w| {
                    Some(WhenThen {
                        when: c(&w.when)?,
                        then: c(&w.then)?,
                    })
                })
                .collect::<Option<_>>()?,
            otherwise: optional(otherwise.as_deref(), bx)?,
        },
        Expr::Call { func, args } => Expr::Call {
            func: *func,
            args: args.iter().map(c).collect::<Option<_>>()?,
        },
        Expr::Aggregate {
            func,
            distinct,
            arg,
        } => Expr::Aggregate {
            func: *func,
            distinct: *distinct,
            arg: optional(arg.as_deref(), bx)?,
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
                source: bx(source)?,
                satisfies: Box::new(canon(satisfies, alias, &inner)?),
            }
        }
    })
}

/// An optional operand's canonical form: Some(None) when absent, None when it has none.
fn optional(e: Option<&Expr>, f: impl Fn(&Expr) -> Option<Box<Expr>>) -> Option<Option<Box<Expr>>> {
    match e {
        None => Some(None),
        Some(e) => f(e).map(Some),
    }
}
