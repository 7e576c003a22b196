//! Evaluating a filter against one change.

use serde_json::Value as J;

use super::{date, MathFn, Node};
use crate::ast::IsTest;
use crate::eval::ops::{self, Logic};
use crate::value::{float_value, Value};

/// What a filter sees of one change. Whatever the caller leaves `None` reads as MISSING.
#[derive(Debug, Clone, Copy, Default)]
pub struct Subject<'a> {
    /// The key, when it is UTF-8 (Couchbase's filters match only those).
    pub key: Option<&'a str>,
    /// The body, when it is JSON.
    pub body: Option<&'a J>,
    /// The extended attributes as one object (name → value).
    pub xattrs: Option<&'a J>,
}

/// A value found in the change (borrowed, so a test of presence copies nothing), or one
/// computed.
enum Probe<'a> {
    Missing,
    Found(&'a J),
    Computed(Value),
}

impl Probe<'_> {
    fn into_value(self) -> Value {
        match self {
            Probe::Missing => Value::Missing,
            Probe::Found(j) => Value::Json(j.clone()),
            Probe::Computed(v) => v,
        }
    }

    fn is_missing(&self) -> bool {
        matches!(self, Probe::Missing | Probe::Computed(Value::Missing))
    }

    fn is_null(&self) -> bool {
        matches!(
            self,
            Probe::Found(J::Null) | Probe::Computed(Value::Json(J::Null))
        )
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            Probe::Found(J::String(s)) | Probe::Computed(Value::Json(J::String(s))) => Some(s),
            _ => None,
        }
    }
}

impl Node {
    pub(super) fn eval(&self, s: &Subject<'_>) -> Value {
        self.probe(s).into_value()
    }

    fn probe<'a>(&self, s: &Subject<'a>) -> Probe<'a> {
        if let Some(found) = self.path(s) {
            return found.map_or(Probe::Missing, Probe::Found);
        }
        Probe::Computed(match self {
            Node::Literal(v) => v.clone(),
            Node::Key => s.key.map_or(Value::Missing, Value::string),
            Node::Body(_) | Node::Xattrs => unreachable!("paths are found above"),
            Node::Field(base, name) => ops::field(&base.eval(s), name),
            Node::Element(base, i) => ops::element(&base.eval(s), &Value::Json((*i).into())),
            Node::Neg(n) => ops::neg(&n.eval(s)),
            Node::Not(n) => ops::not(&n.eval(s)),
            Node::And(terms) => logical(Logic::And, terms, s),
            Node::Or(terms) => logical(Logic::Or, terms, s),
            Node::Binary(op, a, b) => ops::binary(*op, &a.eval(s), &b.eval(s)),
            Node::Is(n, test) => {
                let p = n.probe(s);
                Value::bool(match test {
                    IsTest::Null => p.is_null(),
                    // XDCR's meaning: a missing field is "not null" (SQL++ would say MISSING).
                    IsTest::NotNull => !p.is_null(),
                    IsTest::Missing => p.is_missing(),
                    IsTest::NotMissing => !p.is_missing(),
                    IsTest::Valued => !p.is_missing() && !p.is_null(),
                    IsTest::NotValued => p.is_missing() || p.is_null(),
                })
            }
            Node::Exists(n) => Value::bool(!n.probe(s).is_missing()),
            Node::Regexp(n, re) => {
                let p = n.probe(s);
                match p.as_str() {
                    Some(text) => Value::bool(re.is_match(text)),
                    None if p.is_missing() => Value::Missing,
                    None => Value::NULL,
                }
            }
            Node::Date(n) => {
                let p = n.probe(s);
                match p.as_str().map(date::millis) {
                    Some(Some(ms)) => Value::Json(ms.into()),
                    _ if p.is_missing() => Value::Missing,
                    _ => Value::NULL,
                }
            }
            Node::Math(f, args) => math(*f, args, s),
        })
    }

    /// The value a path (`a.b[2]`, `META().xattrs.x`) leads to, found in place: `None` if
    /// this is not a path, `Some(None)` if the path leads nowhere.
    fn path<'a>(&self, s: &Subject<'a>) -> Option<Option<&'a J>> {
        Some(match self {
            Node::Body(name) => s.body.and_then(|b| b.as_object()?.get(name)),
            Node::Xattrs => s.xattrs,
            Node::Field(base, name) => base.path(s)?.and_then(|j| j.as_object()?.get(name)),
            Node::Element(base, i) => base
                .path(s)?
                .and_then(|j| j.as_array()?.get(usize::try_from(*i).ok()?)),
            _ => return None,
        })
    }
}

fn logical(op: Logic, terms: &[Node], s: &Subject<'_>) -> Value {
    let Some((first, rest)) = terms.split_first() else {
        unreachable!("AND and OR join two or more terms")
    };
    let mut acc = first.eval(s);
    for term in rest {
        let so_far = acc;
        let joined: Result<Value, std::convert::Infallible> =
            ops::logical(op, [&|| Ok(so_far.clone()), &|| Ok(term.eval(s))]);
        let Ok(v) = joined;
        acc = v;
    }
    acc
}

/// A number function: MISSING if an argument is, NULL if one is not a number or the result
/// is not finite.
fn math(f: MathFn, args: &[Node], s: &Subject<'_>) -> Value {
    let mut x = [0.0f64; 2];
    for (slot, arg) in x.iter_mut().zip(args) {
        let v = arg.eval(s);
        if v.is_missing() {
            return Value::Missing;
        }
        let Some(n) = v.as_number() else {
            return Value::NULL;
        };
        *slot = n.as_f64();
    }
    let [a, b] = x;
    float_value(match f {
        MathFn::Abs => a.abs(),
        MathFn::Acos => a.acos(),
        MathFn::Asin => a.asin(),
        MathFn::Atan => a.atan(),
        MathFn::Atan2 => a.atan2(b),
        MathFn::Ceil => a.ceil(),
        MathFn::Cos => a.cos(),
        MathFn::Degrees => a.to_degrees(),
        MathFn::E => std::f64::consts::E,
        MathFn::Exp => a.exp(),
        MathFn::Floor => a.floor(),
        MathFn::Ln => a.ln(),
        MathFn::Log => a.log10(),
        MathFn::Pi => std::f64::consts::PI,
        MathFn::Pow => a.powf(b),
        MathFn::Radians => a.to_radians(),
        MathFn::Round => a.round(),
        MathFn::Sin => a.sin(),
        MathFn::Sqrt => a.sqrt(),
        MathFn::Tan => a.tan(),
    })
}
