//! What callers pass in and get back.

use bytes::Bytes;
use sluice_types::{Cas, Datatype, DurabilityLevel, ItemMeta, Seqno, VbUuid};

/// SET / ADD / REPLACE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    Set,
    Add,
    Replace,
}

/// A store request as the engine sees it (already validated for syntax).
#[derive(Debug, Clone)]
pub struct StoreRequest<'a> {
    pub kind: StoreKind,
    pub key: &'a [u8],
    pub value: &'a [u8],
    pub flags: u32,
    /// As sent on the wire (0, relative seconds, or absolute Unix time).
    pub expiry_wire: u32,
    pub datatype: Datatype,
    /// 0 = no CAS check.
    pub cas: Cas,
    /// Keep the existing document's expiry (PreserveTTL frame).
    pub preserve_ttl: bool,
    /// A SyncWrite: stored as a prepare, visible once committed.
    pub durability: Option<DurabilityLevel>,
}

/// INCREMENT / DECREMENT.
#[derive(Debug, Clone, Copy)]
pub struct ArithmeticRequest<'a> {
    pub key: &'a [u8],
    pub increment: bool,
    pub delta: u64,
    /// Created with this value when missing (unless `expiry_wire` is `u32::MAX`).
    pub initial: u64,
    pub expiry_wire: u32,
    /// 0 = no CAS check.
    pub cas: Cas,
    /// A SyncWrite: stored as a prepare, visible once committed.
    pub durability: Option<DurabilityLevel>,
}

/// The result of a successful mutation: what a mutation token is made of. For a SyncWrite,
/// the prepare's seqno and CAS (the commit keeps the CAS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mutation {
    pub cas: Cas,
    pub seqno: Seqno,
    pub vb_uuid: VbUuid,
}

/// A document as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    pub meta: ItemMeta,
    /// As stored (possibly Snappy-compressed, as `meta.datatype` says).
    pub value: Bytes,
}
