use std::fmt::{self, Display, Formatter, Write};

use crate::ast::{Expr, Literal, Param, Quantifier, UnaryOp};

impl Display for Literal {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Literal::Missing => f.write_str("MISSING"),
            Literal::Null => f.write_str("NULL"),
            Literal::Bool(true) => f.write_str("TRUE"),
            Literal::Bool(false) => f.write_str("FALSE"),
            Literal::Number(n) => write!(f, "{n}"),
            Literal::String(s) => write_json_string(f, s),
        }
    }
}

/// A double-quoted string with JSON escapes, which the lexer reads back unchanged (and
/// any JSON parser too: the query service writes its envelope's strings with it).
pub fn write_json_string(f: &mut impl Write, s: &str) -> fmt::Result {
    f.write_char('"')?;
    for c in s.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            c if (c as u32) < 0x20 => write!(f, "\\u{:04x}", c as u32)?,
            c => f.write_char(c)?,
        }
    }
    f.write_char('"')
}

impl Display for Param {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Param::Positional(n) => write!(f, "${n}"),
            Param::Named(name) => write!(f, "${name}"),
        }
    }
}

/// Items separated by `, `.
pub(crate) struct List<'a, T>(pub &'a [T]);

impl<T: Display> Display for List<'_, T> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        for (i, item) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{item}")?;
        }
        Ok(())
    }
}

impl Display for Expr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Literal(l) => write!(f, "{l}"),
            Expr::Array(items) => write!(f, "[{}]", List(items)),
            Expr::Object(pairs) => {
                f.write_str("{")?;
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k}: {v}")?;
                }
                f.write_str("}")
            }
            Expr::Ident(id) => write!(f, "{id}"),
            Expr::Field { base, name } => write!(f, "{base}.{name}"),
            Expr::DynamicField { base, name } => write!(f, "{base}.[{name}]"),
            Expr::Element { base, index } => write!(f, "{base}[{index}]"),
            Expr::Param(p) => write!(f, "{p}"),
            Expr::Unary {
                op: UnaryOp::Neg,
                operand,
            } => write!(f, "(-{operand})"),
            Expr::Unary {
                op: UnaryOp::Not,
                operand,
            } => write!(f, "(NOT {operand})"),
            Expr::Binary { op, left, right } => write!(f, "({left} {} {right})", op.symbol()),
            Expr::Between {
                expr,
                low,
                high,
                negated,
            } => {
                let not = if *negated { "NOT " } else { "" };
                write!(f, "({expr} {not}BETWEEN {low} AND {high})")
            }
            Expr::Is { expr, test } => write!(f, "({expr} {})", test.keywords()),
            Expr::Case {
                operand,
                whens,
                otherwise,
            } => {
                f.write_str("CASE")?;
                if let Some(op) = operand {
                    write!(f, " {op}")?;
                }
                for w in whens {
                    write!(f, " WHEN {} THEN {}", w.when, w.then)?;
                }
                if let Some(e) = otherwise {
                    write!(f, " ELSE {e}")?;
                }
                f.write_str(" END")
            }
            Expr::Call { func, args } => write!(f, "{}({})", func.name(), List(args)),
            Expr::Aggregate {
                func,
                distinct,
                arg,
            } => {
                let distinct = if *distinct { "DISTINCT " } else { "" };
                match arg {
                    Some(a) => write!(f, "{}({distinct}{a})", func.name()),
                    None => write!(f, "{}(*)", func.name()),
                }
            }
            Expr::Meta { keyspace: Some(k) } => write!(f, "META({k})"),
            Expr::Meta { keyspace: None } => f.write_str("META()"),
            Expr::Collection {
                quantifier,
                var,
                source,
                satisfies,
            } => {
                let q = match quantifier {
                    Quantifier::Any => "ANY",
                    Quantifier::Every => "EVERY",
                    Quantifier::AnyAndEvery => "ANY AND EVERY",
                };
                write!(f, "{q} {var} IN {source} SATISFIES {satisfies} END")
            }
        }
    }
}
