//! A change as streams see it, whether read from a checkpoint or from disk.

use bytes::Bytes;
use sluice_types::ItemMeta;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Mutation,
    Deletion,
    /// A deletion caused by the document's expiry.
    Expiration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub key: Bytes,
    /// Uncompressed unless the consumer negotiated Snappy (`meta.datatype` says which).
    pub value: Bytes,
    pub meta: ItemMeta,
    pub kind: ChangeKind,
}
