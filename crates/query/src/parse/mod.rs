//! The recursive-descent parser: the token cursor and Couchbase-style errors here, one file
//! per statement family, `expr`/`primary` for expressions.
//!
//! Errors are reported at the token where Couchbase's LALR(1) parser would report them: the
//! first token that cannot continue a valid statement. That is why, for instance, a
//! statement that starts with a name parses that name as an expression first (Couchbase's
//! grammar accepts a bare expression as input) and fails at the token after it.

mod ddl;
mod dml;
mod expr;
mod keyspace;
mod prepare;
mod primary;
mod select;

#[cfg(test)]
mod error_tests;
#[cfg(test)]
mod sdk_tests;
#[cfg(test)]
mod tests;

use crate::ast::{Expr, Ident, Statement};
use crate::error::{Position, QueryError, Result};
use crate::keywords;
use crate::lexer::{tokenize, Punct, Tok, Token};

/// The longest statement accepted, in bytes.
pub const MAX_STATEMENT_BYTES: usize = 1 << 20;
/// The deepest expression tree accepted: deeper input is a syntax error, so nothing that
/// walks a tree (evaluation, rendering, drop) can overflow the stack.
pub const MAX_NESTING: usize = 128;
/// How deep the parser itself may recurse. Rendering wraps each operator level in
/// parentheses, which costs two recursions per level when parsed back, so this is twice
/// the tree limit: every accepted tree's rendering is accepted too.
const MAX_RECURSION: usize = 2 * MAX_NESTING + 2;

/// Parses one statement (an optional trailing `;` allowed).
pub fn parse(statement: &str) -> Result<Statement> {
    let mut p = Parser::new(statement)?;
    let stmt = p.statement()?;
    while p.eat_punct(Punct::Semi) {}
    p.expect_eof()?;
    Ok(stmt)
}

/// Parses a bare expression, as Couchbase's `ParseExpression` does (index keys, tests).
pub fn parse_expression(text: &str) -> Result<Expr> {
    let mut p = Parser::new(text)?;
    let e = p.expr()?;
    p.expect_eof()?;
    Ok(e)
}

pub(crate) struct Parser<'a> {
    /// The statement, trimmed as Couchbase trims it before lexing (positions count from here).
    text: &'a str,
    tokens: Vec<Token>,
    pos: usize,
    /// How many `?` parameters were seen: the next one is `$(n+1)`.
    next_param: u32,
    /// Current expression recursion depth (parentheses, prefix operators, arguments...).
    depth: usize,
    /// Set while the next primary is the head of a projection term, where `expr.*` is legal.
    projection_head: bool,
}

impl<'a> Parser<'a> {
    fn new(input: &'a str) -> Result<Self> {
        if input.len() > MAX_STATEMENT_BYTES {
            return Err(QueryError::Syntax {
                message: format!(
                    "syntax error - statement longer than {MAX_STATEMENT_BYTES} bytes"
                ),
                position: None,
            });
        }
        let text = input.trim();
        let tokens = tokenize(text);
        // The cursor relies on this: it never moves past the final Eof.
        debug_assert!(matches!(tokens.last(), Some(Token { tok: Tok::Eof, .. })));
        Ok(Parser {
            text,
            tokens,
            pos: 0,
            next_param: 0,
            depth: 0,
            projection_head: false,
        })
    }

    // ---- cursor ----

    fn token(&self) -> &Token {
        let last = self.tokens.len().saturating_sub(1);
        // tokenize always ends with Eof, so the list is never empty.
        &self.tokens[self.pos.min(last)]
    }

    fn peek(&self) -> &Tok {
        &self.token().tok
    }

    fn peek_at(&self, n: usize) -> &Tok {
        let last = self.tokens.len().saturating_sub(1);
        &self.tokens[(self.pos + n).min(last)].tok
    }

    fn advance(&mut self) -> Token {
        let t = self.token().clone();
        if !matches!(t.tok, Tok::Eof | Tok::Error(_)) {
            self.pos += 1;
        }
        t
    }

    fn at_kw(&self, kw: &'static str) -> bool {
        debug_assert!(keywords::is_reserved(kw), "{kw} is not a reserved word");
        matches!(self.peek(), Tok::Keyword(k) if *k == kw)
    }

    fn eat_kw(&mut self, kw: &'static str) -> bool {
        let at = self.at_kw(kw);
        if at {
            self.advance();
        }
        at
    }

    fn expect_kw(&mut self, kw: &'static str) -> Result<()> {
        if self.eat_kw(kw) {
            Ok(())
        } else {
            Err(self.error_here())
        }
    }

    fn at_punct(&self, p: Punct) -> bool {
        matches!(self.peek(), Tok::Punct(q) if *q == p)
    }

    fn eat_punct(&mut self, p: Punct) -> bool {
        let at = self.at_punct(p);
        if at {
            self.advance();
        }
        at
    }

    fn expect_punct(&mut self, p: Punct) -> Result<()> {
        if self.eat_punct(p) {
            Ok(())
        } else {
            Err(self.error_here())
        }
    }

    fn expect_eof(&self) -> Result<()> {
        if matches!(self.peek(), Tok::Eof) {
            Ok(())
        } else {
            Err(self.error_here())
        }
    }

    /// An identifier where the grammar wants a name: plain, backticked, or one of the few
    /// reserved words Couchbase lets through (`TYPE`, `USER`, `DEFAULT`...).
    fn at_ident(&self) -> bool {
        self.ident_at(0).is_some()
    }

