//! GROUP BY and aggregates: accumulators per group, the environment a group is evaluated
//! in, and the check that grouped expressions read only group keys and aggregates.

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::ops::ControlFlow;

use super::budget::Budget;
use crate::ast::{Expr, Ident, Param};
use crate::collate::collate;
use crate::error::{QueryError, Result};
use crate::eval::{eval, Env, Params};
use crate::functions::AggFunc;
use crate::value::{float_value, Num, Value};

/// A value ordered by collation, for sorted sets and group maps.
#[derive(Debug, Clone)]
pub(crate) struct Collated(pub Value);

impl PartialEq for Collated {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Collated {}
impl PartialOrd for Collated {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Collated {
    fn cmp(&self, other: &Self) -> Ordering {
        collate(&self.0, &other.0)
    }
}

/// The running state of one aggregate in one group.
#[derive(Debug, Clone)]
pub(crate) struct Acc {
    func: AggFunc,
    star: bool,
    distinct: Option<BTreeSet<Collated>>,
    count: u64,
    sum: Option<Num>,
    best: Option<Value>,
    items: Vec<Value>,
}

impl Acc {
    pub(crate) fn new(agg: &Expr) -> Acc {
        let (func, distinct, star) = match agg {
            Expr::Aggregate {
                func,
                distinct,
                arg,
            } => (*func, *distinct, arg.is_none()),
            _ => (AggFunc::Count, false, true),
        };
        Acc {
            func,
            star,
            distinct: distinct.then(BTreeSet::new),
            count: 0,
            sum: None,
            best: None,
            items: Vec::new(),
        }
    }

    /// Folds in one row's value of the aggregate's argument (ignored for `COUNT(*)`).
    pub(crate) fn add(&mut self, v: Value, budget: &mut Budget) -> Result<()> {
        if self.star {
            self.count += 1;
            return Ok(());
        }
        let counts = match self.func {
            AggFunc::Count | AggFunc::Min | AggFunc::Max => !v.is_missing() && !v.is_null(),
            AggFunc::Sum | AggFunc::Avg => v.as_number().is_some(),
            AggFunc::ArrayAgg => !v.is_missing(),
        };
        if !counts {
            return Ok(());
        }
        if let Some(set) = &mut self.distinct {
            let size = super::budget::value_size(&v);
            if set.insert(Collated(v)) {
                budget.charge(size)?;
            }
            return Ok(());
        }
        self.fold(v, budget)
    }

    fn fold(&mut self, v: Value, budget: &mut Budget) -> Result<()> {
        self.count += 1;
        match self.func {
            AggFunc::Count => {}
            AggFunc::Sum | AggFunc::Avg => {
                if let Some(n) = v.as_number() {
                    self.sum = Some(match self.sum {
                        None => n,
                        Some(s) => add(s, n),
                    });
                }
            }
            AggFunc::Min | AggFunc::Max => {
                let better = match &self.best {
                    None => true,
                    Some(b) => {
                        let c = collate(&v, b);
                        (self.func == AggFunc::Min && c == Ordering::Less)
                            || (self.func == AggFunc::Max && c == Ordering::Greater)
                    }
                };
                if better {
                    self.best = Some(v);
                }
            }
            AggFunc::ArrayAgg => {
                budget.charge_value(&v)?;
                self.items.push(v);
            }
        }
        Ok(())
    }

