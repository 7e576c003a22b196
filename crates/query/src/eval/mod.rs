//! Expression evaluation over JSON documents, with SQL++'s MISSING/NULL rules.
//!
//! Names resolve through an [`Env`]: a row (keyspace alias, document, metadata), a group of
//! rows (group keys and aggregate results), or no row at all. Variables bound by
//! ANY/EVERY shadow the environment's names.

mod like;
pub(crate) mod ops;
mod params;

#[cfg(test)]
mod tests;

pub use params::{DocMeta, Params, Row};

use crate::ast::{BinaryOp, Expr, Ident, Literal, Param, Quantifier, UnaryOp};
use crate::collate::{equals, Tri};
use crate::error::{QueryError, Result};
use crate::functions;
use crate::value::Value;

/// What names, META(), parameters and aggregates mean where an expression is evaluated.
pub(crate) trait Env {
    fn ident(&self, name: &Ident) -> Result<Value>;
    fn meta(&self, keyspace: Option<&Ident>) -> Result<Value>;
    fn param(&self, p: &Param) -> Result<Value>;
    fn aggregate(&self, expr: &Expr) -> Result<Value>;
    /// A precomputed value for a whole sub-expression (a group key), if there is one.
    fn substitute(&self, _expr: &Expr) -> Option<Value> {
        None
    }
    /// What [`Env::ident`] gives, by reference, when the environment holds it as JSON
    /// (a document, a bound variable): a path `d.a.b` then reads its one field instead of
    /// copying the whole document first. [`Held::Unknown`] sends the caller to `ident`.
    fn ident_ref(&self, _name: &Ident) -> Held<'_> {
        Held::Unknown
    }
    /// One field of what [`Env::meta`] gives, without building all of it; `None` sends
    /// the caller to `meta`.
    fn meta_field(&self, _keyspace: Option<&Ident>, _name: &str) -> Option<Result<Value>> {
        None
    }
}

/// A name's value as an environment holds it (see [`Env::ident_ref`]).
pub(crate) enum Held<'a> {
    Json(&'a serde_json::Value),
    Missing,
    /// Not held as JSON here: evaluate the name.
    Unknown,
}

/// Evaluates an expression that reads no document (LIMIT, USE KEYS, constants): names are
/// MISSING, parameters come from `params`.
pub fn evaluate(expr: &Expr, params: &Params) -> Result<Value> {
    eval(expr, &RowEnv::new(None, params))
}

/// Evaluates an expression against one document bound to `alias`. A name other than the
/// alias (or a variable) reads that field of the document, as Couchbase's formalizer makes
/// it do with one keyspace in FROM.
pub fn evaluate_row(expr: &Expr, alias: &Ident, row: &Row, params: &Params) -> Result<Value> {
    eval(expr, &RowEnv::new(Some((alias, row)), params))
}

/// The document keys a `USE KEYS` expression names: a string is one key, an array gives
/// its string elements; anything else names none.
pub fn evaluate_keys(expr: &Expr, params: &Params) -> Result<Vec<String>> {
    Ok(match evaluate(expr, params)? {
        Value::Json(serde_json::Value::String(s)) => vec![s],
        Value::Json(serde_json::Value::Array(items)) => items
            .into_iter()
            .filter_map(|i| match i {
                serde_json::Value::String(s) => Some(s),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    })
}

/// A row, or none, as the environment.
pub(crate) struct RowEnv<'a> {
    row: Option<(&'a Ident, &'a Row)>,
    params: &'a Params,
}

impl<'a> RowEnv<'a> {
    pub(crate) fn new(row: Option<(&'a Ident, &'a Row)>, params: &'a Params) -> Self {
        RowEnv { row, params }
    }
}

impl Env for RowEnv<'_> {
    fn ident(&self, name: &Ident) -> Result<Value> {
        Ok(match self.ident_ref(name) {
            Held::Json(j) => Value::Json(j.clone()),
            // A row environment holds every name it knows as JSON.
            Held::Missing | Held::Unknown => Value::Missing,
        })
    }

    fn ident_ref(&self, name: &Ident) -> Held<'_> {
        match self.row {
            Some((alias, row)) if alias == name => Held::Json(&row.doc),
            Some((_, row)) => row.doc.get(name.as_str()).map_or(Held::Missing, Held::Json),
            None => Held::Missing,
        }
    }

    fn meta_field(&self, keyspace: Option<&Ident>, name: &str) -> Option<Result<Value>> {
        match (self.row, keyspace) {
            (Some((alias, row)), k) if k.is_none_or(|k| k == alias) => {
                Some(Ok(row.meta_field(name)))
            }
            // Missing or an error, as `meta` says.
            _ => None,
        }
    }

    fn meta(&self, keyspace: Option<&Ident>) -> Result<Value> {
        match (self.row, keyspace) {
            (Some((alias, row)), k) if k.is_none_or(|k| k == alias) => {
                Ok(Value::Json(row.meta_json()))
            }
            (None, None) => Ok(Value::Missing),
            (_, k) => Err(QueryError::evaluation(format!(
                "META() argument {} is not a keyspace alias",
                k.map_or(String::new(), ToString::to_string)
            ))),
        }
    }

    fn param(&self, p: &Param) -> Result<Value> {
        self.params.get(p)
    }

    fn aggregate(&self, _expr: &Expr) -> Result<Value> {
        Err(QueryError::evaluation(
            "Aggregates are not allowed here (nested or outside a projection).",
        ))
    }
}

