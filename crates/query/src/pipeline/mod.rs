//! Runs a parsed SELECT over rows the caller supplies, for one keyspace:
//! WHERE → GROUP BY / aggregates / HAVING → projection → DISTINCT → ORDER BY →
//! OFFSET / LIMIT.
//!
//! Which rows to feed (a key lookup for USE KEYS, an index scan, a full scan) is the
//! caller's business: the pipeline knows nothing of indexes or storage. Without GROUP BY
//! or aggregates, and without ORDER BY or with the rows pushed in its order already
//! ([`Pipeline::rows_in_order`]), results stream out of [`Pipeline::push`] and
//! [`Flow::Done`] says when LIMIT is met; otherwise they come out of [`Pipeline::finish`], and what is
//! held until then is bounded by [`Limits::max_buffered_bytes`].

mod budget;
mod formalize;
mod group;
mod plan;
mod project;

#[cfg(test)]
mod tests;

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use budget::{json_size, Budget};
use group::{key_of, Acc, Collated, GroupEnv};
use plan::{Plan, Shape, SortKey};
use project::AliasEnv;

use crate::ast::{Expr, Ident, Select};
use crate::collate::{collate, is_unknown};
use crate::error::Result;
use crate::eval::{eval, Env, Params, Row, RowEnv};
use crate::value::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// What the rows held for ORDER BY, the groups, DISTINCT and ARRAY_AGG may occupy
    /// (estimated); past it the query fails with `MemoryQuotaExceeded`.
    pub max_buffered_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_buffered_bytes: 64 << 20,
        }
    }
}

/// Whether the caller should keep feeding rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    More,
    /// LIMIT is reached: further rows cannot change the result.
    Done,
}

/// Executes `select` over `rows` and returns its results.
pub fn run_select(
    select: &Select,
    rows: impl IntoIterator<Item = Row>,
    params: &Params,
    limits: Limits,
) -> Result<Vec<serde_json::Value>> {
    let mut pipeline = Pipeline::new(select, params, limits)?;
    let mut out = Vec::new();
    if select.from.is_some() {
        for row in rows {
            if pipeline.push(&row, &mut out)? == Flow::Done {
                break;
            }
        }
    }
    pipeline.finish(&mut out)?;
    Ok(out)
}

/// A row after projection, waiting for ORDER BY.
struct Held {
    result: serde_json::Value,
    sort: Vec<Value>,
}

/// A SELECT made ready for the pipeline, whatever its parameters: formalized and checked
/// once. A prepared statement keeps one and runs each [`Pipeline`] from it.
#[derive(Clone)]
pub struct Compiled(Arc<Shape>);

impl Compiled {
    /// Fails on what Couchbase's planner refuses (aggregates in WHERE, non-group
    /// expressions in a grouped projection).
    pub fn new(select: &Select) -> Result<Compiled> {
        Ok(Compiled(Arc::new(Shape::new(select)?)))
    }

    /// Which compilation this is (two clones of one compare equal).
    #[cfg(test)]
    pub(crate) fn shape_ptr(&self) -> *const () {
        Arc::as_ptr(&self.0).cast()
    }
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Compiled(..)")
    }
}

pub struct Pipeline<'p> {
    plan: Plan,
    params: &'p Params,
    groups: BTreeMap<Vec<Collated>, Vec<Acc>>,
    out: Output,
}

/// Everything after the projection: DISTINCT, held rows, OFFSET/LIMIT counters.
struct Output {
    budget: Budget,
    held: Vec<Held>,
    seen: BTreeSet<Collated>,
    skipped: u64,
    emitted: u64,
}

impl<'p> Pipeline<'p> {
    /// Prepares the statement: fails on what Couchbase's planner refuses (aggregates in
    /// WHERE, non-group expressions in a grouped projection, a bad LIMIT).
    pub fn new(select: &Select, params: &'p Params, limits: Limits) -> Result<Self> {
        Self::compiled(&Compiled::new(select)?, params, limits)
    }

    /// A run of a statement compiled before: fails on a LIMIT or OFFSET that `params`
    /// make other than a whole number.
    pub fn compiled(compiled: &Compiled, params: &'p Params, limits: Limits) -> Result<Self> {
        Ok(Pipeline {
            plan: Plan::new(compiled.0.clone(), params)?,
            params,
            groups: BTreeMap::new(),
            out: Output {
                budget: Budget::new(limits.max_buffered_bytes),
                held: Vec::new(),
                seen: BTreeSet::new(),
                skipped: 0,
                emitted: 0,
            },
        })
    }

    /// Says the rows will be pushed in the ORDER BY's order already (the access path
    /// provides it, see `planner::access_is_ordered`): results then stream out of `push`
    /// with no sort, and [`Flow::Done`] comes once OFFSET + LIMIT rows are out. Ignored
    /// when the statement groups (its groups are sorted after the last row).
    pub fn rows_in_order(&mut self) {
        self.plan.ordered_input = !self.plan.grouped;
    }

    /// How many more rows could still become results, when that is bounded: the rest of
    /// OFFSET + LIMIT for a statement whose results stream, `None` otherwise. A caller
    /// reading rows in pages sizes the next one by it (rows the WHERE refuses then cost
    /// another page).
    pub fn wanted(&self) -> Option<u64> {
        let limit = self.plan.limit.filter(|_| self.plan.streams())?;
        let wanted = self.plan.offset.saturating_add(limit);
        Some(wanted.saturating_sub(self.out.skipped + self.out.emitted))
    }

    /// Feeds one document of the FROM keyspace; results that are final already are
    /// appended to `out`. A statement without FROM reads no rows (`finish` evaluates it).
    pub fn push(&mut self, row: &Row, out: &mut Vec<serde_json::Value>) -> Result<Flow> {
        if !self.plan.has_from {
            return Ok(Flow::Done);
        }
        self.process(Some(row), out)
    }

