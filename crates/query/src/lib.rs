//! The SQL++ (N1QL) language core of Sluice's query service: text in, typed statements
//! out, and expressions and SELECTs evaluated over JSON the caller supplies. Pure: no I/O,
//! no async runtime, no storage; the planner is told which indexes exist, and an executor
//! sits on top.
//!
//! Layout, in the order a statement travels:
//! - `keywords`, `lexer/`: Couchbase's reserved words and tokens (`literals`: numbers,
//!   strings with JSON escapes, backticked identifiers, `$n`/`$name`/`?` parameters).
//! - `parse/`: the recursive-descent parser, one file per statement family (`select`,
//!   `dml`, `ddl`, `keyspace`), `expr` (operator precedence) and `primary`; errors worded as
//!   Couchbase words them. `ast/`: the typed tree it builds (`ident`: names and keyspaces,
//!   `expr`, `stmt`; `walk`: one level of a tree walk with the variables in scope).
//! - `render/`: `Display` for the tree, text that parses back to the same tree.
//! - `value`, `collate`: values with MISSING, the collation order, and the comparison and
//!   equality operators' MISSING/NULL rules.
//! - `functions/`: the function catalog (names, argument counts) and the scalar functions.
//! - `eval/`: expression evaluation (`ops` for the operators, `like` for patterns,
//!   `params` for what the caller binds).
//! - `index_key/`: secondary-index entries as order-preserving bytes, and their scan ranges.
//! - `pipeline/`: a SELECT over caller-supplied rows (formalize → filter → group → project →
//!   distinct → sort → offset/limit), with a memory bound on what it buffers.
//! - `planner/`: which index (or USE KEYS, or primary scan) feeds a SELECT, the byte spans
//!   to scan, and EXPLAIN; sans-IO, given the keyspace's indexes.
//! - `error`: the one error type, with Couchbase's error codes.
//! - `xdcr_filter/`: XDCR's filtering expressions, a small language of their own over the
//!   same lexer and value rules, compiled once per replication and evaluated per change.
//!
//! Why a hand-written parser: no maintained Rust crate parses this dialect. sqlparser-rs,
//! the obvious candidate, offers ANSI, MySQL, PostgreSQL, SQLite, Hive, Snowflake, BigQuery,
//! ClickHouse, DuckDB, Databricks, Redshift and MS SQL dialects, none of them N1QL: its
//! tree has no MISSING, no `ANY … SATISFIES … END`, no `USE KEYS`, no `META()`, no
//! `namespace:keyspace` paths, no `IS VALUED`, and its identifiers and keyword set differ
//! from Couchbase's (backticks with `` `` `` doubling and backslash escapes, ~240 reserved
//! words). Bending it would mean rewriting most of its AST and still not matching
//! Couchbase's error positions and messages, which clients see.
#![deny(unsafe_code)]

pub mod ast;
mod collate;
pub mod error;
pub mod eval;
pub mod functions;
pub mod index_key;
mod keywords;
mod lexer;
mod parse;
pub mod pipeline;
pub mod planner;
pub mod prepared;
mod render;
pub mod request;
mod value;
pub mod xdcr_filter;

/// The JSON types this crate's API speaks, re-exported so callers use the same version.
pub use serde_json;

pub use ast::Statement;
pub use collate::{collate, compare, equals, Tri};
pub use error::{Position, QueryError};
pub use eval::{evaluate, evaluate_keys, evaluate_row, DocMeta, Params, Row};
pub use parse::{parse, parse_expression, MAX_NESTING, MAX_STATEMENT_BYTES};
pub use pipeline::{run_select, Compiled, Flow, Limits, Pipeline};
pub use planner::{
    access_is_ordered, covering, explain, plan_access, Access, AccessPlanner, Cover, IndexInfo,
    KeyRange, ScanRange, Span,
};
pub use render::write_json_string;
pub use value::{Num, Type, Value};
