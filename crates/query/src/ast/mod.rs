//! The typed syntax tree. Parsing normalizes spellings that mean the same thing (`==`/`=`,
//! `<>`/`!=`, `?`/`$n`, `@x`/`$x`, `VALUE`/`ELEMENT`/`RAW`, `SOME`/`ANY`,
//! `IS UNKNOWN`/`IS NOT VALUED`, string or identifier index names), so two statements with
//! the same meaning compare equal and rendering can pick one spelling.

mod expr;
mod ident;
mod stmt;
mod walk;
#[cfg(test)]
mod walk_tests;

pub use expr::{BinaryOp, Expr, IsTest, Literal, Param, Quantifier, UnaryOp, WhenThen};
pub use ident::{Ident, KeyspaceRef, Namespace};
pub use stmt::{
    BuildIndex, CreateIndex, CreatePrimaryIndex, Delete, DropIndex, DropPrimaryIndex, Execute,
    FromTerm, IndexKey, Insert, InsertVerb, KeyValue, NullsOrder, Prepare, Projection, ResultTerm,
    Select, SetTerm, SortTerm, Statement, Update,
};
