//! Primary expressions: literals, parameters, constructors, parentheses, CASE, the
//! ANY/EVERY quantifiers, names and function calls.

use super::expr::Node;
use super::Parser;
use crate::ast::{Expr, Literal, Param, Quantifier, WhenThen};
use crate::error::Result;
use crate::functions::{AggFunc, Func};
use crate::lexer::{Punct, Tok};

/// Couchbase's upper bound for "any number of arguments", as its messages print it.
const VARIADIC_MAX_SHOWN: usize = 32767;

impl Parser<'_> {
    pub(super) fn primary(&mut self) -> Result<Node> {
        let literal = match self.peek().clone() {
            Tok::Keyword("TRUE") => Some(Literal::Bool(true)),
            Tok::Keyword("FALSE") => Some(Literal::Bool(false)),
            Tok::Keyword("NULL") => Some(Literal::Null),
            Tok::Keyword("MISSING") => Some(Literal::Missing),
            Tok::Int(n) => Some(Literal::Number(n.into())),
            Tok::Float(f) => match serde_json::Number::from_f64(f) {
                Some(n) => Some(Literal::Number(n)),
                None => return Err(self.error_here()),
            },
            Tok::Str(s) => Some(Literal::String(s)),
            _ => None,
        };
        if let Some(lit) = literal {
            self.advance();
            return self.node(Expr::Literal(lit), &[]);
        }
        let param = match self.peek().clone() {
            Tok::NamedParam(name) => Some(Param::Named(name)),
            Tok::PositionalParam(n) => Some(Param::Positional(n)),
            Tok::NextParam => {
                self.next_param = self.next_param.saturating_add(1);
                Some(Param::Positional(self.next_param))
            }
            _ => None,
        };
        if let Some(param) = param {
            self.advance();
            return self.node(Expr::Param(param), &[]);
        }
        match self.peek() {
            Tok::Punct(Punct::LBracket) => self.nested(|p| p.array()),
            Tok::Punct(Punct::LBrace) => self.nested(|p| p.object()),
            Tok::Punct(Punct::LParen) => self.nested(|p| {
                p.advance();
                let inner = p.expr_node()?;
                p.expect_punct(Punct::RParen)?;
                Ok(inner)
            }),
            Tok::Keyword("CASE") => self.nested(|p| p.case()),
            Tok::Keyword("ANY" | "SOME" | "EVERY") => self.nested(|p| p.quantified()),
            Tok::Keyword("REPLACE") if matches!(self.peek_at(1), Tok::Punct(Punct::LParen)) => {
                self.nested(|p| p.call())
            }
            _ if self.at_ident() => {
                if matches!(self.peek_at(1), Tok::Punct(Punct::LParen)) {
                    return self.nested(|p| p.call());
                }
                let id = self.ident()?;
                self.node(Expr::Ident(id), &[])
            }
            _ => Err(self.error_here()),
        }
    }

    /// `expr, expr, ...` up to (not including) `close`; the list may be empty.
    fn list_until(&mut self, close: Punct) -> Result<(Vec<Expr>, Vec<usize>)> {
        let (mut items, mut depths) = (Vec::new(), Vec::new());
        if self.at_punct(close) {
            return Ok((items, depths));
        }
        loop {
            let n = self.expr_node()?;
            items.push(n.expr);
            depths.push(n.depth);
            if !self.eat_punct(Punct::Comma) {
                return Ok((items, depths));
            }
        }
    }

    fn array(&mut self) -> Result<Node> {
        self.expect_punct(Punct::LBracket)?;
        let (items, depths) = self.list_until(Punct::RBracket)?;
        self.expect_punct(Punct::RBracket)?;
        self.node(Expr::Array(items), &depths)
    }

    /// `{k: v, ...}`; a member without `:` is named by its alias or its implicit name
    /// (`{a.b}` is `{"b": a.b}`), as Couchbase allows.
    fn object(&mut self) -> Result<Node> {
        self.expect_punct(Punct::LBrace)?;
        let (mut pairs, mut depths) = (Vec::new(), Vec::new());
        if !self.at_punct(Punct::RBrace) {
            loop {
                let start = self.token().clone();
                let key = self.expr_node()?;
                if self.eat_punct(Punct::Colon) {
                    let value = self.expr_node()?;
                    depths.extend([key.depth, value.depth]);
                    pairs.push((key.expr, value.expr));
                } else {
                    let alias = if self.eat_kw("AS") {
                        Some(self.ident()?)
                    } else {
                        self.eat_ident()
                    };
                    let name = match alias {
                        Some(a) => a.as_str().to_owned(),
                        None => match key.expr.implicit_name() {
                            Some(n) => n.to_owned(),
                            None => {
                                let what =
                                    format!("Object member missing name or value: {}", key.expr);
                                return Err(self.fatal_at(&what, &start));
                            }
                        },
                    };
                    depths.extend([1, key.depth]);
                    pairs.push((Expr::Literal(Literal::String(name)), key.expr));
                }
                if !self.eat_punct(Punct::Comma) {
                    break;
                }
            }
        }
        self.expect_punct(Punct::RBrace)?;
        self.node(Expr::Object(pairs), &depths)
    }

    fn case(&mut self) -> Result<Node> {
        self.expect_kw("CASE")?;
        let mut depths = Vec::new();
        let operand = if self.at_kw("WHEN") {
            None
        } else {
            let n = self.expr_node()?;
            depths.push(n.depth);
            Some(Box::new(n.expr))
        };
        let mut whens = Vec::new();
        self.expect_kw("WHEN")?;
        loop {
            let when = self.expr_node()?;
            self.expect_kw("THEN")?;
            let then = self.expr_node()?;
            depths.extend([when.depth, then.depth]);
            whens.push(WhenThen {
                when: when.expr,
                then: then.expr,
            });
            if !self.eat_kw("WHEN") {
                break;
            }
        }
        let otherwise = if self.eat_kw("ELSE") {
            let n = self.expr_node()?;
            depths.push(n.depth);
            Some(Box::new(n.expr))
        } else {
            None
        };
        self.expect_kw("END")?;
        self.node(
            Expr::Case {
                operand,
                whens,
                otherwise,
            },
            &depths,
        )
    }

    /// `ANY|SOME [AND EVERY] | EVERY var IN source SATISFIES cond END`, one binding.
    fn quantified(&mut self) -> Result<Node> {
        let quantifier = if self.eat_kw("EVERY") {
            Quantifier::Every
        } else {
            self.advance();
            if self.eat_kw("AND") {
                self.expect_kw("EVERY")?;
                Quantifier::AnyAndEvery
            } else {
                Quantifier::Any
            }
        };
        let var = self.ident()?;
        self.expect_kw("IN")?;
        let source = self.expr_node()?;
        self.expect_kw("SATISFIES")?;
        let satisfies = self.expr_node()?;
        self.expect_kw("END")?;
        let depths = [source.depth, satisfies.depth];
        let expr = Expr::Collection {
            quantifier,
            var,
            source: Box::new(source.expr),
            satisfies: Box::new(satisfies.expr),
        };
        self.node(expr, &depths)
    }

    /// `name(args)`: META, an aggregate, or a scalar function of the catalog. Couchbase
    /// checks names and argument counts while parsing; so does this.
    fn call(&mut self) -> Result<Node> {
        let name_token = self.advance();
        let name = self
            .text
            .get(name_token.start..name_token.end)
            .unwrap_or("")
            .to_owned();
        let name = match &name_token.tok {
            Tok::Ident(s) | Tok::QuotedIdent(s) => s.clone(),
            _ => name,
        };
        self.expect_punct(Punct::LParen)?;
        let args_token = self.token().clone();
        if name.eq_ignore_ascii_case("meta") {
            let keyspace = self.eat_ident();
            if !self.at_punct(Punct::RParen) {
                return Err(self.fatal_at(
                    &format!("Invalid arguments to function {name}"),
                    &args_token,
                ));
            }
            self.advance();
            return self.node(Expr::Meta { keyspace }, &[]);
        }
        if let Some(func) = AggFunc::lookup(&name) {
            return self.aggregate(func, &name);
        }
        let Some(func) = Func::lookup(&name) else {
            let what = format!("Invalid function {name} (resolving to default:{name})");
            return Err(self.fatal_at(&what, &name_token));
        };
        let (args, depths) = self.list_until(Punct::RParen)?;
        self.expect_punct(Punct::RParen)?;
        let (min, max) = func.arity();
        if args.len() < min || args.len() > max {
            let what = if min == max {
                format!("Number of arguments to function {name} must be {min}.")
            } else {
                let max = max.min(VARIADIC_MAX_SHOWN);
                format!("Number of arguments to function {name} must be between {min} and {max}.")
            };
            return Err(self.fatal_at(&what, &args_token));
        }
        self.node(Expr::Call { func, args }, &depths)
    }

    /// After `AGG(`: `*` (COUNT only) or `[ALL|DISTINCT] expr`, then `)`.
    fn aggregate(&mut self, func: AggFunc, name: &str) -> Result<Node> {
        if func == AggFunc::Count
            && self.at_punct(Punct::Star)
            && matches!(self.peek_at(1), Tok::Punct(Punct::RParen))
        {
            self.advance();
            self.advance();
            let expr = Expr::Aggregate {
                func,
                distinct: false,
                arg: None,
            };
            return self.node(expr, &[]);
        }
        let args_token = self.token().clone();
        let distinct = if self.eat_kw("DISTINCT") {
            true
        } else {
            self.eat_kw("ALL");
            false
        };
        let (args, depths) = self.list_until(Punct::RParen)?;
        self.expect_punct(Punct::RParen)?;
        let mut args = args.into_iter();
        match (args.next(), args.next()) {
            (Some(arg), None) => self.node(
                Expr::Aggregate {
                    func,
                    distinct,
                    arg: Some(Box::new(arg)),
                },
                &depths,
            ),
            _ => Err(self.fatal_at(
                &format!("Number of arguments to function {name} must be 1."),
                &args_token,
            )),
        }
    }
}
