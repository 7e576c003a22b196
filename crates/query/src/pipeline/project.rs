//! The projection: result names (explicit alias, else the last path step, else `$n`),
//! `*` and `expr.*`, RAW; and the environment in which ORDER BY sees explicit aliases.

use super::formalize::formalize;
use crate::ast::{Expr, Ident, Param, Projection, ResultTerm};
use crate::error::Result;
use crate::eval::{eval, held, Env, Held, Row};
use crate::value::Value;

pub(crate) enum Term {
    /// `*`: the row as `{alias: document}`.
    Star,
    /// `expr.*`: the fields of an object.
    ExprStar(Expr),
    Named {
        name: String,
        expr: Expr,
        explicit: bool,
    },
}

pub(crate) enum Planned {
    Raw { expr: Expr, alias: Option<Ident> },
    Terms(Vec<Term>),
}

impl Planned {
    pub(crate) fn new(p: &Projection, alias: Option<&Ident>) -> Planned {
        match p {
            Projection::Raw { expr, alias: as_ } => Planned::Raw {
                expr: formalize(expr, alias, &[]),
                alias: as_.clone(),
            },
            Projection::Terms(terms) => {
                let mut unnamed = 0;
                let terms = terms
                    .iter()
                    .map(|t| match t {
                        ResultTerm::Star => Term::Star,
                        ResultTerm::ExprStar(e) => Term::ExprStar(formalize(e, alias, &[])),
                        ResultTerm::Expr { expr, alias: as_ } => {
                            let (name, explicit) = match (as_, expr.implicit_name()) {
                                (Some(a), _) => (a.as_str().to_owned(), true),
                                (None, Some(n)) => (n.to_owned(), false),
                                (None, None) => {
                                    unnamed += 1;
                                    (format!("${unnamed}"), false)
                                }
                            };
                            Term::Named {
                                name,
                                expr: formalize(expr, alias, &[]),
                                explicit,
                            }
                        }
                    })
                    .collect();
                Planned::Terms(terms)
            }
        }
    }

    /// The aliases ORDER BY may name: those written with AS.
    pub(crate) fn explicit_aliases(&self) -> Vec<Ident> {
        match self {
            Planned::Raw { alias, .. } => alias.iter().cloned().collect(),
            Planned::Terms(terms) => terms
                .iter()
                .filter_map(|t| match t {
                    Term::Named {
                        name,
                        explicit: true,
                        ..
                    } => Some(Ident::new(name.as_str())),
                    _ => None,
                })
                .collect(),
        }
    }

    /// Every expression of the projection, for analysis.
    pub(crate) fn exprs(&self) -> Vec<&Expr> {
        match self {
            Planned::Raw { expr, .. } => vec![expr],
            Planned::Terms(terms) => terms
                .iter()
                .filter_map(|t| match t {
                    Term::Star => None,
                    Term::ExprStar(e) | Term::Named { expr: e, .. } => Some(e),
                })
                .collect(),
        }
    }

    pub(crate) fn has_star(&self) -> bool {
        matches!(self, Planned::Terms(t) if t.iter().any(|t| matches!(t, Term::Star)))
    }

    /// One result (None: a RAW MISSING, which yields no row) and the explicit aliases'
    /// values for ORDER BY.
    pub(crate) fn project(&self, env: &dyn Env, row: Option<(&Ident, &Row)>) -> Result<Projected> {
        match self {
            Planned::Raw { expr, alias } => {
                let v = eval(expr, env)?;
                let aliases = alias.iter().map(|a| (a.clone(), v.clone())).collect();
                Ok(Projected {
                    result: v.into_json(),
                    aliases,
                })
            }
            Planned::Terms(terms) => {
                let mut out = serde_json::Map::new();
                let mut aliases = Vec::new();
                for t in terms {
                    match t {
                        Term::Star => {
                            if let Some((alias, row)) = row {
                                out.insert(alias.as_str().to_owned(), row.doc.clone());
                            }
                        }
                        // The fields of a document (`d.*`) are copied from it one by one,
                        // not through a copy of it first.
                        Term::ExprStar(e) => match held(e, env) {
                            Held::Json(serde_json::Value::Object(fields)) => {
                                for (k, v) in fields {
                                    out.insert(k.clone(), v.clone());
                                }
                            }
                            Held::Json(_) | Held::Missing => {}
                            Held::Unknown => {
                                if let Value::Json(serde_json::Value::Object(fields)) =
                                    eval(e, env)?
                                {
                                    out.extend(fields);
                                }
                            }
                        },
                        Term::Named {
                            name,
                            expr,
                            explicit,
                        } => {
                            let v = eval(expr, env)?;
                            if *explicit {
                                aliases.push((Ident::new(name.as_str()), v.clone()));
                            }
                            if let Value::Json(j) = v {
                                out.insert(name.clone(), j);
                            }
                        }
                    }
                }
                Ok(Projected {
                    result: Some(serde_json::Value::Object(out)),
                    aliases,
                })
            }
        }
    }
}

pub(crate) struct Projected {
    pub result: Option<serde_json::Value>,
    pub aliases: Vec<(Ident, Value)>,
}

/// Projection aliases in scope over another environment (for ORDER BY).
pub(crate) struct AliasEnv<'a> {
    pub aliases: &'a [(Ident, Value)],
    pub parent: &'a dyn Env,
}

impl Env for AliasEnv<'_> {
    fn ident(&self, name: &Ident) -> Result<Value> {
        match self.aliases.iter().find(|(a, _)| a == name) {
            Some((_, v)) => Ok(v.clone()),
            None => self.parent.ident(name),
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
}
