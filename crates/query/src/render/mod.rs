//! `Display` for the syntax tree: SQL++ text that parses back to the same tree.
//!
//! Every operator expression is parenthesized and every identifier backticked, so the
//! output never depends on precedence or on which words are reserved. Parsing normalizes
//! spellings (see [`crate::ast`]), so rendering then parsing is the identity on trees, and
//! parsing then rendering yields one canonical text per meaning.

mod expr;
mod stmt;

pub use expr::write_json_string;

#[cfg(test)]
mod tests;
