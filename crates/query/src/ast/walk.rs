//! Walking an expression one level at a time with the variables in scope, so a pass over
//! the tree writes only the variants it treats specially and never forgets a binding.
//!
//! `bound` is the list of variables visible where an expression stands. Only
//! `Expr::Collection` binds one: its `var` is visible in `satisfies`, not in `source`.
//! `try_for_each_child` is the one place that knows this, so a new variant that binds a name
//! extends the scope there. Rebuilding walks with it too and then reassembles the node from
//! the new children, which keeps the recursion's stack frames small (the parser's depth
//! limit is what keeps every walk of the tree within the stack).

use std::convert::Infallible;
use std::ops::ControlFlow;

use super::{Expr, Ident, WhenThen};

impl Expr {
    /// This expression rebuilt with `f` applied to each direct child and the scope that
    /// child sees; leaves are cloned. Children are visited in `children()` order and the
    /// first error stops the walk.
    pub fn try_map_children<E>(
        &self,
        bound: &[Ident],
        mut f: impl FnMut(&Expr, &[Ident]) -> Result<Expr, E>,
    ) -> Result<Expr, E> {
        let mut mapped = Vec::new();
        let walk = self.try_for_each_child(bound, |child, scope| match f(child, scope) {
            Ok(e) => {
                mapped.push(e);
                ControlFlow::Continue(())
            }
            Err(e) => ControlFlow::Break(e),
        });
        if let ControlFlow::Break(e) = walk {
            return Err(e);
        }
        let mut mapped = mapped.into_iter();
        let rebuilt = self.with_children(&mut mapped);
        assert!(mapped.next().is_none(), "one new expression per child");
        Ok(rebuilt)
    }

    /// [`Expr::try_map_children`] for a rewrite that cannot fail.
    pub fn map_children(
        &self,
        bound: &[Ident],
        mut f: impl FnMut(&Expr, &[Ident]) -> Expr,
    ) -> Expr {
        match self.try_map_children(bound, |e, scope| Ok::<_, Infallible>(f(e, scope))) {
            Ok(e) => e,
            Err(never) => match never {},
        }
    }

    /// Calls `f` on each direct child with the scope that child sees, in `children()`
    /// order, until one breaks: the inspecting counterpart of [`Expr::try_map_children`].
    pub fn try_for_each_child<'a, B>(
        &'a self,
        bound: &[Ident],
        mut f: impl FnMut(&'a Expr, &[Ident]) -> ControlFlow<B>,
    ) -> ControlFlow<B> {
        match self {
            Expr::Collection {
                var,
                source,
                satisfies,
                ..
            } => {
                f(source, bound)?;
                f(satisfies, &with_var(bound, var))
            }
            _ => self.children().into_iter().try_for_each(|c| f(c, bound)),
        }
    }

    /// A copy of this node whose children are taken from `new`, in `children()` order (the
    /// walk tests check that an identity rebuild gives back every variant unchanged).
    fn with_children(&self, new: &mut impl Iterator<Item = Expr>) -> Expr {
        let mut next = || new.next().expect("one new expression per child");
        match self {
            Expr::Literal(_) | Expr::Ident(_) | Expr::Param(_) | Expr::Meta { .. } => self.clone(),
            Expr::Array(items) => Expr::Array(items.iter().map(|_| next()).collect()),
            Expr::Object(pairs) => Expr::Object(pairs.iter().map(|_| (next(), next())).collect()),
            Expr::Field { name, .. } => Expr::Field {
                base: Box::new(next()),
                name: name.clone(),
            },
            Expr::DynamicField { .. } => Expr::DynamicField {
                base: Box::new(next()),
                name: Box::new(next()),
            },
            Expr::Element { .. } => Expr::Element {
                base: Box::new(next()),
                index: Box::new(next()),
            },
            Expr::Unary { op, .. } => Expr::Unary {
                op: *op,
                operand: Box::new(next()),
            },
            Expr::Binary { op, .. } => Expr::Binary {
                op: *op,
                left: Box::new(next()),
                right: Box::new(next()),
            },
            Expr::Between { negated, .. } => Expr::Between {
                expr: Box::new(next()),
                low: Box::new(next()),
                high: Box::new(next()),
                negated: *negated,
            },
            Expr::Is { test, .. } => Expr::Is {
                expr: Box::new(next()),
                test: *test,
            },
            Expr::Case {
                operand,
                whens,
                otherwise,
            } => Expr::Case {
                operand: operand.as_ref().map(|_| Box::new(next())),
                whens: whens
                    .iter()
                    .map(|_| WhenThen {
                        when: next(),
                        then: next(),
                    })
                    .collect(),
                otherwise: otherwise.as_ref().map(|_| Box::new(next())),
            },
            Expr::Call { func, args } => Expr::Call {
                func: *func,
                args: args.iter().map(|_| next()).collect(),
            },
            Expr::Aggregate {
                func,
                distinct,
                arg,
            } => Expr::Aggregate {
                func: *func,
                distinct: *distinct,
                arg: arg.as_ref().map(|_| Box::new(next())),
            },
            Expr::Collection {
                quantifier, var, ..
            } => Expr::Collection {
                quantifier: *quantifier,
                var: var.clone(),
                source: Box::new(next()),
                satisfies: Box::new(next()),
            },
        }
    }
}

/// `bound` with `var` added: the scope of a SATISFIES clause.
fn with_var(bound: &[Ident], var: &Ident) -> Vec<Ident> {
    let mut inner = bound.to_vec();
    inner.push(var.clone());
    inner
}
