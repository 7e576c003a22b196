//! What a statement can fail with, each with the code Couchbase's query service answers
//! (`errors/codes.go` in couchbase/query) so the SDKs map it to the same exception.

use sluice_index::IndexError;
use sluice_query::prepared::PreparedError;
use sluice_query::request::RequestError;
use sluice_query::QueryError;

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error(transparent)]
    Query(#[from] QueryError),
    #[error(transparent)]
    Prepared(#[from] PreparedError),
    #[error("Keyspace not found in CB datastore: {0}")]
    KeyspaceNotFound(String),
    #[error("The index {0} already exists.")]
    IndexExists(String),
    #[error("GSI index {0} not found.")]
    IndexNotFound(String),
    #[error(
        "User does not have credentials to run {what} queries on {keyspace}. Add role \
         {role} on {keyspace} to allow the statement to run."
    )]
    NotAllowed {
        what: &'static str,
        keyspace: String,
        role: &'static str,
    },
    #[error("Timeout {0} exceeded")]
    Timeout(String),
    #[error(
        "Index scan timed out waiting for index {0} to catch up with the requested consistency"
    )]
    ScanWait(String),
    /// The cluster's seqnos could not be read before the deadline (a member down and not
    /// failed over yet): the consistency wait timed out before it could start.
    #[error(
        "Index scan timed out reading the cluster's seqnos for the requested consistency: {0}"
    )]
    Seqnos(#[from] crate::index_service::seqnos::SeqnoError),
    /// What Sluice's query service does not do (yet); the message says what.
    #[error("{0}")]
    NotSupported(String),
    #[error("The statement is not readonly and the request is: {0}")]
    NotReadonly(&'static str),
    #[error("Index service error: {0}")]
    Index(#[from] IndexError),
    /// No copy of the index could be scanned: each holder was down, unreachable, or had not
    /// built its copy yet.
    #[error("Index service error: no copy of index {index} answered ({why})")]
    NoCopy { index: String, why: String },
    #[error("Index catalog error: {0}")]
    Catalog(crate::index_service::catalog::CatalogError),
    #[error("Error fetching documents through KV: {0}")]
    Fetch(String),
    #[error("DML error on key {key}: {why}")]
    Dml { key: String, why: String },
    /// `WITH {"nodes": [...]}` names no set of nodes the index can go on.
    #[error("Index nodes: {0}")]
    IndexNodes(String),
    /// This node does not run the query service (`--services`): Couchbase's node would not
    /// have the query port open. Clients find the query nodes as `n1ql` in `nodesExt`.
    #[error(
        "The query service does not run on this node (it runs {0}): send the statement to a \
         node that lists n1ql in the cluster map"
    )]
    NotQueryNode(sluice_cluster::Services),
    /// The client closed the connection while results were streaming.
    #[error("Request cancelled: the client went away")]
    Cancelled,
}

impl ServiceError {
    pub fn code(&self) -> u32 {
        match self {
            ServiceError::Request(e) => e.code(),
            ServiceError::Query(e) => e.code(),
            ServiceError::Prepared(e) => e.code(),
            ServiceError::KeyspaceNotFound(_) => 12003,
            ServiceError::IndexExists(_) => 4300,
            ServiceError::IndexNotFound(_) => 12004,
            ServiceError::NotAllowed { .. } => 13014,
            ServiceError::Timeout(_) => 1080,
            ServiceError::ScanWait(_) | ServiceError::Seqnos(_) => 12015,
            ServiceError::NotSupported(_) => 1020,
            ServiceError::NotReadonly(_) => 1000,
            ServiceError::Index(_) | ServiceError::Catalog(_) | ServiceError::NoCopy { .. } => {
                12000
            }
            ServiceError::Fetch(_) => 12008,
            ServiceError::Dml { .. } => 12009,
            ServiceError::Cancelled => 1081,
            ServiceError::NotQueryNode(_) | ServiceError::IndexNodes(_) => 5000,
        }
    }

    /// The HTTP status Couchbase answers with this error.
    pub fn http_status(&self) -> u16 {
        if let ServiceError::NotQueryNode(_) = self {
            return 503;
        }
        match self.code() {
            1080 | 12015 => 500,
            1000..=1999 | 3000..=4999 => 400,
            13014 => 401,
            12003 | 12004 => 404,
            _ => 500,
        }
    }
}
