//! The scalar functions, with Couchbase's argument rules: a MISSING argument usually makes
//! MISSING, an argument of the wrong type NULL.

use serde_json::Value as J;

use super::Func;
use crate::collate::{equals, Tri};
use crate::error::Result;
use crate::value::{float_value, Num, Value};

/// Applies `func` to evaluated arguments. The parser checked the count; a short list from a
/// hand-built tree reads as MISSING arguments rather than panicking.
pub(crate) fn call(func: Func, args: Vec<Value>) -> Result<Value> {
    let arg = |i: usize| args.get(i).cloned().unwrap_or(Value::Missing);
    Ok(match func {
        Func::Lower => string_map(&arg(0), |s| s.to_lowercase()),
        Func::Upper => string_map(&arg(0), |s| s.to_uppercase()),
        // Bytes, as Couchbase counts them.
        Func::Length => match arg(0) {
            Value::Missing => Value::Missing,
            v => v
                .as_str()
                .map_or(Value::NULL, |s| Value::Json((s.len() as u64).into())),
        },
        Func::Contains => {
            let (s, sub) = (arg(0), arg(1));
            if s.is_missing() || sub.is_missing() {
                Value::Missing
            } else {
                match (s.as_str(), sub.as_str()) {
                    (Some(s), Some(sub)) => Value::bool(s.contains(sub)),
                    _ => Value::NULL,
                }
            }
        }
        Func::Substr => substr(&args),
        Func::ArrayLength => match arg(0) {
            Value::Missing => Value::Missing,
            Value::Json(J::Array(a)) => Value::Json((a.len() as u64).into()),
            _ => Value::NULL,
        },
        Func::ArrayContains => array_contains(&arg(0), &arg(1)),
        Func::IfMissing => first(args, |v| !v.is_missing()),
        Func::IfNull => first(args, |v| !v.is_null()),
        Func::IfMissingOrNull => first(args, |v| !v.is_missing() && !v.is_null()),
        Func::ToString => to_string(arg(0)),
        Func::ToNumber => to_number(&arg(0), args.get(1)),
        Func::Type => Value::string(arg(0).kind().name()),
        Func::Abs => number_map(&arg(0), |n| match n {
            Num::Int(i) => i
                .checked_abs()
                .map_or(Num::Float((i as f64).abs()), Num::Int),
            Num::Float(f) => Num::Float(f.abs()),
        }),
        Func::Floor => number_map(&arg(0), |n| match n {
            Num::Float(f) => Num::Float(f.floor()),
            i => i,
        }),
        Func::Ceil => number_map(&arg(0), |n| match n {
            Num::Float(f) => Num::Float(f.ceil()),
            i => i,
        }),
        Func::Round => round(&arg(0), args.get(1)),
    })
}

fn string_map(v: &Value, f: impl Fn(&str) -> String) -> Value {
    match v {
        Value::Missing => Value::Missing,
        _ => v.as_str().map_or(Value::NULL, |s| Value::string(f(s))),
    }
}

fn number_map(v: &Value, f: impl Fn(Num) -> Num) -> Value {
    match (v, v.as_number()) {
        (Value::Missing, _) => Value::Missing,
        (_, Some(n)) => f(n).into_value(),
        _ => Value::NULL,
    }
}

/// The first argument passing `keep`, else NULL.
fn first(args: Vec<Value>, keep: impl Fn(&Value) -> bool) -> Value {
    args.into_iter().find(|v| keep(v)).unwrap_or(Value::NULL)
}

/// `SUBSTR(s, pos[, len])`: 0-based byte positions (negative from the end), as Couchbase's
/// SUBSTR; a cut inside a UTF-8 sequence leaves U+FFFD where Couchbase leaves broken bytes.
fn substr(args: &[Value]) -> Value {
    if args.iter().any(Value::is_missing) {
        return Value::Missing;
    }
    let Some(s) = args.first().and_then(Value::as_str) else {
        return Value::NULL;
    };
    let mut whole = args
        .iter()
        .skip(1)
        .map(|a| a.as_number().and_then(Num::as_whole));
    let (Some(Some(pos)), len) = (whole.next(), whole.next()) else {
        return Value::NULL;
    };
    let bytes = s.as_bytes();
    let n = bytes.len() as i64;
    let pos = if pos < 0 { n + pos } else { pos };
    if pos < 0 || pos >= n {
        return Value::NULL;
    }
    let end = match len {
        None => n,
        Some(None) => return Value::NULL,
        Some(Some(l)) if l < 0 => return Value::NULL,
        Some(Some(l)) => pos.saturating_add(l).min(n),
    };
    let slice = bytes.get(pos as usize..end as usize).unwrap_or(&[]);
    Value::string(String::from_utf8_lossy(slice).into_owned())
}