    /// The aggregate's value: COUNT of nothing is 0, every other aggregate of nothing NULL.
    pub(crate) fn finish(mut self) -> Value {
        if let Some(set) = self.distinct.take() {
            let mut sink = Budget::new(usize::MAX);
            for Collated(v) in set {
                // An unbounded budget cannot fail.
                let _ = self.fold(v, &mut sink);
            }
        }
        match self.func {
            AggFunc::Count => Value::Json(self.count.into()),
            AggFunc::Sum => self.sum.map_or(Value::NULL, Num::into_value),
            AggFunc::Avg => match self.sum {
                Some(s) if self.count > 0 => float_value(s.as_f64() / self.count as f64),
                _ => Value::NULL,
            },
            AggFunc::Min | AggFunc::Max => self.best.unwrap_or(Value::NULL),
            AggFunc::ArrayAgg if self.items.is_empty() => Value::NULL,
            AggFunc::ArrayAgg => {
                // Couchbase returns ARRAY_AGG's values sorted.
                self.items.sort_by(collate);
                Value::Json(serde_json::Value::Array(
                    self.items
                        .into_iter()
                        .map(Value::into_json_or_null)
                        .collect(),
                ))
            }
        }
    }
}

fn add(a: Num, b: Num) -> Num {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => x
            .checked_add(y)
            .map_or(Num::Float(x as f64 + y as f64), Num::Int),
        _ => Num::Float(a.as_f64() + b.as_f64()),
    }
}

/// A finished group: group keys and aggregate results stand in for the expressions.
pub(crate) struct GroupEnv<'a> {
    pub keys: &'a [Expr],
    pub key_values: &'a [Value],
    pub aggregates: &'a [Expr],
    pub aggregate_values: &'a [Value],
    pub params: &'a Params,
}

impl Env for GroupEnv<'_> {
    fn ident(&self, _name: &Ident) -> Result<Value> {
        // check_grouped refused every name that is not a key or a variable.
        Ok(Value::Missing)
    }
    fn meta(&self, _keyspace: Option<&Ident>) -> Result<Value> {
        Ok(Value::Missing)
    }
    fn param(&self, p: &Param) -> Result<Value> {
        self.params.get(p)
    }
    fn aggregate(&self, expr: &Expr) -> Result<Value> {
        let i = self.aggregates.iter().position(|a| a == expr);
        Ok(i.and_then(|i| self.aggregate_values.get(i))
            .cloned()
            .unwrap_or(Value::NULL))
    }
    fn substitute(&self, expr: &Expr) -> Option<Value> {
        let i = self.keys.iter().position(|k| k == expr)?;
        self.key_values.get(i).cloned()
    }
}

/// Evaluates the group keys of a row.
pub(crate) fn key_of(keys: &[Expr], env: &dyn Env) -> Result<Vec<Collated>> {
    keys.iter().map(|k| eval(k, env).map(Collated)).collect()
}

/// Fails unless `expr` reads the rows only through group keys and aggregates. The error
/// names the outermost offending path (`b.x.y`, not `b`).
pub(crate) fn check_grouped(expr: &Expr, keys: &[Expr], bound: &[Ident]) -> Result<()> {
    match offending(expr, keys, bound) {
        None => Ok(()),
        Some(e) => Err(QueryError::NotGroupKeyOrAggregate {
            expr: e.to_string(),
        }),
    }
}

fn offending<'a>(expr: &'a Expr, keys: &[Expr], bound: &[Ident]) -> Option<&'a Expr> {
    if keys.contains(expr) {
        return None;
    }
    match expr {
        Expr::Aggregate { .. } | Expr::Literal(_) | Expr::Param(_) => None,
        Expr::Ident(name) if bound.contains(name) => None,
        Expr::Ident(_) | Expr::Meta { .. } => Some(expr),
        Expr::Field { base, .. } => offending(base, keys, bound).map(|_| expr),
        Expr::Element { base, index } | Expr::DynamicField { base, name: index } => {
            offending(base, keys, bound)
                .map(|_| expr)
                .or_else(|| offending(index, keys, bound))
        }
        _ => expr
            .try_for_each_child(bound, |child, scope| match offending(child, keys, scope) {
                Some(e) => ControlFlow::Break(e),
                None => ControlFlow::Continue(()),
            })
            .break_value(),
    }
}

/// Every aggregate in `expr`, outermost first, without duplicates.
pub(crate) fn collect_aggregates(expr: &Expr, out: &mut Vec<Expr>) -> Result<()> {
    if let Expr::Aggregate { arg, .. } = expr {
        if arg.as_deref().is_some_and(Expr::contains_aggregate) {
            return Err(QueryError::evaluation("Aggregates cannot be nested."));
        }
        if !out.contains(expr) {
            out.push(expr.clone());
        }
        return Ok(());
    }
    for c in expr.children() {
        collect_aggregates(c, out)?;
    }
    Ok(())
}
