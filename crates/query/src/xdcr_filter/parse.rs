//! The grammar of XDCR filtering expressions, over the SQL++ lexer's tokens (the same
//! strings, numbers and backticked names), with XDCR's short list of reserved words.
//!
//! ```text
//! filter     := or                                  (and it must be a condition)
//! or         := and { OR and }
//! and        := not { AND not }
//! not        := NOT not | comparison
//! comparison := sum [ (= | == | != | <> | < | <= | > | >=) sum
//!                   | IS [NOT] (NULL | MISSING) ]
//! sum        := product { (+ | -) product }
//! product    := unary { (* | / | %) unary }
//! unary      := - unary | postfix
//! postfix    := primary { . name | [ int ] }
//! primary    := string | number | TRUE | FALSE | NULL | MISSING | ( or )
//!             | EXISTS ( or ) | META ( ) . (id | xattrs)
//!             | REGEXP_CONTAINS ( or , string ) | DATE ( or ) | MATHFN ( or, ... )
//!             | name
//! ```

use super::{regex, FilterError, MathFn, Node, FILTER_DEPTH_MAX};
use crate::ast::{BinaryOp, IsTest};
use crate::lexer::{tokenize, Punct, Tok, Token};
use crate::value::{float_value, Value};

/// XDCR's reserved words: anything else is a field name, even SQL++ keywords.
const RESERVED: [&str; 11] = [
    "AND", "EXISTS", "FALSE", "IF", "IS", "META", "MISSING", "NOT", "NULL", "OR", "TRUE",
];

pub(super) enum Refusal {
    /// Not an expression: why, and at which byte.
    Syntax(String),
    TooDeep,
    Pattern(FilterError),
}

type Parsed = Result<Node, Refusal>;

pub(super) fn expression(text: &str) -> Parsed {
    let text = text.trim();
    let mut p = Parser {
        text,
        tokens: tokenize(text),
        pos: 0,
        depth: 0,
    };
    let root = p.or()?;
    if p.peek() != &Tok::Eof {
        return Err(p.unexpected("an operator or the end"));
    }
    if root.depth() > FILTER_DEPTH_MAX {
        return Err(Refusal::TooDeep);
    }
    if !root.is_condition() {
        return Err(Refusal::Syntax(
            "it is not a condition (a comparison, IS, EXISTS, REGEXP_CONTAINS, TRUE or FALSE)"
                .into(),
        ));
    }
    Ok(root)
}

