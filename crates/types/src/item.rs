//! Document metadata, as the engine stores it, the storage persists it and DCP streams it.

use crate::{Cas, Seqno};
use serde::{Deserialize, Serialize};

/// The datatype bit field of the wire header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash, Serialize, Deserialize)]
pub struct Datatype(pub u8);

impl Datatype {
    pub const RAW: Datatype = Datatype(0);
    pub const JSON: u8 = 0x01;
    pub const SNAPPY: u8 = 0x02;
    pub const XATTR: u8 = 0x04;
    /// Bits this server understands; anything else in a request is invalid.
    pub const KNOWN: u8 = Self::JSON | Self::SNAPPY | Self::XATTR;

    pub fn is_json(self) -> bool {
        self.0 & Self::JSON != 0
    }
    pub fn is_snappy(self) -> bool {
        self.0 & Self::SNAPPY != 0
    }
    pub fn is_xattr(self) -> bool {
        self.0 & Self::XATTR != 0
    }
    pub fn without(self, bits: u8) -> Datatype {
        Datatype(self.0 & !bits)
    }
    pub fn with(self, bits: u8) -> Datatype {
        Datatype(self.0 | bits)
    }
}

/// An absolute expiry time in Unix seconds; 0 = never expires.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash, Serialize, Deserialize,
)]
pub struct Expiry(pub u32);

impl Expiry {
    pub const NEVER: Expiry = Expiry(0);

    /// Turns a wire expiry (0, relative ≤ 30 days, or absolute) into an absolute time.
    pub fn from_wire(wire: u32, now_unix_s: u32) -> Expiry {
        if wire == 0 {
            Expiry::NEVER
        } else if wire <= crate::limits::EXPIRY_RELATIVE_SECONDS_MAX {
            Expiry(now_unix_s.saturating_add(wire))
        } else {
            Expiry(wire)
        }
    }

    pub fn is_expired(self, now_unix_s: u32) -> bool {
        self.0 != 0 && self.0 <= now_unix_s
    }
}

/// Everything about a document except its key and value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ItemMeta {
    pub seqno: Seqno,
    /// Counts every mutation of the key, tombstones included (conflict resolution, DCP).
    pub rev_seqno: u64,
    pub cas: Cas,
    /// Opaque to the server: stored and returned unchanged.
    pub flags: u32,
    pub expiry: Expiry,
    pub datatype: Datatype,
    /// A tombstone: the document was deleted or expired at `seqno`.
    pub deleted: bool,
    /// For tombstones: when the delete happened (Unix seconds); used by the purger and DCP v2.
    pub delete_time: u32,
}
