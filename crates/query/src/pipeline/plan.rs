//! What the pipeline prepares from a SELECT before the first row: formalized clauses, the
//! aggregates to accumulate, the static checks Couchbase's planner makes (a [`Shape`],
//! the same whatever the parameters, so a prepared statement keeps it), and the numeric
//! LIMIT and OFFSET (evaluated with each run's parameters).

use std::ops::Deref;
use std::sync::Arc;

use super::formalize::formalize;
use super::group::{check_grouped, collect_aggregates};
use super::project::Planned;
use crate::ast::{Expr, Ident, NullsOrder, Select};
use crate::error::{Clause, QueryError, Result};
use crate::eval::{evaluate, Params};
use crate::value::Num;

pub(crate) struct SortKey {
    pub expr: Expr,
    pub descending: bool,
    pub nulls_last: bool,
}

/// A statement's clauses as the pipeline runs them, independent of its parameters.
pub(crate) struct Shape {
    pub has_from: bool,
    pub alias: Option<Ident>,
    pub filter: Option<Expr>,
    /// Grouping applies: a GROUP BY, or an aggregate anywhere it may stand.
    pub grouped: bool,
    pub keys: Vec<Expr>,
    pub aggregates: Vec<Expr>,
    pub having: Option<Expr>,
    pub projection: Planned,
    pub distinct: bool,
    pub order: Vec<SortKey>,
    offset: Option<Expr>,
    limit: Option<Expr>,
}

/// One run's plan: the shape, with this run's counts and input order.
pub(crate) struct Plan {
    shape: Arc<Shape>,
    /// The rows come in the ORDER BY's order already (`Pipeline::rows_in_order`): no
    /// sort, and results stream.
    pub ordered_input: bool,
    pub offset: u64,
    pub limit: Option<u64>,
}

/// The clauses are read through the plan everywhere (`plan.filter`): a run adds only
/// its counts to them.
impl Deref for Plan {
    type Target = Shape;
    fn deref(&self) -> &Shape {
        &self.shape
    }
}

impl Plan {
    /// `shape` with `params`' LIMIT and OFFSET.
    pub(crate) fn new(shape: Arc<Shape>, params: &Params) -> Result<Plan> {
        let offset = count(shape.offset.as_ref(), "OFFSET", params)?.unwrap_or(0);
        let limit = count(shape.limit.as_ref(), "LIMIT", params)?;
        Ok(Plan {
            shape,
            ordered_input: false,
            offset,
            limit,
        })
    }

    /// Whether results leave as rows come (no grouping, no sort to wait for).
    pub(crate) fn streams(&self) -> bool {
        !self.grouped && (self.order.is_empty() || self.ordered_input)
    }
}

impl Shape {
    pub(crate) fn new(select: &Select) -> Result<Shape> {
        let alias = select.from.as_ref().map(|f| f.alias().clone());
        let a = alias.as_ref();
        let filter = select.filter.as_ref().map(|w| formalize(w, a, &[]));
        if filter.as_ref().is_some_and(Expr::contains_aggregate) {
            return Err(QueryError::AggregateNotAllowed {
                clause: Clause::Where,
            });
        }
        let keys: Vec<Expr> = select
            .group_by
            .iter()
            .map(|k| formalize(k, a, &[]))
            .collect();
        if keys.iter().any(Expr::contains_aggregate) {
            return Err(QueryError::AggregateNotAllowed {
                clause: Clause::GroupBy,
            });
        }
        let projection = Planned::new(&select.projection, a);
        let bound = projection.explicit_aliases();
        let having = select.having.as_ref().map(|h| formalize(h, a, &[]));
        let order: Vec<SortKey> = select
            .order_by
            .iter()
            .map(|t| SortKey {
                expr: formalize(&t.expr, a, &bound),
                descending: t.descending,
                // By default NULL and MISSING sort low: first ascending, last descending.
                nulls_last: match t.nulls {
                    Some(NullsOrder::Last) => true,
                    Some(NullsOrder::First) => false,
                    None => t.descending,
                },
            })
            .collect();

        let mut aggregates = Vec::new();
        for e in projection.exprs() {
            collect_aggregates(e, &mut aggregates)?;
        }
        for e in having.iter().chain(order.iter().map(|o| &o.expr)) {
            collect_aggregates(e, &mut aggregates)?;
        }
        let grouped = !keys.is_empty() || !aggregates.is_empty();
        if grouped {
            if projection.has_star() {
                return Err(QueryError::NotGroupKeyOrAggregate {
                    expr: "*".to_owned(),
                });
            }
            for e in projection.exprs().into_iter().chain(having.iter()) {
                check_grouped(e, &keys, &[])?;
            }
            for o in &order {
                check_grouped(&o.expr, &keys, &bound)?;
            }
        }
        Ok(Shape {
            has_from: select.from.is_some(),
            alias,
            filter,
            grouped,
            keys,
            aggregates,
            having,
            projection,
            distinct: select.distinct,
            order,
            offset: select.offset.clone(),
            limit: select.limit.clone(),
        })
    }
}

/// LIMIT/OFFSET as a count: a whole number (negative counts as 0); anything else is an
/// error, as in Couchbase.
fn count(expr: Option<&Expr>, clause: &'static str, params: &Params) -> Result<Option<u64>> {
    let Some(expr) = expr else {
        return Ok(None);
    };
    let v = evaluate(expr, params)?;
    match v.as_number().and_then(Num::as_whole) {
        Some(n) => Ok(Some(u64::try_from(n).unwrap_or(0))),
        None => Err(QueryError::InvalidValue {
            clause,
            value: v
                .as_json()
                .map_or_else(|| "MISSING".to_owned(), ToString::to_string),
        }),
    }
}
