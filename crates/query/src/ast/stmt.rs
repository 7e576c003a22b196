//! Statements.

use super::{Expr, Ident, KeyspaceRef};

#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    Select(Select),
    /// `EXPLAIN stmt`; the parser never nests an EXPLAIN in another.
    Explain(Box<Statement>),
    Insert(Insert),
    Update(Update),
    Delete(Delete),
    CreateIndex(CreateIndex),
    CreatePrimaryIndex(CreatePrimaryIndex),
    DropIndex(DropIndex),
    DropPrimaryIndex(DropPrimaryIndex),
    BuildIndex(BuildIndex),
    /// `PREPARE`: the parser never nests a PREPARE or an EXECUTE in it.
    Prepare(Prepare),
    Execute(Execute),
}

/// `PREPARE [FORCE] [name (FROM | AS)] statement`.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepare {
    /// Prepare again even if the cache holds the statement.
    pub force: bool,
    /// The name to store it under; without one the service derives it from the text.
    pub name: Option<String>,
    pub statement: Box<Statement>,
}

/// `EXECUTE name [USING parameters]`: an array of positional or an object of named ones.
#[derive(Debug, Clone, PartialEq)]
pub struct Execute {
    pub name: String,
    pub using: Option<Expr>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Select {
    pub distinct: bool,
    pub projection: Projection,
    pub from: Option<FromTerm>,
    pub filter: Option<Expr>,
    pub group_by: Vec<Expr>,
    /// Only with a GROUP BY (the grammar has no HAVING without one).
    pub having: Option<Expr>,
    pub order_by: Vec<SortTerm>,
    pub limit: Option<Expr>,
    pub offset: Option<Expr>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Projection {
    Terms(Vec<ResultTerm>),
    /// `RAW expr` (also spelled `ELEMENT` or `VALUE`): each result is the bare value.
    Raw {
        expr: Expr,
        alias: Option<Ident>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultTerm {
    /// `*`: each row as `{alias: document}`.
    Star,
    /// `expr.*`: the fields of an object, merged into the result.
    ExprStar(Expr),
    Expr {
        expr: Expr,
        alias: Option<Ident>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FromTerm {
    pub keyspace: KeyspaceRef,
    pub alias: Option<Ident>,
    /// `USE [PRIMARY] KEYS expr`: a key or an array of keys.
    pub use_keys: Option<Expr>,
}

impl FromTerm {
    /// The name rows of this keyspace are bound to.
    pub fn alias(&self) -> &Ident {
        self.alias
            .as_ref()
            .unwrap_or_else(|| self.keyspace.default_alias())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NullsOrder {
    First,
    Last,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortTerm {
    pub expr: Expr,
    pub descending: bool,
    /// None: NULL and MISSING first when ascending, last when descending.
    pub nulls: Option<NullsOrder>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertVerb {
    Insert,
    Upsert,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub key: Expr,
    pub value: Expr,
}

/// `INSERT|UPSERT INTO keyspace [AS alias] [(KEY, VALUE)] VALUES (k, v), ... [RETURNING ..]`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insert {
    pub verb: InsertVerb,
    pub keyspace: KeyspaceRef,
    pub alias: Option<Ident>,
    pub values: Vec<KeyValue>,
    pub returning: Option<Projection>,
}

/// `path = value`; `path` is an identifier followed by field and element steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetTerm {
    pub path: Expr,
    pub value: Expr,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    pub keyspace: KeyspaceRef,
    pub alias: Option<Ident>,
    pub use_keys: Option<Expr>,
    pub set: Vec<SetTerm>,
    pub unset: Vec<Expr>,
    pub filter: Option<Expr>,
    pub limit: Option<Expr>,
    pub returning: Option<Projection>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delete {
    pub keyspace: KeyspaceRef,
    pub alias: Option<Ident>,
    pub use_keys: Option<Expr>,
    pub filter: Option<Expr>,
    pub limit: Option<Expr>,
    pub returning: Option<Projection>,
}

/// One key of a secondary index, with its `DESC` and `INCLUDE MISSING` attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexKey {
    pub expr: Expr,
    pub descending: bool,
    pub include_missing: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CreateIndex {
    pub name: Ident,
    pub if_not_exists: bool,
    pub keyspace: KeyspaceRef,
    pub keys: Vec<IndexKey>,
    pub filter: Option<Expr>,
    /// `USING GSI` was written (GSI is the only index type this crate accepts).
    pub using_gsi: bool,
    /// `WITH {..}`: Couchbase requires a constant, so it is kept as JSON.
    pub with: Option<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CreatePrimaryIndex {
    /// None: Couchbase names it `#primary`.
    pub name: Option<Ident>,
    pub if_not_exists: bool,
    pub keyspace: KeyspaceRef,
    pub using_gsi: bool,
    pub with: Option<serde_json::Value>,
}

/// `DROP INDEX name ON keyspace` and the older `DROP INDEX keyspace.name`, which names the
/// same thing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropIndex {
    pub name: Ident,
    pub if_exists: bool,
    pub keyspace: KeyspaceRef,
    pub using_gsi: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropPrimaryIndex {
    pub name: Option<Ident>,
    pub if_exists: bool,
    pub keyspace: KeyspaceRef,
    pub using_gsi: bool,
}

/// `BUILD INDEX ON keyspace(name, ...)`; names written as strings or identifiers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildIndex {
    pub keyspace: KeyspaceRef,
    pub names: Vec<Ident>,
    pub using_gsi: bool,
}
