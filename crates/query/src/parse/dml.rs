//! INSERT, UPSERT, UPDATE and DELETE.

use super::Parser;
use crate::ast::{Delete, Expr, Insert, InsertVerb, KeyValue, Projection, SetTerm, Update};
use crate::error::Result;
use crate::lexer::Punct;

impl Parser<'_> {
    /// `INSERT|UPSERT INTO ks [[AS] a] [([PRIMARY] KEY, VALUE)] VALUES (k, v) [, [VALUES] (k, v)]...`
    /// The `INSERT ... SELECT` form and the OPTIONS column are not supported.
    pub(super) fn insert(&mut self) -> Result<Insert> {
        let verb = if self.eat_kw("UPSERT") {
            InsertVerb::Upsert
        } else {
            self.expect_kw("INSERT")?;
            InsertVerb::Insert
        };
        self.expect_kw("INTO")?;
        let keyspace = self.keyspace_ref()?;
        let alias = self.opt_alias()?;
        if self.eat_punct(Punct::LParen) {
            self.eat_kw("PRIMARY");
            self.expect_kw("KEY")?;
            self.expect_punct(Punct::Comma)?;
            self.expect_kw("VALUE")?;
            self.expect_punct(Punct::RParen)?;
        }
        self.expect_kw("VALUES")?;
        let mut values = vec![self.key_value()?];
        while self.eat_punct(Punct::Comma) {
            self.eat_kw("VALUES");
            values.push(self.key_value()?);
        }
        let returning = self.opt_returning()?;
        Ok(Insert {
            verb,
            keyspace,
            alias,
            values,
            returning,
        })
    }

    fn key_value(&mut self) -> Result<KeyValue> {
        self.expect_punct(Punct::LParen)?;
        let key = self.expr()?;
        self.expect_punct(Punct::Comma)?;
        let value = self.expr()?;
        self.expect_punct(Punct::RParen)?;
        Ok(KeyValue { key, value })
    }

    fn opt_returning(&mut self) -> Result<Option<Projection>> {
        if self.eat_kw("RETURNING") {
            Ok(Some(self.projection(false)?))
        } else {
            Ok(None)
        }
    }

    /// `UPDATE ks [[AS] a] [USE KEYS e] [SET p = e, ...] [UNSET p, ...] [WHERE c] [LIMIT n]
    /// [RETURNING ...]`, at least one of SET and UNSET.
    pub(super) fn update(&mut self) -> Result<Update> {
        self.expect_kw("UPDATE")?;
        let keyspace = self.keyspace_ref()?;
        let alias = self.opt_alias()?;
        let use_keys = self.opt_use_keys()?;
        let mut set = Vec::new();
        let mut unset = Vec::new();
        if self.eat_kw("SET") {
            loop {
                let path = self.path()?;
                self.expect_punct(Punct::Eq)?;
                let value = self.expr()?;
                set.push(SetTerm { path, value });
                if !self.eat_punct(Punct::Comma) {
                    break;
                }
            }
            if self.eat_kw("UNSET") {
                unset = self.path_list()?;
            }
        } else {
            self.expect_kw("UNSET")?;
            unset = self.path_list()?;
        }
        let filter = self.opt_clause("WHERE")?;
        let limit = self.opt_clause("LIMIT")?;
        let returning = self.opt_returning()?;
        Ok(Update {
            keyspace,
            alias,
            use_keys,
            set,
            unset,
            filter,
            limit,
            returning,
        })
    }

    fn path_list(&mut self) -> Result<Vec<Expr>> {
        let mut out = vec![self.path()?];
        while self.eat_punct(Punct::Comma) {
            out.push(self.path()?);
        }
        Ok(out)
    }

    /// A mutation path: a name, then `.name`, `.[expr]` and `[expr]` steps.
    fn path(&mut self) -> Result<Expr> {
        let id = self.ident()?;
        let head = self.node(Expr::Ident(id), &[])?;
        Ok(self.steps(head, false)?.expr)
    }

    /// `DELETE FROM ks [[AS] a] [USE KEYS e] [WHERE c] [LIMIT n] [RETURNING ...]`
    pub(super) fn delete(&mut self) -> Result<Delete> {
        self.expect_kw("DELETE")?;
        self.expect_kw("FROM")?;
        let keyspace = self.keyspace_ref()?;
        let alias = self.opt_alias()?;
        let use_keys = self.opt_use_keys()?;
        let filter = self.opt_clause("WHERE")?;
        let limit = self.opt_clause("LIMIT")?;
        let returning = self.opt_returning()?;
        Ok(Delete {
            keyspace,
            alias,
            use_keys,
            filter,
            limit,
            returning,
        })
    }
}
