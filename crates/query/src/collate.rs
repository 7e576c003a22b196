//! Ordering and equality of values.
//!
//! Two relations, as Couchbase has two (`value.Collate` and `value.Compare`/`Equals`):
//! - [`collate`]: a total order for ORDER BY, DISTINCT, grouping and MIN/MAX. Types order
//!   `MISSING < NULL < FALSE < TRUE < numbers < strings < arrays < objects`; numbers by
//!   exact value (`1 = 1.0 = 1e0`, `-0.0 = 0`, integers beyond 2^53 exactly); strings by
//!   UTF-8 bytes; arrays element by element, then the shorter first; objects with fewer
//!   fields first, then name by name in sorted order over both objects' names: at the
//!   first name only one side has, the side lacking it is the larger.
//! - [`compare`] and [`equals`]: what the operators see. The same order, except that a
//!   MISSING operand makes the result MISSING and a NULL makes it NULL, also when they
//!   meet inside arrays and objects; and values of different types are never equal.

use std::cmp::Ordering;

use serde_json::{Map, Number, Value as J};

use crate::value::{json_type, Type, Value};

/// A three-valued result: MISSING, NULL, or a definite answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tri<T> {
    Missing,
    Null,
    Known(T),
}

impl Tri<bool> {
    pub fn into_value(self) -> Value {
        match self {
            Tri::Missing => Value::Missing,
            Tri::Null => Value::NULL,
            Tri::Known(b) => Value::bool(b),
        }
    }
}

pub fn collate(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Missing, Value::Missing) => Ordering::Equal,
        (Value::Missing, _) => Ordering::Less,
        (_, Value::Missing) => Ordering::Greater,
        (Value::Json(x), Value::Json(y)) => collate_json(x, y),
    }
}

