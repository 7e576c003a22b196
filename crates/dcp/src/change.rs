//! A change as streams see it, whether read from a checkpoint or from disk.

use bytes::Bytes;
use sluice_types::{DurabilityLevel, ItemMeta, Seqno};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Mutation,
    Deletion,
    /// A deletion caused by the document's expiry.
    Expiration,
    /// A SyncWrite's prepare (`meta.deleted` for a durable delete): sync-write consumers
    /// only.
    Prepare(DurabilityLevel),
    /// The commit of the prepare at `prepared`, carrying the committed version: a COMMIT to
    /// sync-write consumers, the mutation or deletion it made to the others.
    Commit {
        prepared: Seqno,
    },
    /// The abort of the prepare at `prepared`: sync-write consumers only.
    Abort {
        prepared: Seqno,
    },
}

impl ChangeKind {
    /// Whether a consumer that did not enable sync writes sees it.
    pub fn visible(self) -> bool {
        !matches!(self, ChangeKind::Prepare(_) | ChangeKind::Abort { .. })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub key: Bytes,
    /// Uncompressed unless the consumer negotiated Snappy (`meta.datatype` says which).
    pub value: Bytes,
    pub meta: ItemMeta,
    pub kind: ChangeKind,
}
