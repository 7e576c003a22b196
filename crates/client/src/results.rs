//! What typed operations take and return.

use bytes::Bytes;
use sluice_types::{Cas, Seqno, VbId, VbUuid};

/// A document as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetResult {
    pub value: Bytes,
    pub flags: u32,
    pub cas: Cas,
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