pub fn collate_json(a: &J, b: &J) -> Ordering {
    match (a, b) {
        (J::Bool(x), J::Bool(y)) => x.cmp(y),
        (J::Number(x), J::Number(y)) => compare_numbers(x, y),
        (J::String(x), J::String(y)) => x.as_bytes().cmp(y.as_bytes()),
        (J::Array(x), J::Array(y)) => {
            for (p, q) in x.iter().zip(y) {
                let c = collate_json(p, q);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (J::Object(x), J::Object(y)) => collate_objects(x, y),
        _ => json_type(a).cmp(&json_type(b)),
    }
}

/// Numbers compare by exact value, integers and floats alike (`1 = 1.0`, `-0.0 = 0`).
/// Going through f64 for a mixed pair, as this once did, broke transitivity beyond 2^53:
/// `2^53 + 1 = 2^53.0` and `2^53.0 = 2^53`, yet `2^53 + 1 > 2^53`, which a sort or a
/// `BTreeSet` of collated values (and the index key encoding) cannot live with.
pub(crate) fn compare_numbers(a: &Number, b: &Number) -> Ordering {
    match (exact(a), exact(b)) {
        (Exact::Int(x), Exact::Int(y)) => x.cmp(&y),
        // JSON numbers are finite, so this never falls back.
        (Exact::Float(x), Exact::Float(y)) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
        (Exact::Int(x), Exact::Float(y)) => int_vs_float(x, y),
        (Exact::Float(x), Exact::Int(y)) => int_vs_float(y, x).reverse(),
    }
}

/// A JSON number as it is held: an i64 or u64 (both fit an i128), or a float.
enum Exact {
    Int(i128),
    Float(f64),
}

fn exact(n: &Number) -> Exact {
    if let Some(i) = n.as_i64() {
        Exact::Int(i.into())
    } else if let Some(u) = n.as_u64() {
        Exact::Int(u.into())
    } else {
        Exact::Float(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// Exact comparison of an integer in [-2^63, 2^64) with a finite float.
fn int_vs_float(i: i128, f: f64) -> Ordering {
    const TWO_64: f64 = 18_446_744_073_709_551_616.0;
    if f >= TWO_64 {
        return Ordering::Less;
    }
    if f <= -TWO_64 {
        return Ordering::Greater;
    }
    if f.is_nan() {
        return Ordering::Equal;
    }
    // |t| < 2^64, so the cast is exact; `f - t` (the fraction, exact) breaks a tie.
    let t = f.trunc();
    i.cmp(&(t as i128))
        .then_with(|| 0.0f64.partial_cmp(&(f - t)).unwrap_or(Ordering::Equal))
}

/// Walks the sorted union of two objects' names (serde_json keeps maps sorted) and yields,
/// for the first name that differs, which side lacks it; or each shared name's values.
fn object_walk<T>(
    x: &Map<String, J>,
    y: &Map<String, J>,
    mut on_both: impl FnMut(&J, &J) -> Option<T>,
    lacks: impl Fn(Ordering) -> T,
) -> Option<T> {
    let (mut i, mut j) = (x.iter().peekable(), y.iter().peekable());
    loop {
        match (i.peek(), j.peek()) {
            (None, None) => return None,
            // The side lacking the smaller name is the larger one.
            (Some(_), None) => return Some(lacks(Ordering::Less)),
            (None, Some(_)) => return Some(lacks(Ordering::Greater)),
            (Some((kx, vx)), Some((ky, vy))) => match kx.as_bytes().cmp(ky.as_bytes()) {
                Ordering::Less => return Some(lacks(Ordering::Less)),
                Ordering::Greater => return Some(lacks(Ordering::Greater)),
                Ordering::Equal => {
                    if let Some(t) = on_both(vx, vy) {
                        return Some(t);
                    }
                    i.next();
                    j.next();
                }
            },
        }
    }
}

fn collate_objects(x: &Map<String, J>, y: &Map<String, J>) -> Ordering {
    if x.len() != y.len() {
        return x.len().cmp(&y.len());
    }
    object_walk(
        x,
        y,
        |p, q| Some(collate_json(p, q)).filter(|c| *c != Ordering::Equal),
        |o| o,
    )
    .unwrap_or(Ordering::Equal)
}

/// The ordering operators (`<`, `<=`, `>`, `>=`, BETWEEN) see.
pub fn compare(a: &Value, b: &Value) -> Tri<Ordering> {
    match (a, b) {
        (Value::Missing, _) | (_, Value::Missing) => Tri::Missing,
        (Value::Json(x), Value::Json(y)) => compare_json(x, y),
    }
}

fn compare_json(a: &J, b: &J) -> Tri<Ordering> {
    match (a, b) {
        (J::Null, _) | (_, J::Null) => Tri::Null,
        (J::Array(x), J::Array(y)) => {
            for (p, q) in x.iter().zip(y) {
                match compare_json(p, q) {
                    Tri::Known(Ordering::Equal) => {}
                    other => return other,
                }
            }
            Tri::Known(x.len().cmp(&y.len()))
        }
        (J::Object(x), J::Object(y)) => {
            if x.len() != y.len() {
                return Tri::Known(x.len().cmp(&y.len()));
            }
            object_walk(
                x,
                y,
                |p, q| match compare_json(p, q) {
                    Tri::Known(Ordering::Equal) => None,
                    other => Some(other),
                },
                Tri::Known,
            )
            .unwrap_or(Tri::Known(Ordering::Equal))
        }
        _ => Tri::Known(collate_json(a, b)),
    }
}

/// What `=` sees: MISSING or NULL operands propagate; different types are unequal.
pub fn equals(a: &Value, b: &Value) -> Tri<bool> {
    match (a, b) {
        (Value::Missing, _) | (_, Value::Missing) => Tri::Missing,
        (Value::Json(x), Value::Json(y)) => equals_json(x, y),
    }
}

pub(crate) fn equals_json(a: &J, b: &J) -> Tri<bool> {
    match (a, b) {
        (J::Null, _) | (_, J::Null) => Tri::Null,
        (J::Array(x), J::Array(y)) => {
            if x.len() != y.len() {
                return Tri::Known(false);
            }
            all_equal(x.iter().zip(y))
        }
        (J::Object(x), J::Object(y)) => {
            if x.len() != y.len() || !x.keys().eq(y.keys()) {
                return Tri::Known(false);
            }
            all_equal(x.values().zip(y.values()))
        }
        _ if json_type(a) != json_type(b) => Tri::Known(false),
        _ => Tri::Known(collate_json(a, b) == Ordering::Equal),
    }
}

/// A definite FALSE wins; then MISSING, then NULL; else TRUE.
fn all_equal<'a>(pairs: impl Iterator<Item = (&'a J, &'a J)>) -> Tri<bool> {
    let (mut missing, mut null) = (false, false);
    for (p, q) in pairs {
        match equals_json(p, q) {
            Tri::Known(false) => return Tri::Known(false),
            Tri::Known(true) => {}
            Tri::Missing => missing = true,
            Tri::Null => null = true,
        }
    }
    if missing {
        Tri::Missing
    } else if null {
        Tri::Null
    } else {
        Tri::Known(true)
    }
}

/// Whether collation puts the value among the "nulls" of `NULLS FIRST|LAST`.
pub(crate) fn is_unknown(v: &Value) -> bool {
    v.kind() <= Type::Null
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v(j: J) -> Value {
        Value::Json(j)
    }

    #[test]
    fn collation_orders_types_then_values() {
        let ordered = [
            Value::Missing,
            v(json!(null)),
            v(json!(false)),
            v(json!(true)),
            v(json!(-1.5)),
            v(json!(0)),
            v(json!(2)),
            v(json!(2.5)),
            v(json!("")),
            v(json!("B")),
            v(json!("a")),
            v(json!("é")),
            v(json!([])),
            v(json!([1])),
            v(json!([1, 2])),
            v(json!([2])),
            v(json!({})),
            v(json!({"b": 1})),
            v(json!({"a": 1, "b": 2})),
            v(json!({"a": 1, "b": 3})),
            v(json!({"a": 2, "b": 0})),
        ];
        for (i, a) in ordered.iter().enumerate() {
            for (j, b) in ordered.iter().enumerate() {
                assert_eq!(collate(a, b), i.cmp(&j), "{a:?} vs {b:?}");
            }
        }
        assert_eq!(collate(&v(json!(1)), &v(json!(1.0))), Ordering::Equal);
    }

    #[test]
    fn numbers_compare_by_exact_value() {
        let n = |j: J| match j {
            J::Number(n) => n,
            _ => unreachable!(),
        };
        let two_53 = 9_007_199_254_740_992_i64;
        // Through f64, 2^53 + 1 would equal 2^53.0, which equals 2^53 < 2^53 + 1.
        assert_eq!(
            compare_numbers(&n(json!(two_53 + 1)), &n(json!(two_53 as f64))),
            Ordering::Greater
        );
        assert_eq!(
            compare_numbers(&n(json!(two_53)), &n(json!(two_53 as f64))),
            Ordering::Equal
        );
        assert_eq!(
            compare_numbers(&n(json!(u64::MAX)), &n(json!(18_446_744_073_709_551_616.0))),
            Ordering::Less
        );
        assert_eq!(
            compare_numbers(&n(json!(i64::MIN)), &n(json!(-9_223_372_036_854_775_808.0))),
            Ordering::Equal
        );
        assert_eq!(
            compare_numbers(
                &n(json!(i64::MAX)),
                &n(json!(9_223_372_036_854_775_808_u64))
            ),
            Ordering::Less
        );
        assert_eq!(
            compare_numbers(&n(json!(-2)), &n(json!(-1.5))),
            Ordering::Less
        );
        assert_eq!(
            compare_numbers(&n(json!(-1)), &n(json!(-1.5))),
            Ordering::Greater
        );
        assert_eq!(
            compare_numbers(&n(json!(0)), &n(json!(-0.0))),
            Ordering::Equal
        );
        assert_eq!(
            compare_numbers(&n(json!(0)), &n(json!(5e-324))),
            Ordering::Less
        );
        assert_eq!(
            equals(&v(json!(two_53 + 1)), &v(json!(two_53 as f64))),
            Tri::Known(false)
        );
    }

    #[test]
    fn objects_with_different_names_follow_couchbase() {
        // Same size: the first differing name decides, and the side lacking it is larger.
        assert_eq!(
            collate_json(&json!({"a": 1}), &json!({"b": 0})),
            Ordering::Less
        );
        assert_eq!(
            collate_json(&json!({"a": 9, "c": 1}), &json!({"a": 9, "b": 1})),
            Ordering::Greater
        );
    }

    #[test]
    fn operators_propagate_missing_and_null() {
        assert_eq!(compare(&Value::Missing, &v(json!(1))), Tri::Missing);
        assert_eq!(compare(&v(json!(null)), &v(json!(1))), Tri::Null);
        assert_eq!(compare(&v(json!(null)), &Value::Missing), Tri::Missing);
        assert_eq!(compare(&v(json!([null])), &v(json!([1]))), Tri::Null);
        assert_eq!(
            compare(&v(json!([0, null])), &v(json!([1]))),
            Tri::Known(Ordering::Less)
        );
        assert_eq!(
            compare(&v(json!(1)), &v(json!("a"))),
            Tri::Known(Ordering::Less)
        );
        assert_eq!(equals(&v(json!(1)), &v(json!("1"))), Tri::Known(false));
        assert_eq!(equals(&v(json!(1)), &v(json!(1.0))), Tri::Known(true));
        assert_eq!(
            equals(&v(json!([1, null])), &v(json!([1, null]))),
            Tri::Null
        );
        assert_eq!(
            equals(&v(json!([2, null])), &v(json!([1, null]))),
            Tri::Known(false)
        );
        assert_eq!(
            equals(&v(json!({"a": [1]})), &v(json!({"a": [1]}))),
            Tri::Known(true)
        );
        assert_eq!(
            equals(&v(json!({"a": 1})), &v(json!({"b": 1}))),
            Tri::Known(false)
        );
    }
}
