//! The operators' value rules (Couchbase's `expression/` package semantics): MISSING
//! operands make MISSING, other wrong types make NULL.

use std::cmp::Ordering;

use serde_json::Value as J;

use super::like::like;
use crate::ast::{BinaryOp, IsTest};
use crate::collate::{compare, equals, equals_json, Tri};
use crate::value::{float_value, Num, Value};

pub(crate) fn field(base: &Value, name: &str) -> Value {
    match base {
        Value::Json(j) => field_of(j, name),
        Value::Missing => Value::Missing,
    }
}

/// `base.name` over JSON: the field of an object, MISSING for anything else.
pub(crate) fn field_of(base: &J, name: &str) -> Value {
    match base {
        J::Object(map) => map.get(name).cloned().map_or(Value::Missing, Value::Json),
        _ => Value::Missing,
    }
}

pub(super) fn dynamic_field(base: &Value, name: &Value) -> Value {
    match name {
        Value::Json(J::String(s)) => field(base, s),
        Value::Missing => Value::Missing,
        _ if base.is_missing() => Value::Missing,
        _ => Value::NULL,
    }
}

/// `a[i]`: whole numbers index from the front, negative ones from the back.
pub(crate) fn element(base: &Value, index: &Value) -> Value {
    if index.is_missing() || base.is_missing() {
        return Value::Missing;
    }
    let Some(i) = index.as_number().and_then(Num::as_whole) else {
        return Value::NULL;
    };
    match base {
        Value::Json(J::Array(items)) => {
            let len = items.len() as i64;
            let i = if i < 0 { len + i } else { i };
            usize::try_from(i)
                .ok()
                .and_then(|i| items.get(i))
                .cloned()
                .map_or(Value::Missing, Value::Json)
        }
        _ => Value::Missing,
    }
}

pub(crate) fn not(v: &Value) -> Value {
    match v {
        Value::Missing => Value::Missing,
        _ if v.is_null() => Value::NULL,
        _ => Value::bool(!v.truthy()),
    }
}

pub(crate) fn neg(v: &Value) -> Value {
    match (v, v.as_number()) {
        (Value::Missing, _) => Value::Missing,
        (_, Some(Num::Int(i))) => i
            .checked_neg()
            .map_or_else(|| float_value(-(i as f64)), |n| Value::Json(n.into())),
        (_, Some(Num::Float(f))) => float_value(-f),
        _ => Value::NULL,
    }
}

pub(crate) fn binary(op: BinaryOp, a: &Value, b: &Value) -> Value {
    use BinaryOp as B;
    match op {
        B::Add | B::Sub | B::Mul | B::Div | B::Mod => arithmetic(op, a, b),
        B::Concat => concat(a, b),
        B::Eq => equals(a, b).into_value(),
        B::Ne => not(&equals(a, b).into_value()),
        B::Lt => ordered(a, b, |o| o == Ordering::Less),
        B::Le => ordered(a, b, |o| o != Ordering::Greater),
        B::Gt => ordered(a, b, |o| o == Ordering::Greater),
        B::Ge => ordered(a, b, |o| o != Ordering::Less),
        B::Like => like_op(a, b),
        B::NotLike => not(&like_op(a, b)),
        B::In => in_op(a, b),
        B::NotIn => not(&in_op(a, b)),
        // Short-circuiting AND/OR are evaluated by the caller; this is their plain form.
        B::And | B::Or => Value::NULL,
    }
}

fn ordered(a: &Value, b: &Value, pred: impl Fn(Ordering) -> bool) -> Value {
    match compare(a, b) {
        Tri::Missing => Value::Missing,
        Tri::Null => Value::NULL,
        Tri::Known(o) => Value::bool(pred(o)),
    }
}

