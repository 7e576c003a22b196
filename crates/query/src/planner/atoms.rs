//! The values a key can have when `key op constant` is true, and when it is false, per
//! operator, as the evaluator (`eval::ops`, `collate`) decides them:
//!
//! - `=`, `<`, `<=`, `>`, `>=`, BETWEEN, IN: MISSING makes MISSING and NULL makes NULL, on
//!   either side, so both sets lie above NULL. Values of different types compare by
//!   collation (`"x" > 5` is TRUE), so ranges do not stop at a type's end. A comparison
//!   that is TRUE or FALSE agrees with collation, and `=` is TRUE only between values that
//!   collate equal, which is what makes the sets sound. A NULL or MISSING constant makes
//!   the result NULL or MISSING for every row: both sets are empty.
//! - IN is FALSE for `null IN []`, and FALSE for a value equal to an item containing a
//!   null (`[null] IN [[null]]`, the equality being NULL), so those stay in its false set.
//! - LIKE is TRUE or FALSE only for strings.
//! - The IS tests never yield NULL; `IS [NOT] NULL` of MISSING is MISSING.

use std::ops::Bound::{self, Excluded, Included, Unbounded};

use super::interval::{Interval, ValueSet};
use super::like_prefix::{like_shape, prefix_successor, LikeShape};
use crate::ast::IsTest;
use crate::value::Value;

/// Where `key op constant` is true and where it is false.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sets {
    pub truthy: ValueSet,
    pub falsy: ValueSet,
}

/// An ordering comparison with the key on the left (the caller flips `c < k`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cmp {
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cmp {
    /// `c op k` as `k flipped(op) c`.
    pub fn flipped(self) -> Cmp {
        match self {
            Cmp::Lt => Cmp::Gt,
            Cmp::Le => Cmp::Ge,
            Cmp::Gt => Cmp::Lt,
            Cmp::Ge => Cmp::Le,
        }
    }
}

fn unknown() -> Sets {
    Sets {
        truthy: ValueSet::empty(),
        falsy: ValueSet::empty(),
    }
}

fn is_unknown(v: &Value) -> bool {
    v.is_missing() || v.is_null()
}

/// Every value above NULL: what a comparison can be TRUE or FALSE for.
fn valued() -> ValueSet {
    ValueSet::range(Excluded(Value::NULL), Unbounded)
}

/// Values above NULL except those collating equal to one of `points`, which must be in
/// ascending order (a set's points are): each gap runs from one point to the next.
fn valued_except(points: &[&Value]) -> ValueSet {
    let mut low = Excluded(Value::NULL);
    let mut list = Vec::with_capacity(points.len() + 1);
    for p in points {
        list.push(Interval::new(low, Excluded((*p).clone())));
        low = Excluded((*p).clone());
    }
    list.push(Interval::new(low, Unbounded));
    ValueSet::from_intervals(list)
}

pub(crate) fn equals(c: &Value) -> Sets {
    if is_unknown(c) {
        return unknown();
    }
    Sets {
        truthy: ValueSet::point(c.clone()),
        falsy: valued_except(&[c]),
    }
}

pub(crate) fn compare(op: Cmp, c: &Value) -> Sets {
    if is_unknown(c) {
        return unknown();
    }
    let below = |inclusive: bool| {
        let high = if inclusive { Included } else { Excluded };
        ValueSet::range(Excluded(Value::NULL), high(c.clone()))
    };
    let above = |inclusive: bool| {
        let low = if inclusive { Included } else { Excluded };
        ValueSet::range(low(c.clone()), Unbounded)
    };
    let (truthy, falsy) = match op {
        Cmp::Lt => (below(false), above(true)),
        Cmp::Le => (below(true), above(false)),
        Cmp::Gt => (above(false), below(true)),
        Cmp::Ge => (above(true), below(false)),
    };
    Sets { truthy, falsy }
}

pub(crate) fn between(low: &Value, high: &Value) -> Sets {
    if is_unknown(low) || is_unknown(high) {
        return unknown();
    }
    let truthy = ValueSet::range(Included(low.clone()), Included(high.clone()));
    let falsy = ValueSet::from_intervals(vec![
        Interval::new(Excluded(Value::NULL), Excluded(low.clone())),
        Interval::new(Excluded(high.clone()), Unbounded),
    ]);
    Sets { truthy, falsy }
}

pub(crate) fn in_list(list: &Value) -> Sets {
    let Some(serde_json::Value::Array(items)) = list.as_json() else {
        return unknown();
    };
    if items.is_empty() {
        // `null IN []` is FALSE, not NULL.
        return Sets {
            truthy: ValueSet::empty(),
            falsy: ValueSet::range(Included(Value::NULL), Unbounded),
        };
    }
    let values: Vec<Value> = items
        .iter()
        .filter(|i| !i.is_null())
        .map(|i| Value::Json(i.clone()))
        .collect();
    let truthy = ValueSet::from_intervals(
        values
            .iter()
            .map(|v| Interval::new(Included(v.clone()), Included(v.clone())))
            .collect(),
    );
    if values.len() < items.len() {
        // A null item makes every non-match NULL.
        return Sets {
            truthy,
            falsy: ValueSet::empty(),
        };
    }
    // Only items without a nested null are certain to be TRUE when matched.
    let certain: Vec<&Value> = truthy
        .points()
        .unwrap_or_default()
        .into_iter()
        .filter(|v| v.as_json().is_some_and(|j| !holds_null(j)))
        .collect();
    let falsy = valued_except(&certain);
    Sets { truthy, falsy }
}

fn holds_null(j: &serde_json::Value) -> bool {
    match j {
        serde_json::Value::Null => true,
        serde_json::Value::Array(items) => items.iter().any(holds_null),
        serde_json::Value::Object(map) => map.values().any(holds_null),
        _ => false,
    }
}

/// None when the pattern starts with a wildcard: not sargable.
pub(crate) fn like(pattern: &Value) -> Option<Sets> {
    let Some(p) = pattern.as_str() else {
        // A non-string pattern makes LIKE NULL (or MISSING) for every row.
        return Some(unknown());
    };
    let truthy = match like_shape(p) {
        LikeShape::Anything => return None,
        LikeShape::Exact(s) => ValueSet::point(Value::string(s)),
        LikeShape::Prefix(s) => {
            let high =
                prefix_successor(&s).map_or_else(strings_end, |n| Excluded(Value::string(n)));
            ValueSet::range(Included(Value::string(s)), high)
        }
    };
    Some(Sets {
        truthy,
        falsy: ValueSet::range(Included(Value::string("")), strings_end()),
    })
}

/// Just past every string: the empty array is the least value above them.
fn strings_end() -> Bound<Value> {
    Excluded(Value::Json(serde_json::Value::Array(Vec::new())))
}

/// The strings: every document key is one.
pub(crate) fn strings() -> ValueSet {
    ValueSet::range(Included(Value::string("")), strings_end())
}

pub(crate) fn is(test: IsTest) -> Sets {
    let null = || ValueSet::point(Value::NULL);
    let missing = || ValueSet::point(Value::Missing);
    let not_missing = || ValueSet::range(Included(Value::NULL), Unbounded);
    let unknown = || ValueSet::range(Included(Value::Missing), Included(Value::NULL));
    let (truthy, falsy) = match test {
        IsTest::Null => (null(), valued()),
        IsTest::NotNull => (valued(), null()),
        IsTest::Missing => (missing(), not_missing()),
        IsTest::NotMissing => (not_missing(), missing()),
        IsTest::Valued => (valued(), unknown()),
        IsTest::NotValued => (unknown(), valued()),
    };
    Sets { truthy, falsy }
}
