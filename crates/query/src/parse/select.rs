//! SELECT and the projection (shared with RETURNING).

use super::Parser;
use crate::ast::{Expr, FromTerm, NullsOrder, Projection, ResultTerm, Select, SortTerm};
use crate::error::Result;
use crate::lexer::{Punct, Tok, Token};

impl Parser<'_> {
    pub(super) fn select(&mut self) -> Result<Select> {
        self.expect_kw("SELECT")?;
        let distinct = if self.eat_kw("DISTINCT") {
            true
        } else {
            self.eat_kw("ALL");
            false
        };
        let projection = self.projection(true)?;
        let from = if self.eat_kw("FROM") {
            Some(self.keyspace_term()?)
        } else {
            None
        };
        let filter = self.opt_clause("WHERE")?;
        let mut group_by = Vec::new();
        let mut having = None;
        if self.eat_kw("GROUP") {
            self.expect_kw("BY")?;
            group_by = self.expr_list()?;
            having = self.opt_clause("HAVING")?;
        }
        let mut order_by = Vec::new();
        if self.eat_kw("ORDER") {
            self.expect_kw("BY")?;
            loop {
                order_by.push(self.sort_term()?);
                if !self.eat_punct(Punct::Comma) {
                    break;
                }
            }
        }
        // Either order is accepted; OFFSET applies first either way.
        let (mut limit, mut offset) = (None, None);
        if self.eat_kw("LIMIT") {
            limit = Some(self.expr()?);
            offset = self.opt_clause("OFFSET")?;
        } else if self.eat_kw("OFFSET") {
            offset = Some(self.expr()?);
            limit = self.opt_clause("LIMIT")?;
        }
        Ok(Select {
            distinct,
            projection,
            from,
            filter,
            group_by,
            having,
            order_by,
            limit,
            offset,
        })
    }

    pub(super) fn opt_clause(&mut self, kw: &'static str) -> Result<Option<Expr>> {
        if self.eat_kw(kw) {
            Ok(Some(self.expr()?))
        } else {
            Ok(None)
        }
    }

    pub(super) fn expr_list(&mut self) -> Result<Vec<Expr>> {
        let mut out = vec![self.expr()?];
        while self.eat_punct(Punct::Comma) {
            out.push(self.expr()?);
        }
        Ok(out)
    }

    /// `RAW|ELEMENT|VALUE expr [[AS] alias]` or result terms. RETURNING takes no alias after
    /// RAW (`allow_raw_alias` false).
    pub(super) fn projection(&mut self, allow_raw_alias: bool) -> Result<Projection> {
        if matches!(self.peek(), Tok::Keyword("RAW" | "ELEMENT" | "VALUE")) {
            self.advance();
            let expr = self.expr()?;
            let alias = if allow_raw_alias {
                self.opt_alias()?
            } else {
                None
            };
            return Ok(Projection::Raw { expr, alias });
        }
        let mut terms = Vec::new();
        // The token that names each term, for duplicate-alias errors.
        let mut names: Vec<(String, Token)> = Vec::new();
        let mut unnamed = 0usize;
        loop {
            let start = self.token().clone();
            if self.eat_punct(Punct::Star) {
                terms.push(ResultTerm::Star);
            } else {
                self.projection_head = true;
                let expr = self.expr();
                self.projection_head = false;
                let expr = expr?;
                if self.at_punct(Punct::Dot) && matches!(self.peek_at(1), Tok::Punct(Punct::Star)) {
                    self.advance();
                    self.advance();
                    terms.push(ResultTerm::ExprStar(expr));
                } else {
                    let alias_token = self.alias_token();
                    let alias = self.opt_alias()?;
                    let name = match (&alias, expr.implicit_name()) {
                        (Some(a), _) => (a.as_str().to_owned(), alias_token.unwrap_or(start)),
                        (None, Some(n)) => (n.to_owned(), self.last_name_token(&start)),
                        (None, None) => {
                            unnamed += 1;
                            (format!("${unnamed}"), start)
                        }
                    };
                    if names.iter().any(|(n, _)| *n == name.0) {
                        let what = format!("Duplicate result alias '{}'.", name.0);
                        return Err(self.fatal_at(&what, &name.1));
                    }
                    names.push(name);
                    terms.push(ResultTerm::Expr { expr, alias });
                }
            }
            if !self.eat_punct(Punct::Comma) {
                return Ok(Projection::Terms(terms));
            }
        }
    }

    /// The token an alias will come from, if one follows.
    fn alias_token(&self) -> Option<Token> {
        let at = if self.at_kw("AS") {
            self.pos + 1
        } else {
            self.pos
        };
        self.tokens.get(at).cloned()
    }

    /// The last token of the term just parsed (its field name), for error positions.
    fn last_name_token(&self, fallback: &Token) -> Token {
        self.pos
            .checked_sub(1)
            .and_then(|i| self.tokens.get(i))
            .cloned()
            .unwrap_or_else(|| fallback.clone())
    }

    fn keyspace_term(&mut self) -> Result<FromTerm> {
        let keyspace = self.keyspace_ref()?;
        let alias = self.opt_alias()?;
        let use_keys = self.opt_use_keys()?;
        Ok(FromTerm {
            keyspace,
            alias,
            use_keys,
        })
    }

    /// `USE [PRIMARY] KEYS expr`.
    pub(super) fn opt_use_keys(&mut self) -> Result<Option<Expr>> {
        if !self.eat_kw("USE") {
            return Ok(None);
        }
        self.eat_kw("PRIMARY");
        self.expect_kw("KEYS")?;
        Ok(Some(self.expr()?))
    }

    fn sort_term(&mut self) -> Result<SortTerm> {
        let expr = self.expr()?;
        let descending = if self.eat_kw("DESC") {
            true
        } else {
            self.eat_kw("ASC");
            false
        };
        let nulls = if self.eat_kw("NULLS") {
            if self.eat_kw("FIRST") {
                Some(NullsOrder::First)
            } else {
                self.expect_kw("LAST")?;
                Some(NullsOrder::Last)
            }
        } else {
            None
        };
        Ok(SortTerm {
            expr,
            descending,
            nulls,
        })
    }
}
