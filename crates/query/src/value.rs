//! SQL++ values: JSON plus MISSING, the absence of a value.

use serde_json::Number;

/// A value an expression evaluates to. MISSING never appears inside JSON: array
/// constructors turn it into `null`, object constructors and projections drop the field.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Missing,
    Json(serde_json::Value),
}

/// The types in collation order (`MISSING < NULL < booleans < numbers < strings < arrays <
/// objects`), which is also how values of different types compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Type {
    Missing,
    Null,
    Boolean,
    Number,
    String,
    Array,
    Object,
}

impl Type {
    /// The name `TYPE()` returns.
    pub fn name(self) -> &'static str {
        match self {
            Type::Missing => "missing",
            Type::Null => "null",
            Type::Boolean => "boolean",
            Type::Number => "number",
            Type::String => "string",
            Type::Array => "array",
            Type::Object => "object",
        }
    }
}

pub(crate) fn json_type(v: &serde_json::Value) -> Type {
    match v {
        serde_json::Value::Null => Type::Null,
        serde_json::Value::Bool(_) => Type::Boolean,
        serde_json::Value::Number(_) => Type::Number,
        serde_json::Value::String(_) => Type::String,
        serde_json::Value::Array(_) => Type::Array,
        serde_json::Value::Object(_) => Type::Object,
    }
}

impl Value {
    pub const NULL: Value = Value::Json(serde_json::Value::Null);
    pub const TRUE: Value = Value::Json(serde_json::Value::Bool(true));
    pub const FALSE: Value = Value::Json(serde_json::Value::Bool(false));

    pub fn bool(b: bool) -> Value {
        Value::Json(serde_json::Value::Bool(b))
    }

    pub fn string(s: impl Into<String>) -> Value {
        Value::Json(serde_json::Value::String(s.into()))
    }

    pub fn kind(&self) -> Type {
        match self {
            Value::Missing => Type::Missing,
            Value::Json(j) => json_type(j),
        }
    }

    pub fn is_missing(&self) -> bool {
        matches!(self, Value::Missing)
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Json(serde_json::Value::Null))
    }

    /// Whether a WHERE, HAVING, WHEN or SATISFIES would accept it: MISSING, NULL, FALSE,
    /// zero, NaN and empty strings, arrays and objects are false, everything else true.
    pub fn truthy(&self) -> bool {
        use serde_json::Value as J;
        match self {
            Value::Missing | Value::Json(J::Null) => false,
            Value::Json(J::Bool(b)) => *b,
            Value::Json(J::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
            Value::Json(J::String(s)) => !s.is_empty(),
            Value::Json(J::Array(a)) => !a.is_empty(),
            Value::Json(J::Object(o)) => !o.is_empty(),
        }
    }

    pub fn as_json(&self) -> Option<&serde_json::Value> {
        match self {
            Value::Missing => None,
            Value::Json(j) => Some(j),
        }
    }

    /// The JSON value, None for MISSING.
    pub fn into_json(self) -> Option<serde_json::Value> {
        match self {
            Value::Missing => None,
            Value::Json(j) => Some(j),
        }
    }

    /// The JSON value, with MISSING as `null` (inside arrays).
    pub fn into_json_or_null(self) -> serde_json::Value {
        self.into_json().unwrap_or(serde_json::Value::Null)
    }

    pub fn as_str(&self) -> Option<&str> {
        self.as_json().and_then(serde_json::Value::as_str)
    }

    pub fn as_number(&self) -> Option<Num> {
        match self.as_json()? {
            serde_json::Value::Number(n) => Some(Num::of(n)),
            _ => None,
        }
    }
}

impl From<serde_json::Value> for Value {
    fn from(j: serde_json::Value) -> Self {
        Value::Json(j)
    }
}

/// A JSON number for arithmetic: integers stay exact while they fit an i64.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    pub fn of(n: &Number) -> Num {
        match n.as_i64() {
            Some(i) => Num::Int(i),
            None => Num::Float(n.as_f64().unwrap_or(f64::NAN)),
        }
    }

    pub fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }

    /// Whole numbers only (for LIMIT, SUBSTR positions, array indexes).
    pub fn as_whole(self) -> Option<i64> {
        match self {
            Num::Int(i) => Some(i),
            Num::Float(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => Some(f as i64),
            Num::Float(_) => None,
        }
    }

    /// The value: NULL when not finite (JSON has no NaN or infinity), and integral floats
    /// as integers, as Couchbase prints `6/3` as `2`.
    pub fn into_value(self) -> Value {
        match self {
            Num::Int(i) => Value::Json(i.into()),
            Num::Float(f) => float_value(f),
        }
    }
}

pub(crate) fn float_value(f: f64) -> Value {
    if !f.is_finite() {
        return Value::NULL;
    }
    if f.fract() == 0.0 && f.abs() < 9.2e18 {
        return Value::Json((f as i64).into());
    }
    Number::from_f64(f).map_or(Value::NULL, |n| Value::Json(serde_json::Value::Number(n)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn truthiness_follows_couchbase() {
        for falsy in [
            json!(null),
            json!(false),
            json!(0),
            json!(0.0),
            json!(""),
            json!([]),
            json!({}),
        ] {
            assert!(!Value::Json(falsy.clone()).truthy(), "{falsy}");
        }
        for truthy in [
            json!(true),
            json!(-1),
            json!(0.5),
            json!("0"),
            json!([0]),
            json!({"a": 0}),
        ] {
            assert!(Value::Json(truthy.clone()).truthy(), "{truthy}");
        }
        assert!(!Value::Missing.truthy());
    }

    #[test]
    fn floats_normalize() {
        assert_eq!(float_value(2.0), Value::Json(json!(2)));
        assert_eq!(float_value(2.5), Value::Json(json!(2.5)));
        assert_eq!(float_value(f64::INFINITY), Value::NULL);
        assert_eq!(float_value(f64::NAN), Value::NULL);
    }
}
