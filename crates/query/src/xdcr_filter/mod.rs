//! XDCR's filtering expressions: which changes a replication sends.
//!
//! Couchbase's XDCR filters (its "advanced filtering") are a small language of their own: a
//! subset of SQL++ with a few additions, and with its own reserved words (only `AND`,
//! `EXISTS`, `FALSE`, `IF`, `IS`, `META`, `MISSING`, `NOT`, `NULL`, `OR` and `TRUE`, so a
//! field named `value` or `order` needs no backticks, as it would in SQL++). What it offers:
//!
//! - conditions joined by `AND`, `OR`, `NOT`, and parentheses;
//! - comparisons `=` `==` `!=` `<>` `<` `<=` `>` `>=`, and `IS [NOT] NULL`,
//!   `IS [NOT] MISSING`;
//! - `EXISTS(path)`: the field is present (XDCR's meaning, not SQL++'s);
//! - `REGEXP_CONTAINS(expr, "pattern")`: the pattern is found in a string;
//! - paths into the body (`geo.alt`, `` `a b`.c ``, `schedule[0].flight`), `META().id` (the
//!   key) and `META().xattrs.NAME` (an extended attribute);
//! - arithmetic `+ - * / %` and negation, number functions (`ABS`, `POW`, `PI()`, ...), and
//!   `DATE(x)`, an RFC 3339 or `YYYY-MM-DD` date as a comparable number.
//!
//! A filter that is not such an expression but compiles as a regular expression is a key
//! filter (`REGEXP_CONTAINS(META().id, text)`), as filters written before XDCR had
//! expressions are read by Couchbase: `^order::` and `airline|hotel` stay key filters. A bare
//! name (`orders`) is not a condition, so it too is read as a regular expression.
//!
//! Values and comparisons follow SQL++ (the crate's `collate` and `eval::ops`): comparing
//! across types uses the collation order, arithmetic on a non-number is NULL. A change is
//! sent only when the whole expression is TRUE. `IS NOT NULL` is true of a missing field,
//! as Couchbase documents for XDCR (SQL++ would say MISSING).
//!
//! Deviations from Couchbase: regular expressions are those of the `regex` crate, without
//! lookaround (a pattern with `(?=` or `(?!` is refused when the filter is created, not
//! accepted); `META()` offers `id` and `xattrs` only, as Couchbase documents.
//!
//! Bounded: the text is at most [`FILTER_TEXT_BYTES_MAX`] bytes, nesting at most
//! [`FILTER_DEPTH_MAX`] levels, and each pattern compiles within
//! [`FILTER_REGEX_BYTES_MAX`]; evaluation is linear in the expression's size (regexes match
//! in linear time).
//!
//! Layout: `parse` (the grammar, over the SQL++ lexer's tokens), `eval` (one change in, TRUE
//! or not out), `date` (`DATE()`'s formats), `tests`.

mod date;
mod eval;
mod parse;

#[cfg(test)]
mod tests;

use crate::ast::{BinaryOp, IsTest};
use crate::value::Value;

pub use eval::Subject;

/// Longest filter text accepted.
pub const FILTER_TEXT_BYTES_MAX: usize = 4096;
/// Deepest nesting of parentheses, operators and paths.
pub const FILTER_DEPTH_MAX: usize = 64;
/// Largest compiled regular expression (the `regex` crate's size limit), per pattern.
pub const FILTER_REGEX_BYTES_MAX: usize = 1 << 20;

/// Why a filter was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error("the filter is longer than {FILTER_TEXT_BYTES_MAX} bytes")]
    TooLong,
    #[error("the filter is empty")]
    Empty,
    #[error("the filter nests deeper than {FILTER_DEPTH_MAX} levels")]
    TooDeep,
    /// Neither an expression nor a regular expression: `expression` says why it is not an
    /// expression (at which byte), `regex` why it is not a regular expression.
    #[error(
        "not a filter expression ({expression}) nor a regular expression on the key ({regex})"
    )]
    Invalid { expression: String, regex: String },
    /// It is an expression, but one of its patterns does not compile.
    #[error("invalid pattern {pattern:?} in REGEXP_CONTAINS: {reason}")]
    BadPattern { pattern: String, reason: String },
}

/// A compiled filter.
#[derive(Debug, Clone)]
pub struct Filter {
    root: Node,
    reads: Reads,
}

/// What a filter reads of a change, so the caller decodes no more than needed, and knows
/// whether it can judge a deletion (which has a key, and no body).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reads {
    pub body: bool,
    pub xattrs: bool,
}

impl Reads {
    /// Only the key: deletions and expirations can be judged too.
    pub fn key_only(self) -> bool {
        !self.body && !self.xattrs
    }
}

impl Filter {
    /// A filtering expression or, failing that, a regular expression on the key.
    pub fn compile(text: &str) -> Result<Filter, FilterError> {
        if text.len() > FILTER_TEXT_BYTES_MAX {
            return Err(FilterError::TooLong);
        }
        if text.trim().is_empty() {
            return Err(FilterError::Empty);
        }
        match parse::expression(text) {
            Ok(root) => Ok(Filter::of(root)),
            Err(parse::Refusal::Pattern(e)) => Err(e),
            Err(parse::Refusal::TooDeep) => Err(FilterError::TooDeep),
            Err(parse::Refusal::Syntax(expression)) => match regex(text) {
                Ok(re) => Ok(Filter::of(Node::Regexp(Box::new(Node::Key), re))),
                Err(regex) => Err(FilterError::Invalid { expression, regex }),
            },
        }
    }

