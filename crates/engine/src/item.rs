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
    /// Places in `value` to fill with this very mutation's CAS or seqno (sub-document macro
    /// expansion); empty for every other write.
    pub macros: &'a [MacroSlot],
    /// The key's current version counts even when it is a tombstone: ADD fails on it,
    /// REPLACE and the CAS check work on it (sub-document access-deleted). Otherwise a
    /// tombstone is as good as nothing.
    pub access_deleted: bool,
    /// The version written is a tombstone whose value holds only xattrs (a sub-document
    /// mutation of a deleted document, or create-as-deleted): it counts as no document and
    /// streams as a deletion.
    pub store_deleted: bool,
}

/// What a `*_WITH_META` write stores: a version made elsewhere (another cluster's, through
/// XDCR) with its own CAS, revision, flags and expiry, if it wins conflict resolution
/// (`crate::conflict`) against the key's current version, live or a tombstone.
#[derive(Debug, Clone)]
pub struct WithMetaRequest<'a> {
    pub kind: WithMetaKind,
    pub key: &'a [u8],
    /// A deletion's value is its xattrs only (datatype XATTR), or empty.
    pub value: &'a [u8],
    pub datatype: Datatype,
    pub flags: u32,
    /// Absolute Unix seconds; 0 is none.
    pub expiry: u32,
    pub rev_seqno: u64,
    /// The version's CAS (not a check: see `cas_check`).
    pub cas: Cas,
    /// The header's CAS: 0, or the CAS the key's current version must have.
    pub cas_check: Cas,
    /// Resolve against the current version (off: the incoming version always wins).
    pub check_conflicts: bool,
    /// Store under a new local CAS instead of `cas` (only without conflict resolution).
    pub regenerate_cas: bool,
}

/// SET_WITH_META, ADD_WITH_META, or DEL_WITH_META as a deletion or (IS_EXPIRATION) an
/// expiration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WithMetaKind {
    Set,
    Add,
    Delete,
    Expire,
}

/// A sub-document macro (`${Mutation.CAS}`, `${Mutation.seqno}`) to fill in once the engine
/// has chosen the mutation's CAS and seqno: 16 hex digits at `at` in the value. The CAS is
/// written in byte-reversed order, as Couchbase Server writes it (its SDKs undo that).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MacroSlot {
    pub at: usize,
    pub field: MacroField,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MacroField {
    Cas,
    Seqno,
}

/// Writes the macros' values into `value`.
pub(crate) fn fill_macros(value: &mut [u8], slots: &[MacroSlot], cas: Cas, seqno: Seqno) {
    for slot in slots {
        let digits = match slot.field {
            MacroField::Cas => format!("{:016x}", cas.0.swap_bytes()),
            MacroField::Seqno => format!("{:016x}", seqno.0),
        };
        let end = slot.at + digits.len();
        assert!(end <= value.len(), "a macro slot lies outside the value");
        value[slot.at..end].copy_from_slice(digits.as_bytes());
    }
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

/// What OBSERVE reports for a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observed {
    /// The current version is in memory, not yet on disk (always, on an ephemeral bucket).
    NotPersisted(Cas),
    Persisted(Cas),
    /// Deleted, and the deletion is not on disk yet.
    Deleted(Cas),
    /// No such key, or its deletion is on disk.
    NotFound,
}