fn arithmetic(op: BinaryOp, a: &Value, b: &Value) -> Value {
    if a.is_missing() || b.is_missing() {
        return Value::Missing;
    }
    let (Some(x), Some(y)) = (a.as_number(), b.as_number()) else {
        return Value::NULL;
    };
    if matches!(op, BinaryOp::Div | BinaryOp::Mod) && y.as_f64() == 0.0 {
        return Value::NULL;
    }
    if let (Num::Int(x), Num::Int(y)) = (x, y) {
        let exact = match op {
            BinaryOp::Add => x.checked_add(y),
            BinaryOp::Sub => x.checked_sub(y),
            BinaryOp::Mul => x.checked_mul(y),
            BinaryOp::Mod => x.checked_rem(y),
            _ => None,
        };
        if let Some(n) = exact {
            return Value::Json(n.into());
        }
    }
    let (x, y) = (x.as_f64(), y.as_f64());
    float_value(match op {
        BinaryOp::Add => x + y,
        BinaryOp::Sub => x - y,
        BinaryOp::Mul => x * y,
        BinaryOp::Div => x / y,
        _ => x % y,
    })
}

fn concat(a: &Value, b: &Value) -> Value {
    if a.is_missing() || b.is_missing() {
        return Value::Missing;
    }
    match (a.as_str(), b.as_str()) {
        (Some(x), Some(y)) => Value::string(format!("{x}{y}")),
        _ => Value::NULL,
    }
}

fn like_op(a: &Value, pattern: &Value) -> Value {
    if a.is_missing() || pattern.is_missing() {
        return Value::Missing;
    }
    match (a.as_str(), pattern.as_str()) {
        (Some(s), Some(p)) => Value::bool(like(s, p)),
        _ => Value::NULL,
    }
}

/// `x IN array`: TRUE on an equal element; else NULL if the array held a null, FALSE
/// otherwise. A NULL `x` is FALSE against `[]` and NULL otherwise.
fn in_op(x: &Value, list: &Value) -> Value {
    if x.is_missing() || list.is_missing() {
        return Value::Missing;
    }
    let Value::Json(J::Array(items)) = list else {
        return Value::NULL;
    };
    let Value::Json(x) = x else {
        return Value::Missing;
    };
    if x.is_null() {
        return if items.is_empty() {
            Value::FALSE
        } else {
            Value::NULL
        };
    }
    let mut null = false;
    for item in items {
        if item.is_null() {
            null = true;
        } else if equals_json(x, item) == Tri::Known(true) {
            return Value::TRUE;
        }
    }
    if null {
        Value::NULL
    } else {
        Value::FALSE
    }
}

pub(super) fn between(x: &Value, low: &Value, high: &Value) -> Value {
    match (compare(x, low), compare(x, high)) {
        (Tri::Missing, _) | (_, Tri::Missing) => Value::Missing,
        (Tri::Known(l), Tri::Known(h)) => {
            Value::bool(l != Ordering::Less && h != Ordering::Greater)
        }
        _ => Value::NULL,
    }
}

pub(crate) fn is(v: &Value, test: IsTest) -> Value {
    let (missing, null) = (v.is_missing(), v.is_null());
    match test {
        IsTest::Null if missing => Value::Missing,
        IsTest::NotNull if missing => Value::Missing,
        IsTest::Null => Value::bool(null),
        IsTest::NotNull => Value::bool(!null),
        IsTest::Missing => Value::bool(missing),
        IsTest::NotMissing => Value::bool(!missing),
        IsTest::Valued => Value::bool(!missing && !null),
        IsTest::NotValued => Value::bool(missing || null),
    }
}

/// AND or OR, in SQL++'s three-valued logic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Logic {
    And,
    Or,
}

/// Evaluates the two sides in turn and stops at the first that decides (FALSE for AND,
/// TRUE for OR). Otherwise AND gives MISSING before NULL before TRUE, and OR gives NULL
/// before MISSING before FALSE, as Couchbase does.
pub(crate) fn logical<E>(op: Logic, sides: [&dyn Fn() -> Result<Value, E>; 2]) -> Result<Value, E> {
    let decisive = op == Logic::Or;
    let (mut missing, mut null) = (false, false);
    for side in sides {
        let v = side()?;
        match v {
            Value::Missing => missing = true,
            _ if v.is_null() => null = true,
            _ if v.truthy() == decisive => return Ok(Value::bool(decisive)),
            _ => {}
        }
    }
    Ok(match op {
        Logic::And if missing => Value::Missing,
        Logic::And if null => Value::NULL,
        Logic::And => Value::TRUE,
        Logic::Or if null => Value::NULL,
        Logic::Or if missing => Value::Missing,
        Logic::Or => Value::FALSE,
    })
}