fn array_contains(array: &Value, item: &Value) -> Value {
    if array.is_missing() || item.is_missing() {
        return Value::Missing;
    }
    let (Value::Json(J::Array(items)), false) = (array, item.is_null()) else {
        return Value::NULL;
    };
    let found = items
        .iter()
        .any(|i| equals(item, &Value::Json(i.clone())) == Tri::Known(true));
    Value::bool(found)
}

fn to_string(v: Value) -> Value {
    match v {
        Value::Missing => Value::Missing,
        Value::Json(J::Null) | Value::Json(J::String(_)) => v,
        Value::Json(J::Bool(b)) => Value::string(b.to_string()),
        Value::Json(J::Number(ref n)) => Value::string(match Num::of(n) {
            Num::Int(i) => i.to_string(),
            // Plain decimal notation, never an exponent (Go's FormatFloat 'f', -1).
            Num::Float(f) => format!("{f}"),
        }),
        Value::Json(j @ (J::Array(_) | J::Object(_))) => Value::string(j.to_string()),
    }
}

/// Numbers as they are, booleans as 1/0, strings parsed (after dropping blanks and the
/// characters of the optional second argument, a lone `,` read as the decimal point).
fn to_number(v: &Value, strip: Option<&Value>) -> Value {
    match v {
        Value::Missing => return Value::Missing,
        Value::Json(J::Null | J::Number(_)) => return v.clone(),
        Value::Json(J::Bool(b)) => return Value::Json(u8::from(*b).into()),
        _ => {}
    }
    let Some(s) = v.as_str() else {
        return Value::NULL;
    };
    let text = match strip {
        None => s.to_owned(),
        Some(strip) => {
            let Some(strip) = strip.as_str() else {
                return Value::NULL;
            };
            let kept: String = s
                .chars()
                .filter(|c| !c.is_whitespace() && !strip.contains(*c))
                .collect();
            if kept.matches(',').count() == 1 && !kept.contains('.') {
                kept.replace(',', ".")
            } else {
                kept
            }
        }
    };
    if let Ok(i) = text.parse::<i64>() {
        return Value::Json(i.into());
    }
    match text.parse::<f64>() {
        Ok(f) if f.is_finite() => {
            serde_json::Number::from_f64(f).map_or(Value::NULL, |n| Value::Json(J::Number(n)))
        }
        _ => Value::NULL,
    }
}

