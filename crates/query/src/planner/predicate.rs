//! A WHERE clause as the planner sees it: AND/OR/NOT over atoms (`key op constant`, the
//! constant evaluated once), constants, and opaque terms that say nothing.
//!
//! [`Pred::sets`] answers, for one canonical key expression, which values the key can have
//! where the predicate is truthy and where it is false (non-NULL, non-MISSING, not
//! truthy), each as a set or None for "any value". The rules follow `eval::and`/`or`/`not`:
//! AND is truthy iff both sides are, false iff either is; OR the other way round; NOT is
//! truthy iff its operand is false and false iff it is truthy.

use super::atoms::{self, Cmp, Sets};
use super::interval::ValueSet;
use super::normalize::{canonical, is_constant};
use crate::ast::{BinaryOp, Expr, Ident, IsTest, UnaryOp};
use crate::error::Result;
use crate::eval::{evaluate, Params};

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Pred<'s> {
    And(Vec<Pred<'s>>),
    Or(Vec<Pred<'s>>),
    Not(Box<Pred<'s>>),
    /// `key` (canonical) compared with constants.
    Atom {
        key: &'s Expr,
        sets: Sets,
    },
    /// Reads no document: the same value for every row.
    Const(Truth),
    /// Anything else: no constraint on any key either way.
    Opaque,
}

/// A constant condition's value, as WHERE and the logical operators read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Truth {
    Truthy,
    False,
    /// NULL or MISSING.
    Unknown,
}

/// A set, or None for every value.
pub(crate) type Constraint = Option<ValueSet>;

/// A WHERE's tree with what does not depend on the parameters worked out once: which
/// terms are constant, and each atom's key in canonical form. [`PredShape::bind`] then
/// evaluates the constants of one run into a [`Pred`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PredShape {
    And(Vec<PredShape>),
    Or(Vec<PredShape>),
    Not(Box<PredShape>),
    /// A term that reads no document.
    Const(Expr),
    /// `key op constant` (`op` as if the key were on the left).
    Compare {
        key: Expr,
        op: Comparison,
        constant: Expr,
    },
    Between {
        key: Expr,
        low: Expr,
        high: Expr,
    },
    Is {
        key: Expr,
        test: IsTest,
    },
    Opaque,
}

/// The operator of a [`PredShape::Compare`], with the key on its left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Comparison {
    Eq,
    Cmp(Cmp),
    In,
    Like,
}

impl PredShape {
    /// The shape of a WHERE where rows are bound to `alias`.
    pub fn new(expr: &Expr, alias: &Ident) -> PredShape {
        if is_constant(expr) {
            return PredShape::Const(expr.clone());
        }
        let shape = |e: &Expr| PredShape::new(e, alias);
        let not = |p: PredShape| PredShape::Not(Box::new(p));
        match expr {
            Expr::Binary { op, left, right } => match op {
                BinaryOp::And => PredShape::And(vec![shape(left), shape(right)]),
                BinaryOp::Or => PredShape::Or(vec![shape(left), shape(right)]),
                BinaryOp::Ne => not(comparison(BinaryOp::Eq, left, right, alias)),
                BinaryOp::NotLike => not(comparison(BinaryOp::Like, left, right, alias)),
                BinaryOp::NotIn => not(comparison(BinaryOp::In, left, right, alias)),
                _ => comparison(*op, left, right, alias),
            },
            Expr::Unary {
                op: UnaryOp::Not,
                operand,
            } => not(shape(operand)),
            Expr::Between {
                expr: e,
                low,
                high,
                negated,
            } => {
                let atom = match canonical(e, alias) {
                    Some(key) if is_constant(low) && is_constant(high) => PredShape::Between {
                        key,
                        low: (**low).clone(),
                        high: (**high).clone(),
                    },
                    _ => PredShape::Opaque,
                };
                if *negated {
                    not(atom)
                } else {
                    atom
                }
            }
            Expr::Is { expr: e, test } => match canonical(e, alias) {
                Some(key) => PredShape::Is { key, test: *test },
                None => PredShape::Opaque,
            },
            _ => PredShape::Opaque,
        }
    }