/// A variable bound by ANY/EVERY over its parent environment.
struct Bound<'a> {
    name: &'a Ident,
    value: &'a Value,
    parent: &'a dyn Env,
}

impl Env for Bound<'_> {
    fn ident(&self, name: &Ident) -> Result<Value> {
        if name == self.name {
            Ok(self.value.clone())
        } else {
            self.parent.ident(name)
        }
    }
    fn meta(&self, keyspace: Option<&Ident>) -> Result<Value> {
        self.parent.meta(keyspace)
    }
    fn param(&self, p: &Param) -> Result<Value> {
        self.parent.param(p)
    }
    fn aggregate(&self, expr: &Expr) -> Result<Value> {
        self.parent.aggregate(expr)
    }
    fn substitute(&self, expr: &Expr) -> Option<Value> {
        self.parent.substitute(expr)
    }
    fn ident_ref(&self, name: &Ident) -> Held<'_> {
        if name != self.name {
            return self.parent.ident_ref(name);
        }
        match self.value {
            Value::Json(j) => Held::Json(j),
            Value::Missing => Held::Missing,
        }
    }
    fn meta_field(&self, keyspace: Option<&Ident>, name: &str) -> Option<Result<Value>> {
        self.parent.meta_field(keyspace, name)
    }
}

pub(crate) fn eval(expr: &Expr, env: &dyn Env) -> Result<Value> {
    if let Some(v) = env.substitute(expr) {
        return Ok(v);
    }
    Ok(match expr {
        Expr::Literal(l) => literal(l),
        Expr::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for i in items {
                out.push(eval(i, env)?.into_json_or_null());
            }
            Value::Json(serde_json::Value::Array(out))
        }
        Expr::Object(pairs) => return object(pairs, env),
        Expr::Ident(id) => env.ident(id)?,
        Expr::Field { base, name } => return field(base, name.as_str(), env),
        Expr::DynamicField { base, name } => {
            ops::dynamic_field(&eval(base, env)?, &eval(name, env)?)
        }
        Expr::Element { base, index } => ops::element(&eval(base, env)?, &eval(index, env)?),
        Expr::Param(p) => env.param(p)?,
        Expr::Unary {
            op: UnaryOp::Not,
            operand,
        } => ops::not(&eval(operand, env)?),
        Expr::Unary {
            op: UnaryOp::Neg,
            operand,
        } => ops::neg(&eval(operand, env)?),
        Expr::Binary {
            op: BinaryOp::And,
            left,
            right,
        } => return and(left, right, env),
        Expr::Binary {
            op: BinaryOp::Or,
            left,
            right,
        } => return or(left, right, env),
        Expr::Binary { op, left, right } => ops::binary(*op, &eval(left, env)?, &eval(right, env)?),
        Expr::Between {
            expr,
            low,
            high,
            negated,
        } => {
            let r = ops::between(&eval(expr, env)?, &eval(low, env)?, &eval(high, env)?);
            if *negated {
                ops::not(&r)
            } else {
                r
            }
        }
        Expr::Is { expr, test } => ops::is(&eval(expr, env)?, *test),
        Expr::Case {
            operand,
            whens,
            otherwise,
        } => {
            let subject = match operand {
                Some(o) => Some(eval(o, env)?),
                None => None,
            };
            for w in whens {
                let when = eval(&w.when, env)?;
                let hit = match &subject {
                    Some(s) => equals(s, &when) == Tri::Known(true),
                    None => when.truthy(),
                };
                if hit {
                    return eval(&w.then, env);
                }
            }
            match otherwise {
                Some(e) => eval(e, env)?,
                None => Value::NULL,
            }
        }
        Expr::Call { func, args } => {
            let mut values = Vec::with_capacity(args.len());
            for a in args {
                values.push(eval(a, env)?);
            }
            functions::call(*func, values)?
        }
        Expr::Aggregate { .. } => env.aggregate(expr)?,
        Expr::Meta { keyspace } => env.meta(keyspace.as_ref())?,
        Expr::Collection {
            quantifier,
            var,
            source,
            satisfies,
        } => return quantified(*quantifier, var, source, satisfies, env),
    })
}

