//! Ordering and equality of values.
//!
//! Two relations, as Couchbase has two (`value.Collate` and `value.Compare`/`Equals`):
//! - [`collate`]: a total order for ORDER BY, DISTINCT, grouping and MIN/MAX. Types order
//!   `MISSING < NULL < FALSE < TRUE < numbers < strings < arrays < objects`; strings by
//!   UTF-8 bytes; arrays element by element, then the shorter first; objects with fewer
//!   fields first, then name by name in sorted order over both objects' names: at the
//!   first name only one side has, the side lacking it is the larger.
//! - [`compare`] and [`equals`]: what the operators see. The same order, except that a
//!   MISSING operand makes the result MISSING and a NULL makes it NULL, also when they
//!   meet inside arrays and objects; and values of different types are never equal.

use std::cmp::Ordering;

use serde_json::{Map, Number, Value as J};

use crate::value::{json_type, Num, Type, Value};

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

pub(crate) fn compare_numbers(a: &Number, b: &Number) -> Ordering {
    match (Num::of(a), Num::of(b)) {
        (Num::Int(x), Num::Int(y)) => x.cmp(&y),
        (x, y) => x
            .as_f64()
            .partial_cmp(&y.as_f64())
            .unwrap_or(Ordering::Equal),
    }
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
