//! The paths of UPDATE's `SET path = value` and `UNSET path`, applied to a JSON document.
//!
//! A path is the keyspace alias (or a bare field name) followed by `.field`, `.[expr]` and
//! `[expr]` steps. Setting creates the objects a missing field needs on the way, as
//! Couchbase does; a step through a value that is neither an object nor an array, or an
//! array index out of range, leaves the document as it is.

use sluice_query::ast::{Expr, Ident};
use sluice_query::{evaluate, Params, Value};

use super::error::ServiceError;

#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Field(String),
    Index(i64),
}

fn not_a_path(e: &Expr) -> ServiceError {
    ServiceError::NotSupported(format!("{e} is not a path UPDATE can SET or UNSET"))
}

/// The steps of `expr` below the document bound to `alias`.
pub fn path_of(expr: &Expr, alias: &Ident, params: &Params) -> Result<Vec<Step>, ServiceError> {
    let mut steps = match expr {
        // `alias` alone is the whole document: not something to set.
        Expr::Ident(name) if name == alias => return Ok(Vec::new()),
        Expr::Ident(name) => return Ok(vec![Step::Field(name.as_str().to_string())]),
        Expr::Field { base, name } => {
            let mut s = path_of(base, alias, params)?;
            s.push(Step::Field(name.as_str().to_string()));
            return Ok(s);
        }
        Expr::DynamicField { base, name } | Expr::Element { base, index: name } => {
            let s = path_of(base, alias, params)?;
            (s, evaluate(name, params)?)
        }
        _ => return Err(not_a_path(expr)),
    };
    let step = match steps.1 {
        Value::Json(serde_json::Value::String(s)) => Step::Field(s),
        Value::Json(serde_json::Value::Number(n)) if n.as_i64().is_some() => {
            Step::Index(n.as_i64().unwrap_or_default())
        }
        _ => return Err(not_a_path(expr)),
    };
    steps.0.push(step);
    Ok(steps.0)
}

/// Sets `path` of `doc` to `value` (MISSING unsets it).
pub fn set(doc: &mut serde_json::Value, path: &[Step], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let Some(value) = value.into_json() else {
        unset(doc, path);
        return;
    };
    match (walk(doc, parents, true), last) {
        (Some(serde_json::Value::Object(m)), Step::Field(f)) => {
            m.insert(f.clone(), value);
        }
        (Some(serde_json::Value::Array(a)), Step::Index(i)) => {
            if let Some(i) = index(a.len(), *i) {
                a[i] = value;
            }
        }
        _ => {}
    }
}

/// Removes `path` from `doc` (a field is removed; an array element becomes nothing, as
/// Couchbase's UNSET of an element removes it).
pub fn unset(doc: &mut serde_json::Value, path: &[Step]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    match (walk(doc, parents, false), last) {
        (Some(serde_json::Value::Object(m)), Step::Field(f)) => {
            m.remove(f);
        }
        (Some(serde_json::Value::Array(a)), Step::Index(i)) => {
            if let Some(i) = index(a.len(), *i) {
                a.remove(i);
            }
        }
        _ => {}
    }
}

/// The value at `steps` below `doc`; `create` adds an empty object for each missing field
/// on the way. `None` where a step cannot be taken.
fn walk<'a>(
    doc: &'a mut serde_json::Value,
    steps: &[Step],
    create: bool,
) -> Option<&'a mut serde_json::Value> {
    let mut at = doc;
    for step in steps {
        at = match (at, step) {
            (serde_json::Value::Object(m), Step::Field(f)) => {
                if create {
                    m.entry(f.clone())
                        .or_insert_with(|| serde_json::Value::Object(Default::default()))
                } else {
                    m.get_mut(f)?
                }
            }
            (serde_json::Value::Array(a), Step::Index(i)) => {
                let i = index(a.len(), *i)?;
                &mut a[i]
            }
            _ => return None,
        };
    }
    Some(at)
}

/// An index into an array of `len`, negative counting from the end.
fn index(len: usize, i: i64) -> Option<usize> {
    let i = if i < 0 { len as i64 + i } else { i };
    (0..len as i64).contains(&i).then_some(i as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(text: &str) -> Vec<Step> {
        let e = sluice_query::parse_expression(text).expect("parses");
        path_of(&e, &Ident::new("d"), &Params::new()).expect("a path")
    }

    #[test]
    fn paths_strip_the_alias_and_evaluate_their_steps() {
        assert_eq!(
            path("d.a.b"),
            vec![Step::Field("a".into()), Step::Field("b".into())]
        );
        assert_eq!(
            path("a[1+1]"),
            vec![Step::Field("a".into()), Step::Index(2)]
        );
        assert_eq!(path("d.[\"x\" || \"y\"]"), vec![Step::Field("xy".into())]);
        let bad = sluice_query::parse_expression("a + 1").expect("parses");
        assert!(path_of(&bad, &Ident::new("d"), &Params::new()).is_err());
    }

    #[test]
    fn set_creates_missing_objects_and_unset_removes() {
        let mut doc = json!({"a": {"list": [1, 2, 3]}, "n": 1});
        set(&mut doc, &path("b.c"), Value::Json(json!(5)));
        set(&mut doc, &path("a.list[-1]"), Value::Json(json!(30)));
        set(&mut doc, &path("n.deeper"), Value::Json(json!(0)));
        assert_eq!(
            doc,
            json!({"a": {"list": [1, 2, 30]}, "b": {"c": 5}, "n": 1})
        );
        unset(&mut doc, &path("a.list[0]"));
        unset(&mut doc, &path("n"));
        unset(&mut doc, &path("nothing.here"));
        assert_eq!(doc, json!({"a": {"list": [2, 30]}, "b": {"c": 5}}));
        set(&mut doc, &path("b"), Value::Missing);
        assert_eq!(doc, json!({"a": {"list": [2, 30]}}));
    }
}