    fn process(&mut self, row: Option<&Row>, out: &mut Vec<serde_json::Value>) -> Result<Flow> {
        let streaming = self.plan.streams();
        if streaming && self.out.limit_reached(&self.plan) {
            return Ok(Flow::Done);
        }
        let bound = match (&self.plan.alias, row) {
            (Some(a), Some(r)) => Some((a, r)),
            _ => None,
        };
        let env = RowEnv::new(bound, self.params);
        if let Some(filter) = &self.plan.filter {
            if !eval(filter, &env)?.truthy() {
                return Ok(Flow::More);
            }
        }
        if self.plan.grouped {
            let key = key_of(&self.plan.keys, &env)?;
            if !self.groups.contains_key(&key) {
                self.out
                    .budget
                    .charge(key.iter().map(|k| budget::value_size(&k.0)).sum())?;
                let accs = self.plan.aggregates.iter().map(Acc::new).collect();
                self.groups.insert(key.clone(), accs);
            }
            if let Some(accs) = self.groups.get_mut(&key) {
                for (acc, agg) in accs.iter_mut().zip(&self.plan.aggregates) {
                    let arg = match agg {
                        Expr::Aggregate { arg: Some(a), .. } => eval(a, &env)?,
                        _ => Value::Missing,
                    };
                    acc.add(arg, &mut self.out.budget)?;
                }
            }
            return Ok(Flow::More);
        }
        self.out.emit(&self.plan, &env, bound, out)
    }

    /// Ends the input: appends the results that needed all of it (groups, ORDER BY).
    pub fn finish(mut self, out: &mut Vec<serde_json::Value>) -> Result<()> {
        if !self.plan.has_from {
            self.process(None, out)?;
        }
        if self.plan.grouped {
            // A whole-keyspace aggregate (no GROUP BY) has one group even over no rows.
            if self.plan.keys.is_empty() && self.groups.is_empty() {
                let accs = self.plan.aggregates.iter().map(Acc::new).collect();
                self.groups.insert(Vec::new(), accs);
            }
            let groups = std::mem::take(&mut self.groups);
            for (key, accs) in groups {
                let key_values: Vec<Value> = key.into_iter().map(|c| c.0).collect();
                let aggregate_values: Vec<Value> = accs.into_iter().map(Acc::finish).collect();
                let env = GroupEnv {
                    keys: &self.plan.keys,
                    key_values: &key_values,
                    aggregates: &self.plan.aggregates,
                    aggregate_values: &aggregate_values,
                    params: self.params,
                };
                if let Some(having) = &self.plan.having {
                    if !eval(having, &env)?.truthy() {
                        continue;
                    }
                }
                self.out.emit(&self.plan, &env, None, out)?;
            }
        }
        let mut held = std::mem::take(&mut self.out.held);
        let order = &self.plan.order;
        // Stable: rows that sort equal keep their input (or group) order.
        held.sort_by(|a, b| compare_rows(&a.sort, &b.sort, order));
        let limit = self
            .plan
            .limit
            .map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
        let offset = usize::try_from(self.plan.offset).unwrap_or(usize::MAX);
        out.extend(held.into_iter().skip(offset).take(limit).map(|h| h.result));
        Ok(())
    }
}

impl Output {
    fn limit_reached(&self, plan: &Plan) -> bool {
        plan.limit.is_some_and(|l| self.emitted >= l)
    }

    /// Projects, then streams or holds the result.
    fn emit(
        &mut self,
        plan: &Plan,
        env: &dyn Env,
        row: Option<(&Ident, &Row)>,
        out: &mut Vec<serde_json::Value>,
    ) -> Result<Flow> {
        let projected = plan.projection.project(env, row)?;
        let Some(result) = projected.result else {
            return Ok(Flow::More);
        };
        if plan.distinct {
            let size = json_size(&result);
            if !self.seen.insert(Collated(Value::Json(result.clone()))) {
                return Ok(Flow::More);
            }
            self.budget.charge(size)?;
        }
        if !plan.streams() {
            let scope = AliasEnv {
                aliases: &projected.aliases,
                parent: env,
            };
            let mut sort = Vec::with_capacity(plan.order.len());
            for key in &plan.order {
                let v = eval(&key.expr, &scope)?;
                self.budget.charge_value(&v)?;
                sort.push(v);
            }
            self.budget.charge_json(&result)?;
            self.held.push(Held { result, sort });
            return Ok(Flow::More);
        }
        if self.skipped < plan.offset {
            self.skipped += 1;
            return Ok(Flow::More);
        }
        out.push(result);
        self.emitted += 1;
        Ok(if self.limit_reached(plan) {
            Flow::Done
        } else {
            Flow::More
        })
    }
}

/// ORDER BY's comparison, as Couchbase's: collation per term, reversed for DESC; with
/// NULLS FIRST on a descending term or NULLS LAST on an ascending one, NULL and MISSING
/// move to the other end and keep their own order among themselves.
fn compare_rows(a: &[Value], b: &[Value], keys: &[SortKey]) -> Ordering {
    for (i, key) in keys.iter().enumerate() {
        let (Some(x), Some(y)) = (a.get(i), b.get(i)) else {
            break;
        };
        let c = if key.descending == key.nulls_last || is_unknown(x) == is_unknown(y) {
            collate(x, y)
        } else if is_unknown(x) {
            Ordering::Greater
        } else {
            Ordering::Less
        };
        let c = if key.descending { c.reverse() } else { c };
        if c != Ordering::Equal {
            return c;
        }
    }
    Ordering::Equal
}