struct Parser<'a> {
    text: &'a str,
    tokens: Vec<Token>,
    pos: usize,
    /// How deep the parser has recursed; deeper than [`FILTER_DEPTH_MAX`] is refused.
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> &Tok {
        // `tokenize` always ends with Eof, and `bump` never passes it.
        &self.tokens[self.pos].tok
    }

    fn bump(&mut self) -> Tok {
        let t = self.tokens[self.pos].tok.clone();
        if t != Tok::Eof {
            self.pos += 1;
        }
        t
    }

    /// The raw text of the next token (a keyword's own spelling, not its canonical one).
    fn raw(&self) -> &str {
        let t = &self.tokens[self.pos];
        &self.text[t.start..t.end]
    }

    fn unexpected(&self, wanted: &str) -> Refusal {
        let t = &self.tokens[self.pos];
        let found = match &t.tok {
            Tok::Eof => "the end".to_string(),
            Tok::Error(e) => return Refusal::Syntax(format!("{e} at byte {}", t.start)),
            _ => format!("{:?}", self.raw()),
        };
        Refusal::Syntax(format!(
            "expected {wanted} at byte {}, found {found}",
            t.start
        ))
    }

    fn punct(&mut self, p: Punct) -> bool {
        if self.peek() == &Tok::Punct(p) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, p: Punct, wanted: &str) -> Result<(), Refusal> {
        if self.punct(p) {
            Ok(())
        } else {
            Err(self.unexpected(wanted))
        }
    }

    /// The next token as a word: its upper-case spelling if it is an unquoted name or a
    /// SQL++ keyword.
    fn word(&self) -> Option<String> {
        matches!(self.peek(), Tok::Ident(_) | Tok::Keyword(_))
            .then(|| self.raw().to_ascii_uppercase())
    }

    fn keyword(&mut self, kw: &str) -> bool {
        if self.word().as_deref() == Some(kw) {
            self.bump();
            true
        } else {
            false
        }
    }

    /// Parses what `f` parses one level of recursion deeper. Left-nested chains (`a + b +
    /// c`, `a.b.c`) are built in loops, not by recursion; the whole tree's depth is checked
    /// once it is built.
    fn nested(&mut self, f: impl FnOnce(&mut Self) -> Parsed) -> Parsed {
        self.depth += 1;
        if self.depth > FILTER_DEPTH_MAX {
            return Err(Refusal::TooDeep);
        }
        let n = f(self);
        self.depth -= 1;
        n
    }

    fn or(&mut self) -> Parsed {
        self.nested(|p| {
            let mut terms = vec![p.and()?];
            while p.keyword("OR") {
                terms.push(p.and()?);
            }
            Ok(chain(terms, Node::Or))
        })
    }

    fn and(&mut self) -> Parsed {
        let mut terms = vec![self.not()?];
        while self.keyword("AND") {
            terms.push(self.not()?);
        }
        Ok(chain(terms, Node::And))
    }

    fn not(&mut self) -> Parsed {
        if self.keyword("NOT") {
            return self.nested(|p| Ok(Node::Not(Box::new(p.not()?))));
        }
        self.comparison()
    }

    fn comparison(&mut self) -> Parsed {
        let left = self.sum()?;
        let op = match self.peek().clone() {
            Tok::Punct(Punct::Eq | Punct::DoubleEq) => BinaryOp::Eq,
            Tok::Punct(Punct::Ne) => BinaryOp::Ne,
            Tok::Punct(Punct::Lt) => BinaryOp::Lt,
            Tok::Punct(Punct::Le) => BinaryOp::Le,
            Tok::Punct(Punct::Gt) => BinaryOp::Gt,
            Tok::Punct(Punct::Ge) => BinaryOp::Ge,
            _ if self.keyword("IS") => {
                let negated = self.keyword("NOT");
                let test = match (self.word().as_deref(), negated) {
                    (Some("NULL"), false) => IsTest::Null,
                    (Some("NULL"), true) => IsTest::NotNull,
                    (Some("MISSING"), false) => IsTest::Missing,
                    (Some("MISSING"), true) => IsTest::NotMissing,
                    _ => return Err(self.unexpected("NULL or MISSING")),
                };
                self.bump();
                return Ok(Node::Is(Box::new(left), test));
            }
            _ => return Ok(left),
        };
        self.bump();
        let right = self.sum()?;
        Ok(Node::Binary(op, Box::new(left), Box::new(right)))
    }

    fn sum(&mut self) -> Parsed {
        let mut left = self.product()?;
        loop {
            let op = match self.peek() {
                Tok::Punct(Punct::Plus) => BinaryOp::Add,
                Tok::Punct(Punct::Minus) => BinaryOp::Sub,
                _ => return Ok(left),
            };
            self.bump();
            let right = self.product()?;
            left = Node::Binary(op, Box::new(left), Box::new(right));
        }
    }

    fn product(&mut self) -> Parsed {
        let mut left = self.unary()?;
        loop {
            let op = match self.peek() {
                Tok::Punct(Punct::Star) => BinaryOp::Mul,
                Tok::Punct(Punct::Div) => BinaryOp::Div,
                Tok::Punct(Punct::Mod) => BinaryOp::Mod,
                _ => return Ok(left),
            };
            self.bump();
            let right = self.unary()?;
            left = Node::Binary(op, Box::new(left), Box::new(right));
        }
    }

    fn unary(&mut self) -> Parsed {
        if self.punct(Punct::Minus) {
            return self.nested(|p| Ok(Node::Neg(Box::new(p.unary()?))));
        }
        let mut node = self.primary()?;
        loop {
            if self.punct(Punct::Dot) {
                let name = self.name()?;
                node = Node::Field(Box::new(node), name);
            } else if self.punct(Punct::LBracket) {
                let Tok::Int(i) = self.peek().clone() else {
                    return Err(self.unexpected("an array position"));
                };
                self.bump();
                self.expect(Punct::RBracket, "]")?;
                node = Node::Element(Box::new(node), i);
            } else {
                return Ok(node);
            }
        }
    }

    /// A field name after `.`: any word (reserved ones too) or a backticked name.
    fn name(&mut self) -> Result<String, Refusal> {
        match self.peek() {
            Tok::Ident(_) | Tok::Keyword(_) => {
                let raw = self.raw().to_string();
                self.bump();
                Ok(raw)
            }
            Tok::QuotedIdent(s) => {
                let s = s.clone();
                self.bump();
                Ok(s)
            }
            _ => Err(self.unexpected("a field name")),
        }
    }

    fn primary(&mut self) -> Parsed {
        let literal = match self.peek() {
            Tok::Str(s) => Some(Value::string(s.as_str())),
            Tok::Int(i) => Some(Value::Json((*i).into())),
            Tok::Float(f) => Some(float_value(*f)),
            _ => None,
        };
        if let Some(v) = literal {
            self.bump();
            return Ok(Node::Literal(v));
        }
        if let Tok::QuotedIdent(name) = self.peek() {
            let name = name.clone();
            self.bump();
            return Ok(Node::Body(name));
        }
        if self.punct(Punct::LParen) {
            let inner = self.or()?;
            self.expect(Punct::RParen, ")")?;
            return Ok(inner);
        }
        let Some(word) = self.word() else {
            return Err(self.unexpected("a value, a field or a function"));
        };
        let raw = self.raw().to_string();
        self.bump();
        match word.as_str() {
            "TRUE" => return Ok(Node::Literal(Value::TRUE)),
            "FALSE" => return Ok(Node::Literal(Value::FALSE)),
            "NULL" => return Ok(Node::Literal(Value::NULL)),
            "MISSING" => return Ok(Node::Literal(Value::Missing)),
            "EXISTS" => {
                self.expect(Punct::LParen, "( after EXISTS")?;
                let inner = self.or()?;
                self.expect(Punct::RParen, ")")?;
                return Ok(Node::Exists(Box::new(inner)));
            }
            "META" => return self.meta(),
            w if RESERVED.contains(&w) => {
                self.pos -= 1;
                return Err(self.unexpected("a value, a field or a function"));
            }
            _ => {}
        }
        if !self.punct(Punct::LParen) {
            return Ok(Node::Body(raw));
        }
        self.call(&word)
    }

    /// `META()` then `.id` or `.xattrs`: what XDCR's metadata offers.
    fn meta(&mut self) -> Parsed {
        self.expect(Punct::LParen, "( after META")?;
        self.expect(Punct::RParen, ") (META takes no argument)")?;
        self.expect(Punct::Dot, ".id or .xattrs after META()")?;
        match self.name()?.as_str() {
            "id" => Ok(Node::Key),
            "xattrs" => Ok(Node::Xattrs),
            other => Err(Refusal::Syntax(format!(
                "META() has id and xattrs, not {other:?}"
            ))),
        }
    }

    /// A function call, after its `(`.
    fn call(&mut self, name: &str) -> Parsed {
        self.nested(|p| {
            let mut args = Vec::new();
            if !p.punct(Punct::RParen) {
                loop {
                    if name == "REGEXP_CONTAINS" && args.len() == 1 {
                        let Tok::Str(pattern) = p.peek().clone() else {
                            return Err(p.unexpected("a string pattern"));
                        };
                        p.bump();
                        let re = regex(&pattern).map_err(|reason| {
                            Refusal::Pattern(FilterError::BadPattern { pattern, reason })
                        })?;
                        p.expect(Punct::RParen, ")")?;
                        let Some(subject) = args.pop() else {
                            unreachable!("one argument was parsed")
                        };
                        return Ok(Node::Regexp(Box::new(subject), re));
                    }
                    args.push(p.or()?);
                    if p.punct(Punct::RParen) {
                        break;
                    }
                    p.expect(Punct::Comma, ", or )")?;
                }
            }
            let arity = |n: usize| {
                if args.len() == n {
                    Ok(())
                } else {
                    Err(Refusal::Syntax(format!(
                        "{name}() takes {n} argument(s), not {}",
                        args.len()
                    )))
                }
            };
            match name {
                "REGEXP_CONTAINS" => Err(Refusal::Syntax(
                    "REGEXP_CONTAINS() takes an expression and a string pattern".into(),
                )),
                "DATE" => {
                    arity(1)?;
                    Ok(Node::Date(Box::new(args.remove(0))))
                }
                _ => match MathFn::lookup(name) {
                    Some((f, n)) => {
                        arity(n)?;
                        Ok(Node::Math(f, args))
                    }
                    None => Err(Refusal::Syntax(format!("unknown function {name}()"))),
                },
            }
        })
    }
}

/// One term, or the AND/OR of several (kept flat, so long chains add no depth).
fn chain(mut terms: Vec<Node>, join: fn(Vec<Node>) -> Node) -> Node {
    if terms.len() == 1 {
        terms.remove(0)
    } else {
        join(terms)
    }
}
