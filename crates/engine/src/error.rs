//! Engine errors: operating conditions a client is told about, never bugs.

use sluice_types::Seqno;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    #[error("vbucket is not active on this node")]
    NotMyVbucket,
    #[error("key not found")]
    KeyNotFound,
    #[error("key exists or CAS mismatch")]
    KeyExists,
    #[error("not stored")]
    NotStored,
    #[error("existing value is not a number")]
    DeltaBadValue,
    #[error("value too large")]
    TooBig,
    #[error("invalid argument: {0}")]
    Invalid(&'static str),
    /// A value's xattr section does not decode (XATTR_EINVAL on the wire).
    #[error("invalid xattr section: {0}")]
    XattrInvalid(&'static str),
    #[error("temporarily out of memory")]
    TempFail,
    #[error("bucket refuses writes after a storage failure: {0}")]
    WritesRefused(String),
    /// The value was evicted; the caller fetches it with [`crate::Bucket::fetch`] outside
    /// any lock and retries.
    #[error("value must be read from disk first")]
    NeedsFetch,
    #[error("storage error: {0}")]
    Storage(String),
    #[error("unknown vbucket uuid")]
    UnknownUuid,
    #[error("replica change at seqno {got} does not follow the high seqno {high}")]
    SeqnoNotIncreasing { got: Seqno, high: Seqno },
    #[error("seqno {0} is not yet persisted")]
    NotPersisted(Seqno),
    /// The document is locked (GET_LOCKED) and the request does not carry the lock's CAS.
    #[error("the document is locked")]
    Locked,
    /// UNLOCK_KEY of a document that is not locked.
    #[error("the document is not locked")]
    NotLocked,
    /// The key has a SyncWrite pending: no other write may touch it until it completes.
    #[error("a durable write of the key is in progress")]
    SyncWriteInProgress,
    /// The key has a prepare this active inherited (promotion, warmup): neither its old value
    /// nor a new write may be served until the prepare is re-committed.
    #[error("a durable write of the key is being re-committed")]
    SyncWriteReCommitInProgress,
    /// A commit or abort names a prepare that is not pending (the durability monitor and
    /// the vbucket disagree, or the vbucket was reset meanwhile).
    #[error("no pending prepare at seqno {0}")]
    NoSuchPrepare(Seqno),
    /// A replica's change contradicts its pending prepares: the stream must restart.
    #[error(transparent)]
    Pending(#[from] crate::prepares::PendingError),
}
