//! Sets of values as sorted intervals, ordered by collation (`MISSING < NULL < booleans <
//! numbers < strings < arrays < objects`), which is also the index entries' byte order.
//!
//! A set here is always an over-approximation of what it describes, so operations only
//! need to be exact or widen: an interval judged non-empty that holds no value (`(1, 1]`
//! is caught, but `(null, false)` is not) costs an empty scan, nothing more.

use std::cmp::Ordering;
use std::ops::Bound;

use crate::collate::collate;
use crate::value::Value;

/// `low .. high` by collation; `Unbounded` low starts before MISSING, high ends past
/// every object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Interval {
    pub low: Bound<Value>,
    pub high: Bound<Value>,
}

impl Interval {
    pub fn new(low: Bound<Value>, high: Bound<Value>) -> Self {
        Interval { low, high }
    }

    fn is_empty(&self) -> bool {
        match (&self.low, &self.high) {
            (Bound::Unbounded, _) | (_, Bound::Unbounded) => false,
            (Bound::Included(a), Bound::Included(b)) => collate(a, b) == Ordering::Greater,
            (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
                collate(a, b) != Ordering::Less
            }
        }
    }

    /// The one value this interval holds, if it is `[v, v]`.
    pub fn point(&self) -> Option<&Value> {
        match (&self.low, &self.high) {
            (Bound::Included(a), Bound::Included(b)) if collate(a, b) == Ordering::Equal => Some(a),
            _ => None,
        }
    }
}

/// Orders lower bounds: Unbounded first, then by value, `[v` before `(v`.
fn cmp_low(a: &Bound<Value>, b: &Bound<Value>) -> Ordering {
    match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Ordering::Equal,
        (Bound::Unbounded, _) => Ordering::Less,
        (_, Bound::Unbounded) => Ordering::Greater,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            collate(x, y).then_with(|| match (a, b) {
                (Bound::Included(_), Bound::Excluded(_)) => Ordering::Less,
                (Bound::Excluded(_), Bound::Included(_)) => Ordering::Greater,
                _ => Ordering::Equal,
            })
        }
    }
}

/// Orders upper bounds: by value, `v)` before `v]`, Unbounded last.
fn cmp_high(a: &Bound<Value>, b: &Bound<Value>) -> Ordering {
    match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Ordering::Equal,
        (Bound::Unbounded, _) => Ordering::Greater,
        (_, Bound::Unbounded) => Ordering::Less,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            collate(x, y).then_with(|| match (a, b) {
                (Bound::Excluded(_), Bound::Included(_)) => Ordering::Less,
                (Bound::Included(_), Bound::Excluded(_)) => Ordering::Greater,
                _ => Ordering::Equal,
            })
        }
    }
}

/// Whether an interval ending at `high` and one starting at `low` (not before it) leave
/// no value between them, so their union is one interval.
fn joins(high: &Bound<Value>, low: &Bound<Value>) -> bool {
    match (high, low) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => true,
        (Bound::Excluded(h), Bound::Excluded(l)) => collate(h, l) == Ordering::Greater,
        (Bound::Included(h) | Bound::Excluded(h), Bound::Included(l) | Bound::Excluded(l)) => {
            collate(h, l) != Ordering::Less
        }
    }
}

/// A union of intervals, sorted by low bound, pairwise disjoint, none empty.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ValueSet {
    intervals: Vec<Interval>,
}

impl ValueSet {
    pub fn empty() -> Self {
        ValueSet {
            intervals: Vec::new(),
        }
    }

    #[cfg(test)]
    pub fn all() -> Self {
        ValueSet::range(Bound::Unbounded, Bound::Unbounded)
    }

    pub fn point(v: Value) -> Self {
        ValueSet::range(Bound::Included(v.clone()), Bound::Included(v))
    }

    pub fn range(low: Bound<Value>, high: Bound<Value>) -> Self {
        ValueSet::from_intervals(vec![Interval::new(low, high)])
    }

    /// Sorts and merges any intervals into a set.
    pub fn from_intervals(mut list: Vec<Interval>) -> Self {
        list.retain(|i| !i.is_empty());
        list.sort_by(|a, b| cmp_low(&a.low, &b.low));
        let mut out: Vec<Interval> = Vec::with_capacity(list.len());
        for next in list {
            match out.last_mut() {
                Some(last) if joins(&last.high, &next.low) => {
                    if cmp_high(&next.high, &last.high) == Ordering::Greater {
                        last.high = next.high;
                    }
                }
                _ => out.push(next),
            }
        }
        ValueSet { intervals: out }
    }

    pub fn intervals(&self) -> &[Interval] {
        &self.intervals
    }

    pub fn is_empty(&self) -> bool {
        self.intervals.is_empty()
    }

