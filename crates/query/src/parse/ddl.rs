//! Index DDL: CREATE [PRIMARY] INDEX, DROP [PRIMARY] INDEX, BUILD INDEX. Only GSI indexes:
//! `USING VIEW|FTS`, `PARTITION BY`, `INCLUDE (...)` and vector indexes fail at their
//! first token.

use super::Parser;
use crate::ast::{
    BuildIndex, CreateIndex, CreatePrimaryIndex, DropIndex, DropPrimaryIndex, Expr, Ident,
    IndexKey, Literal, Statement, UnaryOp,
};
use crate::error::Result;
use crate::lexer::{Punct, Tok};

impl Parser<'_> {
    /// `IF NOT EXISTS`, if it comes next.
    fn if_not_exists(&mut self) -> Result<bool> {
        if self.eat_kw("IF") {
            self.expect_kw("NOT")?;
            self.expect_kw("EXISTS")?;
            return Ok(true);
        }
        Ok(false)
    }

    fn if_exists(&mut self) -> Result<bool> {
        if self.eat_kw("IF") {
            self.expect_kw("EXISTS")?;
            return Ok(true);
        }
        Ok(false)
    }

    fn using_gsi(&mut self) -> Result<bool> {
        if self.eat_kw("USING") {
            self.expect_kw("GSI")?;
            return Ok(true);
        }
        Ok(false)
    }

    /// `WITH expr`, which Couchbase requires to be a constant; kept as JSON.
    fn with_clause(&mut self) -> Result<Option<serde_json::Value>> {
        if !self.eat_kw("WITH") {
            return Ok(None);
        }
        let at = self.token().clone();
        let expr = self.expr()?;
        match constant_json(&expr) {
            Some(v) => Ok(Some(v)),
            None => Err(self.fatal_at("WITH value must be static", &at)),
        }
    }

    /// `[name] [IF NOT EXISTS]` or `IF NOT EXISTS name` before `ON`, for both CREATE forms.
    fn create_name(&mut self, optional: bool) -> Result<(Option<Ident>, bool)> {
        if self.if_not_exists()? {
            let name = if optional && self.at_kw("ON") {
                None
            } else {
                Some(self.ident()?)
            };
            return Ok((name, true));
        }
        let name = if optional && self.at_kw("ON") {
            None
        } else {
            Some(self.ident()?)
        };
        let if_not_exists = self.if_not_exists()?;
        Ok((name, if_not_exists))
    }

    pub(super) fn create_index(&mut self) -> Result<Statement> {
        self.expect_kw("CREATE")?;
        if self.eat_kw("PRIMARY") {
            self.expect_kw("INDEX")?;
            let (name, if_not_exists) = self.create_name(true)?;
            self.expect_kw("ON")?;
            let keyspace = self.keyspace_ref()?;
            let using_gsi = self.using_gsi()?;
            let with = self.with_clause()?;
            return Ok(Statement::CreatePrimaryIndex(CreatePrimaryIndex {
                name,
                if_not_exists,
                keyspace,
                using_gsi,
                with,
            }));
        }
        self.expect_kw("INDEX")?;
        let (name, if_not_exists) = self.create_name(false)?;
        let Some(name) = name else {
            return Err(self.error_here());
        };
        self.expect_kw("ON")?;
        let keyspace = self.keyspace_ref()?;
        self.expect_punct(Punct::LParen)?;
        let mut keys = vec![self.index_key()?];
        while self.eat_punct(Punct::Comma) {
            keys.push(self.index_key()?);
        }
        self.expect_punct(Punct::RParen)?;
        let filter = self.opt_clause("WHERE")?;
        let using_gsi = self.using_gsi()?;
        let with = self.with_clause()?;
        Ok(Statement::CreateIndex(CreateIndex {
            name,
            if_not_exists,
            keyspace,
            keys,
            filter,
            using_gsi,
            with,
        }))
    }

    /// An index key with up to two attributes: `ASC|DESC` and `INCLUDE MISSING`.
    fn index_key(&mut self) -> Result<IndexKey> {
        let expr = self.expr()?;
        let (mut order, mut include_missing) = (None, false);
        for _ in 0..2 {
            if matches!(self.peek(), Tok::Keyword("ASC" | "DESC")) && order.is_none() {
                order = Some(self.at_kw("DESC"));
                self.advance();
            } else if self.at_kw("INCLUDE") && !include_missing {
                self.advance();
                self.expect_kw("MISSING")?;
                include_missing = true;
            } else if matches!(self.peek(), Tok::Keyword("ASC" | "DESC" | "INCLUDE")) {
                return Err(self.fatal_at(
                    "Duplicate or Invalid index key attribute",
                    &self.token().clone(),
                ));
            }
        }
        Ok(IndexKey {
            expr,
            descending: order.unwrap_or(false),
            include_missing,
        })
    }

    pub(super) fn drop_index(&mut self) -> Result<Statement> {
        self.expect_kw("DROP")?;
        if self.eat_kw("PRIMARY") {
            self.expect_kw("INDEX")?;
            let (name, if_exists) = if self.if_exists()? {
                (
                    if self.at_kw("ON") {
                        None
                    } else {
                        Some(self.ident()?)
                    },
                    true,
                )
            } else {
                let name = if self.at_kw("ON") {
                    None
                } else {
                    Some(self.ident()?)
                };
                (name, self.if_exists()?)
            };
            self.expect_kw("ON")?;
            let keyspace = self.keyspace_ref()?;
            let using_gsi = self.using_gsi()?;
            return Ok(Statement::DropPrimaryIndex(DropPrimaryIndex {
                name,
                if_exists,
                keyspace,
                using_gsi,
            }));
        }
        self.expect_kw("INDEX")?;
        let leading_if_exists = self.if_exists()?;
        // `name ON ks` or the dotted `ks.name`: a namespace or a dot after the first name
        // means the dotted form.
        let dotted = matches!(self.peek_at(1), Tok::Punct(Punct::Dot | Punct::Colon));
        let (keyspace, name, if_exists) = if dotted {
            let (keyspace, name) = self.dotted_index_name()?;
            let trailing = !leading_if_exists && self.if_exists()?;
            (keyspace, name, leading_if_exists || trailing)
        } else {
            let name = self.ident()?;
            let trailing = !leading_if_exists && self.if_exists()?;
            self.expect_kw("ON")?;
            (self.keyspace_ref()?, name, leading_if_exists || trailing)
        };
        let using_gsi = self.using_gsi()?;
        Ok(Statement::DropIndex(DropIndex {
            name,
            if_exists,
            keyspace,
            using_gsi,
        }))
    }

    /// `BUILD INDEX ON ks(name, ...) [USING GSI]`; names as identifiers or strings.
    pub(super) fn build_index(&mut self) -> Result<BuildIndex> {
        self.expect_kw("BUILD")?;
        self.expect_kw("INDEX")?;
        self.expect_kw("ON")?;
        let keyspace = self.keyspace_ref()?;
        self.expect_punct(Punct::LParen)?;
        let mut names = Vec::new();
        loop {
            match self.peek().clone() {
                Tok::Str(s) => {
                    self.advance();
                    names.push(Ident::new(s));
                }
                _ => names.push(self.ident()?),
            }
            if !self.eat_punct(Punct::Comma) {
                break;
            }
        }
        self.expect_punct(Punct::RParen)?;
        let using_gsi = self.using_gsi()?;
        Ok(BuildIndex {
            keyspace,
            names,
            using_gsi,
        })
    }
}