    fn of(root: Node) -> Filter {
        let mut reads = Reads::default();
        root.visit(&mut |n| match n {
            Node::Body(_) => reads.body = true,
            Node::Xattrs => reads.xattrs = true,
            _ => {}
        });
        Filter { root, reads }
    }

    pub fn reads(&self) -> Reads {
        self.reads
    }

    /// Whether the change is sent: the expression is TRUE for it.
    pub fn matches(&self, subject: &Subject<'_>) -> bool {
        self.root.eval(subject) == Value::TRUE
    }
}

pub(crate) fn regex(pattern: &str) -> Result<regex::Regex, String> {
    regex::RegexBuilder::new(pattern)
        .size_limit(FILTER_REGEX_BYTES_MAX)
        .build()
        .map_err(|e| match e {
            regex::Error::Syntax(s) => s.lines().last().unwrap_or_default().trim().to_string(),
            other => other.to_string(),
        })
}

/// The number functions, as Couchbase's XDCR filters offer them (SQL++'s, less `RANDOM`,
/// `SIGN` and `TRUNC`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MathFn {
    Abs,
    Acos,
    Asin,
    Atan,
    Atan2,
    Ceil,
    Cos,
    Degrees,
    E,
    Exp,
    Floor,
    Ln,
    Log,
    Pi,
    Pow,
    Radians,
    Round,
    Sin,
    Sqrt,
    Tan,
}

impl MathFn {
    /// Case-insensitive lookup, with the argument count.
    pub(crate) fn lookup(name: &str) -> Option<(MathFn, usize)> {
        use MathFn as M;
        Some(match name.to_ascii_uppercase().as_str() {
            "ABS" => (M::Abs, 1),
            "ACOS" => (M::Acos, 1),
            "ASIN" => (M::Asin, 1),
            "ATAN" => (M::Atan, 1),
            "ATAN2" => (M::Atan2, 2),
            "CEIL" => (M::Ceil, 1),
            "COS" => (M::Cos, 1),
            "DEGREES" => (M::Degrees, 1),
            "E" => (M::E, 0),
            "EXP" => (M::Exp, 1),
            "FLOOR" => (M::Floor, 1),
            "LN" => (M::Ln, 1),
            "LOG" => (M::Log, 1),
            "PI" => (M::Pi, 0),
            "POW" | "POWER" => (M::Pow, 2),
            "RADIANS" => (M::Radians, 1),
            "ROUND" => (M::Round, 1),
            "SIN" => (M::Sin, 1),
            "SQRT" => (M::Sqrt, 1),
            "TAN" => (M::Tan, 1),
            _ => return None,
        })
    }
}

/// The compiled expression.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    Literal(Value),
    /// A top-level field of the body.
    Body(String),
    /// `META().id`
    Key,
    /// `META().xattrs`: the extended attributes as one object.
    Xattrs,
    Field(Box<Node>, String),
    Element(Box<Node>, i64),
    Neg(Box<Node>),
    Not(Box<Node>),
    /// Two or more conditions (kept flat, so long chains add no depth).
    And(Vec<Node>),
    Or(Vec<Node>),
    /// A comparison or arithmetic operator.
    Binary(BinaryOp, Box<Node>, Box<Node>),
    Is(Box<Node>, IsTest),
    Exists(Box<Node>),
    Regexp(Box<Node>, regex::Regex),
    Date(Box<Node>),
    Math(MathFn, Vec<Node>),
}

impl Node {
    fn children(&self) -> Vec<&Node> {
        match self {
            Node::Literal(_) | Node::Body(_) | Node::Key | Node::Xattrs => Vec::new(),
            Node::Field(n, _)
            | Node::Element(n, _)
            | Node::Neg(n)
            | Node::Not(n)
            | Node::Is(n, _)
            | Node::Exists(n)
            | Node::Regexp(n, _)
            | Node::Date(n) => vec![n],
            Node::Binary(_, a, b) => vec![a, b],
            Node::And(args) | Node::Or(args) | Node::Math(_, args) => args.iter().collect(),
        }
    }

    /// Levels from here to the deepest leaf (a leaf is 1).
    fn depth(&self) -> usize {
        1 + self
            .children()
            .into_iter()
            .map(Node::depth)
            .max()
            .unwrap_or(0)
    }

    fn visit(&self, f: &mut impl FnMut(&Node)) {
        f(self);
        for c in self.children() {
            c.visit(f);
        }
    }

    /// Whether it is a condition, as XDCR's grammar requires at the top and under the
    /// logical operators (a bare field or number is not).
    fn is_condition(&self) -> bool {
        match self {
            Node::Literal(v) => v == &Value::TRUE || v == &Value::FALSE,
            Node::And(terms) | Node::Or(terms) => terms.iter().all(Node::is_condition),
            Node::Not(n) => n.is_condition(),
            Node::Binary(op, ..) => matches!(
                op,
                BinaryOp::Eq
                    | BinaryOp::Ne
                    | BinaryOp::Lt
                    | BinaryOp::Le
                    | BinaryOp::Gt
                    | BinaryOp::Ge
            ),
            Node::Is(..) | Node::Exists(_) | Node::Regexp(..) => true,
            _ => false,
        }
    }
}