    /// Whether every value, MISSING included, is in the set.
    pub fn is_all(&self) -> bool {
        match self.intervals.as_slice() {
            [only] => {
                matches!(only.high, Bound::Unbounded)
                    && matches!(
                        &only.low,
                        Bound::Unbounded | Bound::Included(Value::Missing)
                    )
            }
            _ => false,
        }
    }

    /// Whether MISSING (the least value) is outside the set.
    pub fn excludes_missing(&self) -> bool {
        match self.intervals.first() {
            None => true,
            Some(first) => !matches!(
                &first.low,
                Bound::Unbounded | Bound::Included(Value::Missing)
            ),
        }
    }

    /// The values, when the set is a finite list of single values.
    pub fn points(&self) -> Option<Vec<&Value>> {
        self.intervals.iter().map(Interval::point).collect()
    }

    /// The smallest single interval holding the whole set (None when it is empty).
    pub fn hull(&self) -> Option<Interval> {
        let first = self.intervals.first()?;
        let last = self.intervals.last()?;
        Some(Interval::new(first.low.clone(), last.high.clone()))
    }

    pub fn union(&self, other: &ValueSet) -> ValueSet {
        let mut all = self.intervals.clone();
        all.extend(other.intervals.iter().cloned());
        ValueSet::from_intervals(all)
    }

    /// Both inputs are sorted and disjoint, so one merge-like pass finds every overlap.
    pub fn intersect(&self, other: &ValueSet) -> ValueSet {
        let (a, b) = (&self.intervals, &other.intervals);
        let (mut i, mut j) = (0, 0);
        let mut out = Vec::new();
        while let (Some(x), Some(y)) = (a.get(i), b.get(j)) {
            let low = if cmp_low(&x.low, &y.low) == Ordering::Greater {
                &x.low
            } else {
                &y.low
            };
            let x_ends_first = cmp_high(&x.high, &y.high) == Ordering::Less;
            let high = if x_ends_first { &x.high } else { &y.high };
            let overlap = Interval::new(low.clone(), high.clone());
            if !overlap.is_empty() {
                out.push(overlap);
            }
            if x_ends_first {
                i += 1;
            } else {
                j += 1;
            }
        }
        ValueSet { intervals: out }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v(j: serde_json::Value) -> Value {
        Value::Json(j)
    }

    fn set(ranges: &[(Bound<i64>, Bound<i64>)]) -> ValueSet {
        let b = |x: &Bound<i64>| match x {
            Bound::Included(n) => Bound::Included(v(json!(n))),
            Bound::Excluded(n) => Bound::Excluded(v(json!(n))),
            Bound::Unbounded => Bound::Unbounded,
        };
        let list = ranges
            .iter()
            .map(|(l, h)| Interval::new(b(l), b(h)))
            .collect();
        ValueSet::from_intervals(list)
    }

    #[test]
    fn union_merges_overlapping_and_touching_intervals_only() {
        use Bound::{Excluded as E, Included as I};
        let a = set(&[(I(1), E(3)), (I(3), I(5))]);
        assert_eq!(a, set(&[(I(1), I(5))]));
        // (1, 3) and (3, 5) leave 3 out: two intervals.
        assert_eq!(set(&[(E(1), E(3)), (E(3), E(5))]).intervals().len(), 2);
        assert!(set(&[(E(1), I(1))]).is_empty());
        assert!(!set(&[(I(1), I(1))]).is_empty());
    }

    #[test]
    fn intersect_keeps_each_overlap() {
        use Bound::{Excluded as E, Included as I, Unbounded as U};
        let a = set(&[(I(1), I(3)), (I(5), I(9))]);
        let b = set(&[(E(2), I(6)), (I(8), U)]);
        assert_eq!(
            a.intersect(&b),
            set(&[(E(2), I(3)), (I(5), I(6)), (I(8), I(9))])
        );
        assert!(a.intersect(&ValueSet::empty()).is_empty());
        assert_eq!(a.intersect(&ValueSet::all()), a);
    }

    #[test]
    fn missing_is_the_least_value() {
        assert!(!ValueSet::all().excludes_missing());
        assert!(!ValueSet::point(Value::Missing).excludes_missing());
        assert!(
            ValueSet::range(Bound::Excluded(Value::Missing), Bound::Unbounded).excludes_missing()
        );
        assert!(ValueSet::point(Value::NULL).excludes_missing());
        assert!(ValueSet::range(Bound::Included(Value::Missing), Bound::Unbounded).is_all());
    }

    #[test]
    fn points_across_types() {
        let s = ValueSet::point(v(json!("a"))).union(&ValueSet::point(v(json!(1))));
        let pts = s.points().expect("points");
        assert_eq!(pts, vec![&v(json!(1)), &v(json!("a"))]);
        assert_eq!(
            ValueSet::point(v(json!(1.0)))
                .union(&ValueSet::point(v(json!(1))))
                .intervals()
                .len(),
            1
        );
    }
}