/// The JSON value of a constant expression: literals (not MISSING), arrays and objects of
/// constants with string keys, and negated numbers.
pub(crate) fn constant_json(expr: &Expr) -> Option<serde_json::Value> {
    use serde_json::Value as J;
    Some(match expr {
        Expr::Literal(Literal::Null) => J::Null,
        Expr::Literal(Literal::Bool(b)) => J::Bool(*b),
        Expr::Literal(Literal::Number(n)) => J::Number(n.clone()),
        Expr::Literal(Literal::String(s)) => J::String(s.clone()),
        Expr::Array(items) => J::Array(items.iter().map(constant_json).collect::<Option<_>>()?),
        Expr::Object(pairs) => {
            let mut map = serde_json::Map::new();
            for (k, v) in pairs {
                let Expr::Literal(Literal::String(k)) = k else {
                    return None;
                };
                map.insert(k.clone(), constant_json(v)?);
            }
            J::Object(map)
        }
        Expr::Unary {
            op: UnaryOp::Neg,
            operand,
        } => match constant_json(operand)? {
            J::Number(n) => J::Number(negate(&n)?),
            _ => return None,
        },
        _ => return None,
    })
}

fn negate(n: &serde_json::Number) -> Option<serde_json::Number> {
    if let Some(i) = n.as_i64() {
        if let Some(neg) = i.checked_neg() {
            return Some(neg.into());
        }
    }
    serde_json::Number::from_f64(-n.as_f64()?)
}
