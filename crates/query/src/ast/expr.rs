//! Expressions.

use super::Ident;
use crate::functions::{AggFunc, Func};

/// A constant written in the statement. Numbers are JSON numbers: integers that fit an i64
/// stay integers, anything else is a finite f64.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Literal {
    Missing,
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
}

/// A statement parameter. `?` is numbered by its position among the `?`s, so `?` and `$1`
/// are the same parameter; `@name` is `$name`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Param {
    Positional(u32),
    Named(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    Neg,
    Not,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Concat,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
    Like,
    NotLike,
    In,
    NotIn,
}

impl BinaryOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Mod => "%",
            BinaryOp::Concat => "||",
            BinaryOp::Eq => "=",
            BinaryOp::Ne => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::And => "AND",
            BinaryOp::Or => "OR",
            BinaryOp::Like => "LIKE",
            BinaryOp::NotLike => "NOT LIKE",
            BinaryOp::In => "IN",
            BinaryOp::NotIn => "NOT IN",
        }
    }
}

/// The `IS` tests. `IS UNKNOWN` parses as `IS NOT VALUED`, `IS NOT UNKNOWN` as `IS VALUED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsTest {
    Null,
    NotNull,
    Missing,
    NotMissing,
    Valued,
    NotValued,
}

impl IsTest {
    pub fn keywords(self) -> &'static str {
        match self {
            IsTest::Null => "IS NULL",
            IsTest::NotNull => "IS NOT NULL",
            IsTest::Missing => "IS MISSING",
            IsTest::NotMissing => "IS NOT MISSING",
            IsTest::Valued => "IS VALUED",
            IsTest::NotValued => "IS NOT VALUED",
        }
    }
}

/// `ANY` (or `SOME`), `EVERY`, `ANY AND EVERY` over an array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantifier {
    Any,
    Every,
    AnyAndEvery,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WhenThen {
    pub when: Expr,
    pub then: Expr,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    Literal(Literal),
    /// `[a, b]`
    Array(Vec<Expr>),
    /// `{"k": v}`, in the order written (evaluation builds a sorted object).
    Object(Vec<(Expr, Expr)>),
    /// A bare name: a keyspace alias, a variable, or (formalized by the pipeline) a field of
    /// the current document.
    Ident(Ident),
    /// `base.name`
    Field {
        base: Box<Expr>,
        name: Ident,
    },
    /// `base.[name]`: the field named by a string-valued expression.
    DynamicField {
        base: Box<Expr>,
        name: Box<Expr>,
    },
    /// `base[index]`
    Element {
        base: Box<Expr>,
        index: Box<Expr>,
    },
    Param(Param),
    Unary {
        op: UnaryOp,
        operand: Box<Expr>,
    },
    Binary {
        op: BinaryOp,
        left: Box<Expr>,
        right: Box<Expr>,
    },
    /// `expr [NOT] BETWEEN low AND high`
    Between {
        expr: Box<Expr>,
        low: Box<Expr>,
        high: Box<Expr>,
        negated: bool,
    },
    Is {
        expr: Box<Expr>,
        test: IsTest,
    },
    /// `CASE [operand] WHEN .. THEN .. [ELSE ..] END`; with an operand each `when` is
    /// compared to it, without one each `when` is a condition.
    Case {
        operand: Option<Box<Expr>>,
        whens: Vec<WhenThen>,
        otherwise: Option<Box<Expr>>,
    },
    /// A scalar function; the parser checked the name and the argument count.
    Call {
        func: Func,
        args: Vec<Expr>,
    },
    /// An aggregate; `arg` is None only for `COUNT(*)`.
    Aggregate {
        func: AggFunc,
        distinct: bool,
        arg: Option<Box<Expr>>,
    },
    /// `META()` or `META(alias)`: the current document's metadata as an object.
    Meta {
        keyspace: Option<Ident>,
    },
    /// `ANY var IN source SATISFIES condition END` and its EVERY forms.
    Collection {
        quantifier: Quantifier,
        var: Ident,
        source: Box<Expr>,
        satisfies: Box<Expr>,
    },
}

impl Expr {
    pub fn ident(name: &str) -> Expr {
        Expr::Ident(Ident::new(name))
    }

    pub fn field(base: Expr, name: &str) -> Expr {
        Expr::Field {
            base: Box::new(base),
            name: Ident::new(name),
        }
    }

    pub fn binary(op: BinaryOp, left: Expr, right: Expr) -> Expr {
        Expr::Binary {
            op,
            left: Box::new(left),
            right: Box::new(right),
        }
    }

    pub fn string(s: &str) -> Expr {
        Expr::Literal(Literal::String(s.to_owned()))
    }

    pub fn int(n: i64) -> Expr {
        Expr::Literal(Literal::Number(n.into()))
    }

    /// The direct sub-expressions, in evaluation order.
    pub fn children(&self) -> Vec<&Expr> {
        match self {
            Expr::Literal(_) | Expr::Ident(_) | Expr::Param(_) | Expr::Meta { .. } => Vec::new(),
            Expr::Array(items) | Expr::Call { args: items, .. } => items.iter().collect(),
            Expr::Object(pairs) => pairs.iter().flat_map(|(k, v)| [k, v]).collect(),
            Expr::Field { base, .. } => vec![base],
            Expr::DynamicField { base, name: other } | Expr::Element { base, index: other } => {
                vec![base, other]
            }
            Expr::Unary { operand, .. } => vec![operand],
            Expr::Binary { left, right, .. } => vec![left, right],
            Expr::Between {
                expr, low, high, ..
            } => vec![expr, low, high],
            Expr::Is { expr, .. } => vec![expr],
            Expr::Case {
                operand,
                whens,
                otherwise,
            } => {
                let mut out: Vec<&Expr> = operand.iter().map(|e| &**e).collect();
                out.extend(whens.iter().flat_map(|w| [&w.when, &w.then]));
                out.extend(otherwise.iter().map(|e| &**e));
                out
            }
            Expr::Aggregate { arg, .. } => arg.iter().map(|e| &**e).collect(),
            Expr::Collection {
                source, satisfies, ..
            } => vec![source, satisfies],
        }
    }

    /// Whether an aggregate occurs anywhere in this expression.
    pub fn contains_aggregate(&self) -> bool {
        matches!(self, Expr::Aggregate { .. })
            || self.children().into_iter().any(Expr::contains_aggregate)
    }

    /// The name a projection gives this expression when it has no `AS`: the identifier, or
    /// the last field name of a path (`META().id` is `id`). Everything else gets `$n`.
    pub fn implicit_name(&self) -> Option<&str> {
        match self {
            Expr::Ident(id) | Expr::Field { name: id, .. } => Some(id.as_str()),
            _ => None,
        }
    }
}