/// `base.name`. A path over a document or META() reads the one field it names, by
/// reference; anything else evaluates `base` whole first. Both give the same value.
fn field(base: &Expr, name: &str, env: &dyn Env) -> Result<Value> {
    if let Expr::Meta { keyspace } = base {
        if env.substitute(base).is_none() {
            if let Some(v) = env.meta_field(keyspace.as_ref(), name) {
                return v;
            }
        }
    }
    Ok(match held(base, env) {
        Held::Json(j) => ops::field_of(j, name),
        Held::Missing => Value::Missing,
        Held::Unknown => ops::field(&eval(base, env)?, name),
    })
}

/// A name or a path of fields as the environment holds it, without copying it.
pub(crate) fn held<'e>(expr: &Expr, env: &'e dyn Env) -> Held<'e> {
    // A substituted expression (a group key) is the substitute's value, not the row's.
    if env.substitute(expr).is_some() {
        return Held::Unknown;
    }
    match expr {
        Expr::Ident(id) => env.ident_ref(id),
        Expr::Field { base, name } => match held(base, env) {
            Held::Json(serde_json::Value::Object(m)) => {
                m.get(name.as_str()).map_or(Held::Missing, Held::Json)
            }
            Held::Json(_) | Held::Missing => Held::Missing,
            Held::Unknown => Held::Unknown,
        },
        _ => Held::Unknown,
    }
}

fn literal(l: &Literal) -> Value {
    match l {
        Literal::Missing => Value::Missing,
        Literal::Null => Value::NULL,
        Literal::Bool(b) => Value::bool(*b),
        Literal::Number(n) => Value::Json(serde_json::Value::Number(n.clone())),
        Literal::String(s) => Value::string(s.as_str()),
    }
}

/// Names must be strings; a MISSING name or value drops the member, any other non-string
/// name makes the whole object NULL.
fn object(pairs: &[(Expr, Expr)], env: &dyn Env) -> Result<Value> {
    let mut map = serde_json::Map::new();
    let mut null = false;
    for (k, v) in pairs {
        let key = eval(k, env)?;
        let value = eval(v, env)?;
        match (key, value) {
            (Value::Json(serde_json::Value::String(k)), Value::Json(v)) => {
                map.insert(k, v);
            }
            (Value::Missing, _) | (Value::Json(serde_json::Value::String(_)), Value::Missing) => {}
            _ => null = true,
        }
    }
    Ok(if null {
        Value::NULL
    } else {
        Value::Json(serde_json::Value::Object(map))
    })
}

fn and(left: &Expr, right: &Expr, env: &dyn Env) -> Result<Value> {
    ops::logical(ops::Logic::And, [&|| eval(left, env), &|| eval(right, env)])
}

fn or(left: &Expr, right: &Expr, env: &dyn Env) -> Result<Value> {
    ops::logical(ops::Logic::Or, [&|| eval(left, env), &|| eval(right, env)])
}

/// ANY / EVERY / ANY AND EVERY: MISSING over a MISSING source, NULL over a non-array.
fn quantified(
    q: Quantifier,
    var: &Ident,
    source: &Expr,
    cond: &Expr,
    env: &dyn Env,
) -> Result<Value> {
    let items = match eval(source, env)? {
        Value::Missing => return Ok(Value::Missing),
        Value::Json(serde_json::Value::Array(items)) => items,
        Value::Json(_) => return Ok(Value::NULL),
    };
    for item in &items {
        let value = Value::Json(item.clone());
        let scope = Bound {
            name: var,
            value: &value,
            parent: env,
        };
        let ok = eval(cond, &scope)?.truthy();
        match (q, ok) {
            (Quantifier::Any, true) => return Ok(Value::TRUE),
            (Quantifier::Every | Quantifier::AnyAndEvery, false) => return Ok(Value::FALSE),
            _ => {}
        }
    }
    Ok(Value::bool(match q {
        Quantifier::Any => false,
        Quantifier::Every => true,
        Quantifier::AnyAndEvery => !items.is_empty(),
    }))
}