    /// The predicate with `params`: constants evaluated, in the WHERE's order. Fails only
    /// when a constant cannot be evaluated (an unbound parameter), which the WHERE itself
    /// would fail on too.
    pub fn bind(&self, params: &Params) -> Result<Pred<'_>> {
        Ok(match self {
            PredShape::And(ps) => Pred::And(bind_all(ps, params)?),
            PredShape::Or(ps) => Pred::Or(bind_all(ps, params)?),
            PredShape::Not(p) => Pred::Not(Box::new(p.bind(params)?)),
            PredShape::Const(e) => {
                let v = evaluate(e, params)?;
                Pred::Const(if v.is_missing() || v.is_null() {
                    Truth::Unknown
                } else if v.truthy() {
                    Truth::Truthy
                } else {
                    Truth::False
                })
            }
            PredShape::Compare { key, op, constant } => {
                let c = evaluate(constant, params)?;
                let sets = match op {
                    Comparison::Eq => atoms::equals(&c),
                    Comparison::Cmp(cmp) => atoms::compare(*cmp, &c),
                    Comparison::In => atoms::in_list(&c),
                    Comparison::Like => match atoms::like(&c) {
                        Some(sets) => sets,
                        None => return Ok(Pred::Opaque),
                    },
                };
                Pred::Atom { key, sets }
            }
            PredShape::Between { key, low, high } => Pred::Atom {
                key,
                sets: atoms::between(&evaluate(low, params)?, &evaluate(high, params)?),
            },
            PredShape::Is { key, test } => Pred::Atom {
                key,
                sets: atoms::is(*test),
            },
            PredShape::Opaque => Pred::Opaque,
        })
    }
}

fn bind_all<'s>(ps: &'s [PredShape], params: &Params) -> Result<Vec<Pred<'s>>> {
    ps.iter().map(|p| p.bind(params)).collect()
}

impl Pred<'_> {
    /// Where the key `key` (canonical) can be when this predicate is truthy, and when it
    /// is false.
    pub fn sets(&self, key: &Expr) -> (Constraint, Constraint) {
        match self {
            Pred::Atom { key: k, sets } if *k == key => {
                (Some(sets.truthy.clone()), Some(sets.falsy.clone()))
            }
            Pred::Atom { .. } | Pred::Opaque => (None, None),
            Pred::Const(Truth::Truthy) => (None, Some(ValueSet::empty())),
            Pred::Const(Truth::False) => (Some(ValueSet::empty()), None),
            Pred::Const(Truth::Unknown) => (Some(ValueSet::empty()), Some(ValueSet::empty())),
            Pred::Not(p) => {
                let (t, f) = p.sets(key);
                (f, t)
            }
            Pred::And(ps) => {
                let (ts, fs): (Vec<_>, Vec<_>) = ps.iter().map(|p| p.sets(key)).unzip();
                (all_of(ts), any_of(fs))
            }
            Pred::Or(ps) => {
                let (ts, fs): (Vec<_>, Vec<_>) = ps.iter().map(|p| p.sets(key)).unzip();
                (any_of(ts), all_of(fs))
            }
        }
    }
}

/// Holds when every one holds: the intersection of the known sets.
fn all_of(cs: Vec<Constraint>) -> Constraint {
    cs.into_iter().fold(None, |acc, c| match (acc, c) {
        (None, c) => c,
        (a, None) => a,
        (Some(a), Some(b)) => Some(a.intersect(&b)),
    })
}

/// Holds when any one holds: the union, unknown if any one is unknown.
fn any_of(cs: Vec<Constraint>) -> Constraint {
    let mut out = ValueSet::empty();
    for c in cs {
        out = out.union(&c?);
    }
    Some(out)
}

/// `left op right` with one side a constant and the other a key; else opaque.
fn comparison(op: BinaryOp, left: &Expr, right: &Expr, alias: &Ident) -> PredShape {
    use BinaryOp as B;
    if !matches!(op, B::Eq | B::Lt | B::Le | B::Gt | B::Ge | B::In | B::Like) {
        return PredShape::Opaque;
    }
    let (key, constant, key_on_left) = if is_constant(right) {
        (left, right, true)
    } else if is_constant(left) {
        (right, left, false)
    } else {
        return PredShape::Opaque;
    };
    let Some(key) = canonical(key, alias) else {
        return PredShape::Opaque;
    };
    let cmp = |op: Cmp| Comparison::Cmp(if key_on_left { op } else { op.flipped() });
    let op = match op {
        B::Eq => Comparison::Eq,
        B::Lt => cmp(Cmp::Lt),
        B::Le => cmp(Cmp::Le),
        B::Gt => cmp(Cmp::Gt),
        B::Ge => cmp(Cmp::Ge),
        // The list and the pattern must be the constant side.
        B::In if key_on_left => Comparison::In,
        B::Like if key_on_left => Comparison::Like,
        _ => return PredShape::Opaque,
    };
    PredShape::Compare {
        key,
        op,
        constant: constant.clone(),
    }
}
