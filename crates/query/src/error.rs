//! The one error type of the crate, with the numeric codes Couchbase's query service answers
//! (`errors/codes.go` in couchbase/query), so a future HTTP layer can pass them on unchanged.

use std::fmt;

/// Where in the statement text an error was found: 1-based line and column, the column
/// counted in characters as Couchbase counts it (after the statement is trimmed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub line: u32,
    pub column: u32,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// The clause a misplaced aggregate was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clause {
    Where,
    GroupBy,
}

impl fmt::Display for Clause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Clause::Where => "WHERE",
            Clause::GroupBy => "GROUP BY",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// The statement does not parse, or breaks a rule Couchbase checks while parsing
    /// (unknown function, wrong argument count, duplicate result alias). `message` is the
    /// whole text Couchbase would answer, e.g.
    /// `syntax error - line 1, column 8, near 'SELECT ', at: FROM (reserved word)`.
    #[error("{message}")]
    Syntax {
        message: String,
        position: Option<Position>,
    },
    /// The input was a bare expression, not a statement (Couchbase's `Invalid input.`).
    #[error("Invalid input.")]
    InvalidInput,
    #[error("Aggregates not allowed in {clause}.")]
    AggregateNotAllowed { clause: Clause },
    #[error("Expression {expr} must depend only on group keys or aggregates.")]
    NotGroupKeyOrAggregate { expr: String },
    #[error("No value for named parameter ${name}.")]
    UnboundNamedParameter { name: String },
    #[error("No value for positional parameter ${position}.")]
    UnboundPositionalParameter { position: u32 },
    /// An expression could not be evaluated (not a MISSING/NULL result: a real error).
    #[error("{message}")]
    Evaluation { message: String },
    /// LIMIT or OFFSET did not evaluate to a whole number.
    #[error("Invalid {clause} value {value}")]
    InvalidValue { clause: &'static str, value: String },
    /// The rows buffered for ORDER BY, GROUP BY or DISTINCT outgrew the caller's budget.
    #[error("Request has exceeded memory quota (inuse: {in_use} limit: {limit})")]
    MemoryQuotaExceeded { in_use: usize, limit: usize },
    /// The planner found no online index that can answer the statement without missing
    /// documents. `keyspace` is the FROM keyspace as the crate renders it (backticked).
    #[error(
        "No index available on keyspace {keyspace} that matches your query. Use CREATE \
         PRIMARY INDEX ON {keyspace} to create a primary index, or check that your expected \
         index is online."
    )]
    NoIndexAvailable { keyspace: String },
}

impl QueryError {
    /// Couchbase's error code for this error.
    pub fn code(&self) -> u32 {
        match self {
            QueryError::Syntax { .. } => 3000,
            QueryError::InvalidInput => 3083,
            QueryError::AggregateNotAllowed { .. } | QueryError::NoIndexAvailable { .. } => 4000,
            QueryError::NotGroupKeyOrAggregate { .. } => 4210,
            QueryError::UnboundNamedParameter { .. }
            | QueryError::UnboundPositionalParameter { .. }
            | QueryError::Evaluation { .. } => 5010,
            QueryError::InvalidValue { .. } => 5030,
            QueryError::MemoryQuotaExceeded { .. } => 5500,
        }
    }

    /// The position of a syntax error, if it has one.
    pub fn position(&self) -> Option<Position> {
        match self {
            QueryError::Syntax { position, .. } => *position,
            _ => None,
        }
    }

    pub(crate) fn evaluation(message: impl Into<String>) -> Self {
        QueryError::Evaluation {
            message: message.into(),
        }
    }
}

pub type Result<T, E = QueryError> = std::result::Result<T, E>;
