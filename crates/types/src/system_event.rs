//! The records a vbucket keeps of the scopes and collections made and dropped in it, as
//! the engine stores them and DCP turns them into SYSTEM_EVENTs (see the engine's
//! `system_events` for why and when they are written).
//!
//! A record is a document of the system key space (collection 1, which no client can
//! name): `0x01 'c' LEB128(collection id)` for a collection, `0x01 's' LEB128(scope id)`
//! for a scope. Its value:
//!
//! ```text
//!  collection: version u8 (1) | state u8 (0 live, 1 dropped) | manifest uid u64 BE |
//!              scope id u32 BE | collection id u32 BE | maxTTL u32 BE | name
//!  scope:      version u8 (1) | state u8 | manifest uid u64 BE | scope id u32 BE | name
//! ```

use crate::collection::decode_prefix;
use crate::CollectionId;

const VERSION: u8 = 1;
const KIND_COLLECTION: u8 = b'c';
const KIND_SCOPE: u8 = b's';
/// Bytes before a collection record's name.
const COLLECTION_FIXED_BYTES: usize = 2 + 8 + 4 + 4 + 4;
/// Bytes before a scope record's name.
const SCOPE_FIXED_BYTES: usize = 2 + 8 + 4;

/// Whether `key` is a system event record rather than a document.
pub fn is_system_key(key: &[u8]) -> bool {
    key.first() == Some(&1)
}

/// The record key of collection `cid`.
pub fn collection_key(cid: CollectionId) -> Vec<u8> {
    let mut k = vec![1, KIND_COLLECTION];
    k.extend_from_slice(&cid.prefix());
    k
}

/// The record key of scope `sid`.
pub fn scope_key(sid: u32) -> Vec<u8> {
    let mut k = vec![1, KIND_SCOPE];
    k.extend_from_slice(&CollectionId(sid).prefix());
    k
}

/// A record, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SystemEvent {
    Collection {
        dropped: bool,
        manifest_uid: u64,
        scope: u32,
        collection: u32,
        max_ttl_s: u32,
        name: Vec<u8>,
    },
    Scope {
        dropped: bool,
        manifest_uid: u64,
        scope: u32,
        name: Vec<u8>,
    },
}

impl SystemEvent {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = vec![VERSION];
        match self {
            SystemEvent::Collection {
                dropped,
                manifest_uid,
                scope,
                collection,
                max_ttl_s,
                name,
            } => {
                v.push(u8::from(*dropped));
                v.extend_from_slice(&manifest_uid.to_be_bytes());
                v.extend_from_slice(&scope.to_be_bytes());
                v.extend_from_slice(&collection.to_be_bytes());
                v.extend_from_slice(&max_ttl_s.to_be_bytes());
                v.extend_from_slice(name);
            }
            SystemEvent::Scope {
                dropped,
                manifest_uid,
                scope,
                name,
            } => {
                v.push(u8::from(*dropped));
                v.extend_from_slice(&manifest_uid.to_be_bytes());
                v.extend_from_slice(&scope.to_be_bytes());
                v.extend_from_slice(name);
            }
        }
        v
    }

    /// The record stored under `key`; `None` when the key is not a record's or the value
    /// is not one (never written by this engine).
    pub fn decode(key: &[u8], value: &[u8]) -> Option<SystemEvent> {
        let (cid, n) = decode_prefix(key).ok()?;
        if cid != CollectionId::SYSTEM {
            return None;
        }
        let kind = *key.get(n)?;
        let (&version, rest) = value.split_first()?;
        let (&state, rest) = rest.split_first()?;
        if version != VERSION || state > 1 {
            return None;
        }
        let dropped = state == 1;
        let u64_at = |b: &[u8], at: usize| -> Option<u64> {
            Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
        };
        let u32_at = |b: &[u8], at: usize| -> Option<u32> {
            Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
        };
        match kind {
            KIND_COLLECTION => Some(SystemEvent::Collection {
                dropped,
                manifest_uid: u64_at(rest, 0)?,
                scope: u32_at(rest, 8)?,
                collection: u32_at(rest, 12)?,
                max_ttl_s: u32_at(rest, 16)?,
                name: rest.get(COLLECTION_FIXED_BYTES - 2..)?.to_vec(),
            }),
            KIND_SCOPE => Some(SystemEvent::Scope {
                dropped,
                manifest_uid: u64_at(rest, 0)?,
                scope: u32_at(rest, 8)?,
                name: rest.get(SCOPE_FIXED_BYTES - 2..)?.to_vec(),
            }),
            _ => None,
        }
    }

    pub fn is_dropped(&self) -> bool {
        match self {
            SystemEvent::Collection { dropped, .. } | SystemEvent::Scope { dropped, .. } => {
                *dropped
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let c = SystemEvent::Collection {
            dropped: true,
            manifest_uid: 9,
            scope: 8,
            collection: 0x555,
            max_ttl_s: 60,
            name: b"hotel".to_vec(),
        };
        let key = collection_key(CollectionId(0x555));
        assert_eq!(key, b"\x01c\xd5\x0a");
        assert_eq!(SystemEvent::decode(&key, &c.encode()), Some(c));
        let s = SystemEvent::Scope {
            dropped: false,
            manifest_uid: 2,
            scope: 8,
            name: b"inventory".to_vec(),
        };
        assert_eq!(SystemEvent::decode(&scope_key(8), &s.encode()), Some(s));
        assert_eq!(SystemEvent::decode(b"\x00c\x08", &[1, 0]), None);
        assert_eq!(SystemEvent::decode(&scope_key(8), &[1, 0, 1]), None);
    }
}
