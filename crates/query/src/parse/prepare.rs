//! Prepared statements: `PREPARE [FORCE] [name (FROM | AS)] statement` and
//! `EXECUTE name [USING parameters]`. A name is an identifier (backticks for one with
//! hyphens, as the SDKs' UUIDs have) or a string.

use super::Parser;
use crate::ast::{Execute, Prepare, Statement};
use crate::error::Result;
use crate::lexer::Tok;

impl Parser<'_> {
    pub(super) fn prepare(&mut self) -> Result<Statement> {
        self.expect_kw("PREPARE")?;
        let force = self.eat_kw("FORCE");
        let named = matches!(self.peek_at(1), Tok::Keyword("FROM" | "AS"))
            && (self.at_ident() || matches!(self.peek(), Tok::Str(_)));
        let name = match named {
            true => {
                let name = self.prepared_name()?;
                self.advance(); // FROM or AS
                Some(name)
            }
            false => None,
        };
        let statement = match self.peek() {
            Tok::Keyword("EXPLAIN") => self.statement()?,
            _ => match self.keyword_statement()? {
                Some(s) => s,
                None => return Err(self.error_here()),
            },
        };
        Ok(Statement::Prepare(Prepare {
            force,
            name,
            statement: Box::new(statement),
        }))
    }

    pub(super) fn execute(&mut self) -> Result<Statement> {
        self.expect_kw("EXECUTE")?;
        let name = self.prepared_name()?;
        let using = match self.eat_kw("USING") {
            true => Some(self.expr()?),
            false => None,
        };
        Ok(Statement::Execute(Execute { name, using }))
    }

    fn prepared_name(&mut self) -> Result<String> {
        if let Tok::Str(s) = self.peek() {
            let s = s.clone();
            self.advance();
            return Ok(s);
        }
        Ok(self.ident()?.as_str().to_owned())
    }
}