/// `ROUND(n[, digits])`, ties to even as Couchbase's ROUND does.
fn round(v: &Value, digits: Option<&Value>) -> Value {
    if v.is_missing() || digits.is_some_and(Value::is_missing) {
        return Value::Missing;
    }
    let Some(n) = v.as_number() else {
        return Value::NULL;
    };
    let prec = match digits {
        None => 0,
        Some(d) => match d.as_number().and_then(Num::as_whole) {
            Some(p) => p.clamp(-400, 400) as i32,
            None => return Value::NULL,
        },
    };
    if let (Num::Int(_), true) = (n, prec >= 0) {
        return n.into_value();
    }
    let x = n.as_f64();
    let pow = 10f64.powi(prec);
    let scaled = x.abs() * pow + 0.5;
    let mut r = scaled.floor();
    if r == scaled && r % 2.0 != 0.0 {
        r -= 1.0;
    }
    float_value(x.signum() * r / pow)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn j(v: J) -> Value {
        Value::Json(v)
    }

    fn run(f: Func, args: Vec<Value>) -> Value {
        call(f, args).unwrap()
    }

    #[test]
    fn strings() {
        assert_eq!(run(Func::Lower, vec![j(json!("AbÇ"))]), j(json!("abç")));
        assert_eq!(run(Func::Upper, vec![j(json!(1))]), Value::NULL);
        assert_eq!(run(Func::Upper, vec![Value::Missing]), Value::Missing);
        assert_eq!(run(Func::Length, vec![j(json!("é"))]), j(json!(2)));
        assert_eq!(
            run(Func::Contains, vec![j(json!("abc")), j(json!("bc"))]),
            Value::TRUE
        );
        assert_eq!(
            run(
                Func::Substr,
                vec![j(json!("hello")), j(json!(1)), j(json!(3))]
            ),
            j(json!("ell"))
        );
        assert_eq!(
            run(Func::Substr, vec![j(json!("hello")), j(json!(-3))]),
            j(json!("llo"))
        );
        assert_eq!(
            run(Func::Substr, vec![j(json!("hello")), j(json!(5))]),
            Value::NULL
        );
        assert_eq!(
            run(Func::Substr, vec![j(json!("hello")), j(json!(1.5))]),
            Value::NULL
        );
        assert_eq!(run(Func::ToString, vec![j(json!(1.5))]), j(json!("1.5")));
        assert_eq!(
            run(Func::ToString, vec![j(json!([1, "a"]))]),
            j(json!("[1,\"a\"]"))
        );
        assert_eq!(run(Func::ToString, vec![j(json!(true))]), j(json!("true")));
    }

    #[test]
    fn numbers() {
        assert_eq!(run(Func::ToNumber, vec![j(json!("12"))]), j(json!(12)));
        assert_eq!(run(Func::ToNumber, vec![j(json!("1.5"))]), j(json!(1.5)));
        assert_eq!(run(Func::ToNumber, vec![j(json!("x"))]), Value::NULL);
        assert_eq!(run(Func::ToNumber, vec![j(json!(true))]), j(json!(1)));
        assert_eq!(
            run(Func::ToNumber, vec![j(json!("1 234,5")), j(json!(""))]),
            j(json!(1234.5))
        );
        assert_eq!(run(Func::Abs, vec![j(json!(-3))]), j(json!(3)));
        assert_eq!(run(Func::Floor, vec![j(json!(-1.5))]), j(json!(-2)));
        assert_eq!(run(Func::Ceil, vec![j(json!(1.2))]), j(json!(2)));
        assert_eq!(run(Func::Round, vec![j(json!(2.5))]), j(json!(2)));
        assert_eq!(run(Func::Round, vec![j(json!(3.5))]), j(json!(4)));
        assert_eq!(run(Func::Round, vec![j(json!(-2.5))]), j(json!(-2)));
        assert_eq!(
            run(Func::Round, vec![j(json!(1.2345)), j(json!(2))]),
            j(json!(1.23))
        );
        assert_eq!(run(Func::Round, vec![j(json!("1"))]), Value::NULL);
    }

    #[test]
    fn conditionals_arrays_and_types() {
        assert_eq!(
            run(
                Func::IfMissing,
                vec![Value::Missing, Value::NULL, j(json!(1))]
            ),
            Value::NULL
        );
        assert_eq!(
            run(Func::IfNull, vec![Value::NULL, Value::Missing, j(json!(1))]),
            Value::Missing
        );
        assert_eq!(
            run(
                Func::IfMissingOrNull,
                vec![Value::Missing, Value::NULL, j(json!(1))]
            ),
            j(json!(1))
        );
        assert_eq!(
            run(Func::IfMissingOrNull, vec![Value::Missing, Value::NULL]),
            Value::NULL
        );
        assert_eq!(run(Func::ArrayLength, vec![j(json!([1, 2]))]), j(json!(2)));
        assert_eq!(run(Func::ArrayLength, vec![j(json!("x"))]), Value::NULL);
        assert_eq!(
            run(Func::ArrayContains, vec![j(json!([1, "a"])), j(json!(1.0))]),
            Value::TRUE
        );
        assert_eq!(
            run(Func::ArrayContains, vec![j(json!([1])), Value::NULL]),
            Value::NULL
        );
        assert_eq!(run(Func::Type, vec![Value::Missing]), j(json!("missing")));
        assert_eq!(run(Func::Type, vec![j(json!({}))]), j(json!("object")));
    }
}
