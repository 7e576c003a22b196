//! What typed operations take and return.

use bytes::Bytes;
use sluice_proto::DurabilityLevel;
use sluice_types::{Cas, Seqno, VbId, VbUuid};

/// A document as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetResult {
    pub value: Bytes,
    pub flags: u32,
    pub cas: Cas,
    pub datatype: u8,
}

/// A document's metadata as GET_META answers it (a deleted document's too: its tombstone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DocMeta {
    pub deleted: bool,
    pub flags: u32,
    /// Absolute Unix seconds (0: none).
    pub expiry: u32,
    pub rev_seqno: u64,
    pub cas: Cas,
    /// The stored datatype bits (JSON, XATTR).
    pub datatype: u8,
}

/// Extra arguments of set / add / replace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreOptions {
    /// Opaque to the server, returned unchanged by get.
    pub flags: u32,
    /// 0 = never; ≤ 30 days = relative seconds; larger = absolute Unix time.
    pub expiry: u32,
    /// Non-zero: the document must exist with exactly this CAS.
    pub cas: Cas,
    /// Wait until the write is durable at this level; a timeout answers
    /// SYNC_WRITE_AMBIGUOUS (the write may or may not have been made durable).
    pub durability: Option<Durability>,
}

/// A durability requirement (the durability frame info of flexible framing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Durability {
    pub level: DurabilityLevel,
    /// Milliseconds (1..=65534); `None` leaves the server's default.
    pub timeout_ms: Option<u16>,
}

impl Durability {
    pub fn new(level: DurabilityLevel) -> Durability {
        Durability {
            level,
            timeout_ms: None,
        }
    }

    /// The framing extras that carry it.
    pub(crate) fn framing_extras(&self) -> Vec<u8> {
        let mut data = vec![self.level as u8];
        if let Some(t) = self.timeout_ms {
            data.extend_from_slice(&t.to_be_bytes());
        }
        let mut out = Vec::with_capacity(4);
        sluice_proto::frame_info::encode_frame_info(&mut out, 1, &data);
        out
    }
}

/// Where a mutation landed in its vbucket's history (needs HELLO MutationSeqno).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MutationToken {
    pub vb: VbId,
    pub vb_uuid: VbUuid,
    pub seqno: Seqno,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MutationResult {
    pub cas: Cas,
    /// `None` when MutationSeqno was not negotiated (e.g. plain memcached).
    pub token: Option<MutationToken>,
}

/// OBSERVE_SEQNO's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObserveSeqno {
    pub vb: VbId,
    /// The vbucket's current uuid.
    pub vb_uuid: VbUuid,
    pub persisted: Seqno,
    pub current: Seqno,
    /// Set when the uuid asked about is an older branch (a hard failover happened):
    /// (that uuid, the last seqno of its branch).
    pub failed_over: Option<(VbUuid, Seqno)>,
}