    fn ident_at(&self, n: usize) -> Option<Ident> {
        let t = &self.tokens[(self.pos + n).min(self.tokens.len().saturating_sub(1))];
        match &t.tok {
            Tok::Ident(s) | Tok::QuotedIdent(s) => Some(Ident::new(s.as_str())),
            // The identifier keeps the spelling the statement used.
            Tok::Keyword(k) if keywords::is_permitted_identifier(k) => {
                self.text.get(t.start..t.end).map(Ident::new)
            }
            _ => None,
        }
    }

    fn ident(&mut self) -> Result<Ident> {
        match self.ident_at(0) {
            Some(id) => {
                self.advance();
                Ok(id)
            }
            None => Err(self.error_here()),
        }
    }

    /// An identifier with the token it came from (for error positions).
    fn ident_with_token(&mut self) -> Result<(Ident, Token)> {
        let t = self.token().clone();
        let id = self.ident()?;
        Ok((id, t))
    }

    fn eat_ident(&mut self) -> Option<Ident> {
        let id = self.ident_at(0)?;
        self.advance();
        Some(id)
    }

    // ---- errors ----

    /// A syntax error at the current token, worded as Couchbase words it.
    fn error_here(&self) -> QueryError {
        match &self.token().tok {
            Tok::Error(what) => self.error_with(format!("syntax error: {what}")),
            _ => self.error_with("syntax error".to_owned()),
        }
    }

    /// `syntax error: <what>` at the current token, for limits this crate adds.
    fn limit_error(&self, what: &str) -> QueryError {
        self.error_with(format!("syntax error: {what}"))
    }

    fn error_with(&self, prefix: String) -> QueryError {
        let t = self.token();
        if matches!(t.tok, Tok::Eof) {
            return QueryError::Syntax {
                message: format!("{prefix} - at end of input"),
                position: None,
            };
        }
        self.error_at(prefix, t)
    }

    fn error_at(&self, prefix: String, t: &Token) -> QueryError {
        let raw = self.text.get(t.start..t.end).unwrap_or("");
        let position = Position {
            line: t.line + 1,
            column: t.column + 1,
        };
        let near = self.near(t);
        let mut message = if near.is_empty() {
            format!("{prefix} - {position}, at: {raw}")
        } else {
            format!("{prefix} - {position}, near '{near}', at: {raw}")
        };
        if matches!(t.tok, Tok::Keyword(_)) {
            message.push_str(" (reserved word)");
        }
        QueryError::Syntax {
            message,
            position: Some(position),
        }
    }

    /// Couchbase's `near '...'` context: the text before the token on its line, from the
    /// first non-blank character among the last 20, with `...` when that is not the start
    /// of the line.
    fn near(&self, t: &Token) -> String {
        let before = self.text.get(..t.start).unwrap_or("");
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let on_line = before.get(line_start..).unwrap_or("");
        let chars: Vec<(usize, char)> = on_line.char_indices().collect();
        let window = chars.get(chars.len().saturating_sub(20)..).unwrap_or(&[]);
        for &(i, c) in window {
            if !c.is_whitespace() {
                let s = line_start + i;
                let text = self.text.get(s..t.start).unwrap_or("");
                return if s == line_start {
                    text.to_owned()
                } else {
                    format!("...{text}")
                };
            }
        }
        String::new()
    }

    /// A rule Couchbase checks while parsing (`Invalid function ...`), reported with
    /// `(near line L, column C)` before the final full stop, as its `ErrorWithContext` does.
    fn fatal_at(&self, what: &str, t: &Token) -> QueryError {
        let position = Position {
            line: t.line + 1,
            column: t.column + 1,
        };
        let context = format!(" (near {position})");
        let message = match what.strip_suffix('.') {
            Some(body) => format!("{body}{context}."),
            None => format!("{what}{context}"),
        };
        QueryError::Syntax {
            message,
            position: Some(position),
        }
    }

    // ---- statements ----

    fn statement(&mut self) -> Result<Statement> {
        match self.peek() {
            Tok::Keyword("PREPARE") => return self.prepare(),
            Tok::Keyword("EXECUTE") => return self.execute(),
            _ => {}
        }
        if self.eat_kw("EXPLAIN") {
            return match self.keyword_statement()? {
                Some(stmt) => Ok(Statement::Explain(Box::new(stmt))),
                None => Err(self.error_here()),
            };
        }
        match self.keyword_statement()? {
            Some(stmt) => Ok(stmt),
            None => self.bare_expression(),
        }
    }

    /// The statement the current keyword starts, or None if it starts none.
    fn keyword_statement(&mut self) -> Result<Option<Statement>> {
        Ok(Some(match self.peek() {
            Tok::Keyword("SELECT") => Statement::Select(self.select()?),
            Tok::Keyword("INSERT" | "UPSERT") => Statement::Insert(self.insert()?),
            Tok::Keyword("UPDATE") => Statement::Update(self.update()?),
            Tok::Keyword("DELETE") => Statement::Delete(self.delete()?),
            Tok::Keyword("CREATE") => self.create_index()?,
            Tok::Keyword("DROP") => self.drop_index()?,
            Tok::Keyword("BUILD") => Statement::BuildIndex(self.build_index()?),
            _ => return Ok(None),
        }))
    }

    /// Couchbase's grammar also accepts a lone expression as input (for its expression
    /// parser), so text that starts like one fails only after it, and a complete one is
    /// `Invalid input.` rather than a syntax error.
    fn bare_expression(&mut self) -> Result<Statement> {
        self.expr()?;
        if matches!(self.peek(), Tok::Eof) {
            Err(QueryError::InvalidInput)
        } else {
            Err(self.error_here())
        }
    }
}
