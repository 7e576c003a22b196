//! Keyspace references and aliases, shared by every statement.

use super::Parser;
use crate::ast::{Ident, KeyspaceRef, Namespace};
use crate::error::Result;
use crate::lexer::{Punct, Tok, Token};

impl Parser<'_> {
    /// A namespace prefix (`default:` or `system:`) if one starts here. `default` must be
    /// written in lower case (Couchbase looks namespaces up case-sensitively), `SYSTEM` is a
    /// keyword in any case.
    fn namespace_prefix(&mut self) -> Option<Namespace> {
        if !matches!(self.peek_at(1), Tok::Punct(Punct::Colon)) {
            return None;
        }
        let t = self.token();
        let ns = match &t.tok {
            Tok::Keyword("SYSTEM") => Namespace::System,
            Tok::Keyword("DEFAULT") if self.text.get(t.start..t.end) == Some("default") => {
                Namespace::Default
            }
            Tok::QuotedIdent(s) | Tok::Ident(s) if s == "default" => Namespace::Default,
            _ => return None,
        };
        self.advance();
        self.advance();
        Some(ns)
    }

    /// `[ns:]bucket`, `[ns:]bucket.scope.collection` or `scope.collection`.
    pub(super) fn keyspace_ref(&mut self) -> Result<KeyspaceRef> {
        let namespace = self.namespace_prefix();
        let first = self.keyspace_part()?;
        if !self.at_punct(Punct::Dot) {
            self.check_keyspace_name(&first.0, &first.1)?;
            return Ok(KeyspaceRef::Bucket {
                namespace,
                bucket: first.0,
            });
        }
        self.advance();
        let second = self.keyspace_part()?;
        if namespace.is_some() || self.at_punct(Punct::Dot) {
            self.expect_punct(Punct::Dot)?;
            let third = self.keyspace_part()?;
            self.check_keyspace_name(&third.0, &third.1)?;
            return Ok(KeyspaceRef::Collection {
                namespace,
                bucket: first.0,
                scope: second.0,
                collection: third.0,
            });
        }
        self.check_keyspace_name(&second.0, &second.1)?;
        Ok(KeyspaceRef::Relative {
            scope: first.0,
            collection: second.0,
        })
    }

    fn keyspace_part(&mut self) -> Result<(Ident, Token)> {
        self.ident_with_token()
    }

    /// Couchbase refuses a keyspace name that is empty or has surrounding blanks.
    fn check_keyspace_name(&self, name: &Ident, at: &Token) -> Result<()> {
        let s = name.as_str();
        if s.is_empty() || s.trim() != s {
            return Err(self.fatal_at(&format!("Invalid identifier '{s}'"), at));
        }
        Ok(())
    }

    /// `AS alias` or a bare alias, if one follows.
    pub(super) fn opt_alias(&mut self) -> Result<Option<Ident>> {
        if self.eat_kw("AS") {
            return self.ident().map(Some);
        }
        Ok(self.eat_ident())
    }

    /// `[(ns:)bucket.scope.collection.]name` as the older `DROP INDEX ks.name` writes it:
    /// returns the keyspace and the index name. Only `bucket.name` and
    /// `ns:bucket.scope.collection.name` are keyspace forms Couchbase accepts here.
    pub(super) fn dotted_index_name(&mut self) -> Result<(KeyspaceRef, Ident)> {
        if let Some(namespace) = self.namespace_prefix() {
            let bucket = self.ident()?;
            self.expect_punct(Punct::Dot)?;
            let scope = self.ident()?;
            self.expect_punct(Punct::Dot)?;
            let (collection, at) = self.keyspace_part()?;
            self.check_keyspace_name(&collection, &at)?;
            self.expect_punct(Punct::Dot)?;
            let name = self.ident()?;
            let keyspace = KeyspaceRef::Collection {
                namespace: Some(namespace),
                bucket,
                scope,
                collection,
            };
            return Ok((keyspace, name));
        }
        let (bucket, at) = self.keyspace_part()?;
        self.check_keyspace_name(&bucket, &at)?;
        self.expect_punct(Punct::Dot)?;
        let name = self.ident()?;
        Ok((
            KeyspaceRef::Bucket {
                namespace: None,
                bucket,
            },
            name,
        ))
    }
}
