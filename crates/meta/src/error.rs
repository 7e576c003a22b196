//! Errors of the meta layer. They are plain data (serde), because a request forwarded to the
//! leader brings its error back over HTTP.

use serde::{Deserialize, Serialize};
use sluice_cluster::NodeId;

/// The durable store of the log, the vote and the snapshot failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum StoreError {
    #[error("metadata store I/O failed: {0}")]
    Io(String),
    /// A write failed earlier. Its journal entry may be half written, and a failed fsync is
    /// never retried (the kernel may have dropped the dirty pages), so no write is accepted
    /// until the process restarts and fjall recovers the journal.
    #[error("the metadata store refuses writes after a failed one: {0}")]
    Poisoned(String),
    #[error("{what} in the metadata store cannot be read: {reason}")]
    Corrupt { what: String, reason: String },
    /// The directory was created by another node: starting on it would make this node
    /// answer votes with someone else's history.
    #[error("the metadata directory belongs to node {found}, not {expected}")]
    WrongNode { found: NodeId, expected: NodeId },
    #[error("the metadata store was still open {waited_ms} ms after shutdown")]
    StillOpen { waited_ms: u64 },
}

impl StoreError {
    pub(crate) fn io(e: impl std::fmt::Display) -> StoreError {
        StoreError::Io(e.to_string())
    }

    pub(crate) fn corrupt(what: impl Into<String>, reason: impl std::fmt::Display) -> StoreError {
        StoreError::Corrupt {
            what: what.into(),
            reason: reason.to_string(),
        }
    }
}

/// Why a meta operation did not complete.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum MetaError {
    /// No leader with a quorum answered in time: no leader could be found or reached, or it
    /// could not reach a majority of the voters. The outcome is unknown: the request may
    /// still be committed later, so retrying must be safe (`SetMap` and friends carry the
    /// revision they expect for this reason).
    #[error("no quorum answered within {waited_ms} ms; the request may still be applied")]
    Timeout { waited_ms: u64 },
    #[error("the meta node is shut down")]
    Shutdown,
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Raft stopped on an unrecoverable error (usually a storage failure). Boxed: it is
    /// large, and every `Result` of this crate would carry its size.
    #[error("raft stopped: {0}")]
    Fatal(Box<openraft::error::Fatal<u64>>),
    #[error("membership change refused: {0}")]
    Membership(openraft::error::ChangeMembershipError<u64>),
    /// `start` was given timing openraft refuses (e.g. an election timeout not above the
    /// heartbeat).
    #[error("raft configuration refused: {reason}")]
    Config { reason: String },
    #[error("{addr} is not a host:port address")]
    BadAddress { addr: String },
    /// Removing this node would leave no voter.
    #[error("{node} is the last voter and cannot be removed")]
    LastVoter { node: NodeId },
    /// The leader (or this node's own Raft) answered something this version cannot read.
    #[error("unexpected answer from {peer}: {reason}")]
    BadReply { peer: String, reason: String },
}

impl MetaError {
    pub(crate) fn from_fatal(f: openraft::error::Fatal<u64>) -> MetaError {
        match f {
            openraft::error::Fatal::Stopped => MetaError::Shutdown,
            other => MetaError::Fatal(Box::new(other)),
        }
    }
}
