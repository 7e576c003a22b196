//! Operator expressions: precedence climbing over Couchbase's precedence table (the
//! `%left`/`%nonassoc` lines of n1ql.y), including its quirks: comparisons do not chain
//! (`a = b = c` is an error), and `NOT LIKE`/`NOT IN`/`NOT BETWEEN` bind on the left as
//! loosely as prefix `NOT`, since yacc decides at the `NOT` token (`a = b NOT IN c` is
//! `(a = b) NOT IN c`).
//!
//! Every function returns a [`Node`]: the expression and its depth, so a tree deeper than
//! [`MAX_NESTING`] is refused while it is built (long operator or path chains deepen the
//! tree without deepening the recursion, parentheses the recursion without the tree).

use super::{Parser, MAX_NESTING, MAX_RECURSION};
use crate::ast::{BinaryOp, Expr, IsTest, UnaryOp};
use crate::error::Result;
use crate::lexer::{Punct, Tok};

pub(super) struct Node {
    pub expr: Expr,
    pub depth: usize,
}

// Binding levels, loosest first.
const OR: u8 = 1;
const AND: u8 = 2;
const NOT: u8 = 3;
const EQUALITY: u8 = 4;
const RELATIONAL: u8 = 5;
const LIKE: u8 = 6;
const BETWEEN: u8 = 7;
const IN: u8 = 8;
const IS: u8 = 10;
const CONCAT: u8 = 11;
const ADDITIVE: u8 = 12;
const MULTIPLICATIVE: u8 = 13;
const UNARY: u8 = 14;

enum Infix {
    /// A binary operator: its level, and whether it refuses to chain with its own level.
    Binary(BinaryOp, u8, bool),
    /// `NOT LIKE`, `NOT IN`, `NOT BETWEEN`: the `NOT` token binds at [`NOT`].
    Negated,
    Between,
    Is,
}

