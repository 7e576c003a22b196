//! Messages a DCP producer sends to its consumer (magic 0x80 requests with the stream's
//! opaque and vbucket in the header): their encoding, decoding and flow-control size.

use super::end_reason::StreamEndReason;
use super::flags::SnapshotFlags;
use bytes::Bytes;
use sluice_types::{Cas, Datatype, Seqno, VbState};

/// A snapshot's bounds: every seqno sent until the next marker lies in `start..=end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotMarker {
    pub start: Seqno,
    pub end: Seqno,
    pub flags: SnapshotFlags,
}

/// A document version as a stream carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DcpDocument {
    pub key: Bytes,
    /// Empty with the NoValue open flag, and for deletions without xattrs.
    pub value: Bytes,
    /// Describes `value` as sent.
    pub datatype: Datatype,
    pub cas: Cas,
    pub seqno: Seqno,
    pub rev_seqno: u64,
    /// Mutations only (zero otherwise).
    pub flags: u32,
    /// Mutations only: absolute unix seconds, 0 = never.
    pub expiry: u32,
    /// Deletions (v2) and expirations: when it was deleted. `None` sends a v1 deletion.
    pub delete_time: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DcpMessage {
    SnapshotMarker(SnapshotMarker),
    Mutation(DcpDocument),
    Deletion(DcpDocument),
    Expiration(DcpDocument),
    StreamEnd(StreamEndReason),
    SetVbucketState(VbState),
    SeqnoAdvanced(Seqno),
    Noop,
}

/// Why bytes from a producer are not a valid DCP message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("opcode 0x{0:02x} is not a producer message")]
    NotAProducerMessage(u8),
    #[error("opcode 0x{opcode:02x}: bad extras length {len}")]
    BadExtras { opcode: u8, len: usize },
    #[error("opcode 0x{0:02x}: unexpected key or value")]
    UnexpectedBody(u8),
    #[error("unknown stream-end reason {0}")]
    UnknownEndReason(u32),
    #[error("unknown vbucket state {0}")]
    UnknownVbState(u8),
}
