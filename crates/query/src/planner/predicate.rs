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
use crate::ast::{BinaryOp, Expr, Ident, UnaryOp};
use crate::error::Result;
use crate::eval::{evaluate, Params};

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Pred {
    And(Vec<Pred>),
    Or(Vec<Pred>),
    Not(Box<Pred>),
    /// `key` (canonical) compared with constants.
    Atom {
        key: Expr,
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

impl Pred {
    /// Builds the tree for a WHERE where rows are bound to `alias`. Fails only when a
    /// constant cannot be evaluated (an unbound parameter), which the WHERE itself would
    /// fail on too.
    pub fn build(expr: &Expr, alias: &Ident, params: &Params) -> Result<Pred> {
        if is_constant(expr) {
            let v = evaluate(expr, params)?;
            return Ok(Pred::Const(if v.is_missing() || v.is_null() {
                Truth::Unknown
            } else if v.truthy() {
                Truth::Truthy
            } else {
                Truth::False
            }));
        }
        let build = |e: &Expr| Pred::build(e, alias, params);
        let not = |p: Pred| Pred::Not(Box::new(p));
        Ok(match expr {
            Expr::Binary { op, left, right } => match op {
                BinaryOp::And => Pred::And(vec![build(left)?, build(right)?]),
                BinaryOp::Or => Pred::Or(vec![build(left)?, build(right)?]),
                BinaryOp::Ne => not(comparison(BinaryOp::Eq, left, right, alias, params)?),
                BinaryOp::NotLike => not(comparison(BinaryOp::Like, left, right, alias, params)?),
                BinaryOp::NotIn => not(comparison(BinaryOp::In, left, right, alias, params)?),
                _ => comparison(*op, left, right, alias, params)?,
            },
            Expr::Unary {
                op: UnaryOp::Not,
                operand,
            } => not(build(operand)?),
            Expr::Between {
                expr: e,
                low,
                high,
                negated,
            } => {
                let atom = match canonical(e, alias) {
                    Some(key) if is_constant(low) && is_constant(high) => Pred::Atom {
                        key,
                        sets: atoms::between(&evaluate(low, params)?, &evaluate(high, params)?),
                    },
                    _ => Pred::Opaque,
                };
                if *negated {
                    not(atom)
                } else {
                    atom
                }
            }
            Expr::Is { expr: e, test } => match canonical(e, alias) {
                Some(key) => Pred::Atom {
                    key,
                    sets: atoms::is(*test),
                },
                None => Pred::Opaque,
            },
            _ => Pred::Opaque,
        })
    }

    /// Where the key `key` (canonical) can be when this predicate is truthy, and when it
    /// is false.
    pub fn sets(&self, key: &Expr) -> (Constraint, Constraint) {
        match self {
            Pred::Atom { key: k, sets } if k == key => {
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
fn comparison(
    op: BinaryOp,
    left: &Expr,
    right: &Expr,
    alias: &Ident,
    params: &Params,
) -> Result<Pred> {
    use BinaryOp as B;
    if !matches!(op, B::Eq | B::Lt | B::Le | B::Gt | B::Ge | B::In | B::Like) {
        return Ok(Pred::Opaque);
    }
    let (key, constant, key_on_left) = if is_constant(right) {
        (left, right, true)
    } else if is_constant(left) {
        (right, left, false)
    } else {
        return Ok(Pred::Opaque);
    };
    let Some(key) = canonical(key, alias) else {
        return Ok(Pred::Opaque);
    };
    let c = evaluate(constant, params)?;
    let cmp = |op: Cmp| if key_on_left { op } else { op.flipped() };
    let sets = match op {
        BinaryOp::Eq => atoms::equals(&c),
        BinaryOp::Lt => atoms::compare(cmp(Cmp::Lt), &c),
        BinaryOp::Le => atoms::compare(cmp(Cmp::Le), &c),
        BinaryOp::Gt => atoms::compare(cmp(Cmp::Gt), &c),
        BinaryOp::Ge => atoms::compare(cmp(Cmp::Ge), &c),
        // The list and the pattern must be the constant side.
        BinaryOp::In if key_on_left => atoms::in_list(&c),
        BinaryOp::Like if key_on_left => match atoms::like(&c) {
            Some(sets) => sets,
            None => return Ok(Pred::Opaque),
        },
        _ => return Ok(Pred::Opaque),
    };
    Ok(Pred::Atom { key, sets })
}