impl Parser<'_> {
    /// A full expression.
    pub(super) fn expr(&mut self) -> Result<Expr> {
        Ok(self.expr_node()?.expr)
    }

    pub(super) fn expr_node(&mut self) -> Result<Node> {
        self.binary(0, false)
    }

    /// Wraps children into a node, refusing trees deeper than the limit.
    pub(super) fn node(&self, expr: Expr, children: &[usize]) -> Result<Node> {
        let depth = 1 + children.iter().copied().max().unwrap_or(0);
        if depth > MAX_NESTING {
            return Err(self.nesting_error());
        }
        Ok(Node { expr, depth })
    }

    pub(super) fn nesting_error(&self) -> crate::error::QueryError {
        self.limit_error(&format!(
            "expression nested deeper than {MAX_NESTING} levels"
        ))
    }

    /// Runs `f` one recursion level deeper, refusing to go past the limit.
    pub(super) fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        if self.depth >= MAX_RECURSION {
            return Err(self.limit_error("expression nested too deeply"));
        }
        self.depth += 1;
        let r = f(self);
        self.depth -= 1;
        r
    }

    fn peek_infix(&self) -> Option<(Infix, u8)> {
        use BinaryOp as B;
        let binary = |op, level, nonassoc| Some((Infix::Binary(op, level, nonassoc), level));
        match self.peek() {
            Tok::Keyword("OR") => binary(B::Or, OR, false),
            Tok::Keyword("AND") => binary(B::And, AND, false),
            Tok::Keyword("NOT") => Some((Infix::Negated, NOT)),
            Tok::Punct(Punct::Eq | Punct::DoubleEq) => binary(B::Eq, EQUALITY, true),
            Tok::Punct(Punct::Ne) => binary(B::Ne, EQUALITY, true),
            Tok::Punct(Punct::Lt) => binary(B::Lt, RELATIONAL, true),
            Tok::Punct(Punct::Le) => binary(B::Le, RELATIONAL, true),
            Tok::Punct(Punct::Gt) => binary(B::Gt, RELATIONAL, true),
            Tok::Punct(Punct::Ge) => binary(B::Ge, RELATIONAL, true),
            Tok::Keyword("LIKE") => binary(B::Like, LIKE, true),
            Tok::Keyword("IN") => binary(B::In, IN, true),
            Tok::Keyword("BETWEEN") => Some((Infix::Between, BETWEEN)),
            Tok::Keyword("IS") => Some((Infix::Is, IS)),
            Tok::Punct(Punct::Concat) => binary(B::Concat, CONCAT, false),
            Tok::Punct(Punct::Plus) => binary(B::Add, ADDITIVE, false),
            Tok::Punct(Punct::Minus) => binary(B::Sub, ADDITIVE, false),
            Tok::Punct(Punct::Star) => binary(B::Mul, MULTIPLICATIVE, false),
            Tok::Punct(Punct::Div) => binary(B::Div, MULTIPLICATIVE, false),
            Tok::Punct(Punct::Mod) => binary(B::Mod, MULTIPLICATIVE, false),
            _ => None,
        }
    }

    /// Operators binding at `min` or tighter. `restricted` is Couchbase's `b_expr` (the
    /// bounds of BETWEEN): no prefix NOT at this level.
    fn binary(&mut self, min: u8, restricted: bool) -> Result<Node> {
        let mut lhs = self.unary(restricted)?;
        // The level of the last non-associative operator applied, which may not repeat.
        let mut last_nonassoc: Option<u8> = None;
        while let Some((infix, level)) = self.peek_infix() {
            if level < min {
                break;
            }
            if last_nonassoc == Some(level) {
                return Err(self.error_here());
            }
            self.advance();
            let (expr, depths, nonassoc) = match infix {
                Infix::Binary(op, level, nonassoc) => {
                    let rhs = self.nested(|p| p.binary(level + 1, restricted))?;
                    (
                        Expr::binary(op, lhs.expr, rhs.expr),
                        [lhs.depth, rhs.depth, 0],
                        nonassoc.then_some(level),
                    )
                }
                Infix::Negated => self.negated(lhs, restricted)?,
                Infix::Between => {
                    let (expr, depths) = self.between(lhs, false)?;
                    (expr, depths, None)
                }
                Infix::Is => {
                    let test = self.is_test()?;
                    let e = Expr::Is {
                        expr: Box::new(lhs.expr),
                        test,
                    };
                    (e, [lhs.depth, 0, 0], None)
                }
            };
            lhs = self.node(expr, &depths)?;
            last_nonassoc = nonassoc;
        }
        Ok(lhs)
    }

    /// After `lhs NOT`: `LIKE rhs`, `IN rhs` or `BETWEEN low AND high`, with the level the
    /// operator does not chain with (BETWEEN chains, as in yacc nothing is left to conflict).
    fn negated(&mut self, lhs: Node, restricted: bool) -> Result<(Expr, [usize; 3], Option<u8>)> {
        let (op, level) = match self.peek() {
            Tok::Keyword("LIKE") => (BinaryOp::NotLike, LIKE),
            Tok::Keyword("IN") => (BinaryOp::NotIn, IN),
            Tok::Keyword("BETWEEN") => {
                self.advance();
                let (expr, depths) = self.between(lhs, true)?;
                return Ok((expr, depths, None));
            }
            _ => return Err(self.error_here()),
        };
        self.advance();
        let rhs = self.nested(|p| p.binary(level + 1, restricted))?;
        Ok((
            Expr::binary(op, lhs.expr, rhs.expr),
            [lhs.depth, rhs.depth, 0],
            Some(level),
        ))
    }

    /// After `expr [NOT] BETWEEN`: two bounds, each an arithmetic-only expression.
    fn between(&mut self, lhs: Node, negated: bool) -> Result<(Expr, [usize; 3])> {
        let low = self.nested(|p| p.binary(CONCAT, true))?;
        self.expect_kw("AND")?;
        let high = self.nested(|p| p.binary(CONCAT, true))?;
        let depths = [lhs.depth, low.depth, high.depth];
        let expr = Expr::Between {
            expr: Box::new(lhs.expr),
            low: Box::new(low.expr),
            high: Box::new(high.expr),
            negated,
        };
        Ok((expr, depths))
    }

    /// After `IS`: `[NOT] NULL|MISSING|VALUED|KNOWN|UNKNOWN`.
    fn is_test(&mut self) -> Result<IsTest> {
        let not = self.eat_kw("NOT");
        let test = match (self.peek(), not) {
            (Tok::Keyword("NULL"), false) => IsTest::Null,
            (Tok::Keyword("NULL"), true) => IsTest::NotNull,
            (Tok::Keyword("MISSING"), false) => IsTest::Missing,
            (Tok::Keyword("MISSING"), true) => IsTest::NotMissing,
            (Tok::Keyword("VALUED" | "KNOWN"), false) | (Tok::Keyword("UNKNOWN"), true) => {
                IsTest::Valued
            }
            (Tok::Keyword("VALUED" | "KNOWN"), true) | (Tok::Keyword("UNKNOWN"), false) => {
                IsTest::NotValued
            }
            _ => return Err(self.error_here()),
        };
        self.advance();
        Ok(test)
    }

    fn unary(&mut self, restricted: bool) -> Result<Node> {
        // Only the very first primary of a projection term may be followed by `.*`.
        let head = std::mem::take(&mut self.projection_head);
        let op = match self.peek() {
            Tok::Keyword("NOT") if restricted => return Err(self.error_here()),
            Tok::Keyword("NOT") => (UnaryOp::Not, NOT),
            Tok::Punct(Punct::Minus) => (UnaryOp::Neg, UNARY),
            _ => return self.postfix(head),
        };
        self.advance();
        let operand = self.nested(|p| p.binary(op.1, false))?;
        let expr = Expr::Unary {
            op: op.0,
            operand: Box::new(operand.expr),
        };
        self.node(expr, &[operand.depth])
    }

    /// A primary followed by field and element steps.
    fn postfix(&mut self, head: bool) -> Result<Node> {
        let node = self.primary()?;
        self.steps(node, head)
    }

    /// `.name`, `.[expr]` and `[expr]` steps after `node`, as many as follow. With
    /// `stop_at_star`, a `.*` is left for the caller (a projection's `alias.*`).
    pub(super) fn steps(&mut self, mut node: Node, stop_at_star: bool) -> Result<Node> {
        loop {
            if self.at_punct(Punct::Dot) {
                if stop_at_star && matches!(self.peek_at(1), Tok::Punct(Punct::Star)) {
                    return Ok(node);
                }
                self.advance();
                if self.eat_punct(Punct::LBracket) {
                    let name = self.nested(|p| p.expr_node())?;
                    self.expect_punct(Punct::RBracket)?;
                    let depths = [node.depth, name.depth];
                    let expr = Expr::DynamicField {
                        base: Box::new(node.expr),
                        name: Box::new(name.expr),
                    };
                    node = self.node(expr, &depths)?;
                    continue;
                }
                let name = self.ident()?;
                let depth = node.depth;
                node = self.node(
                    Expr::Field {
                        base: Box::new(node.expr),
                        name,
                    },
                    &[depth],
                )?;
            } else if self.eat_punct(Punct::LBracket) {
                // Slices, `[*]` and `[??]` are not supported: they fail at their first token.
                let index = self.nested(|p| p.expr_node())?;
                self.expect_punct(Punct::RBracket)?;
                let depths = [node.depth, index.depth];
                let expr = Expr::Element {
                    base: Box::new(node.expr),
                    index: Box::new(index.expr),
                };
                node = self.node(expr, &depths)?;
            } else {
                return Ok(node);
            }
        }
    }
}
