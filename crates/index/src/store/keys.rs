//! Key layouts of the store's meta keyspace, and the keyspace names of one index.
//!
//! Meta keyspace (`index_meta`):
//! - `d` ++ id (u32 BE) → the definition's JSON;
//! - `p` ++ id ++ vb (u16 BE) → the vbucket's [`VbPosition`](crate::VbPosition);
//! - `c` ++ id ++ vb → present while the vbucket's entries are being cleared (a rollback),
//!   so that a crash in the middle finishes the clear on open instead of resuming with
//!   half the vbucket gone;
//! - `n` → the next index id (u32 BE), so ids are never reused, even after a drop.
//!
//! Each index has two keyspaces: `ix_<id>_entries` (entry bytes → empty) and `ix_<id>_back`
//! (vb ++ document key → the document's entry bytes), the back index that finds a
//! document's old entry on update and a vbucket's entries on clear.

use sluice_types::VbId;

use crate::definition::IndexId;

pub const META: &str = "index_meta";
pub const NEXT_ID: &[u8] = b"n";
const DEF: u8 = b'd';
const POSITION: u8 = b'p';
const CLEARING: u8 = b'c';

pub fn def(id: IndexId) -> Vec<u8> {
    tagged(DEF, id, None)
}

pub fn def_prefix() -> Vec<u8> {
    vec![DEF]
}

pub fn position(id: IndexId, vb: VbId) -> Vec<u8> {
    tagged(POSITION, id, Some(vb))
}

pub fn position_prefix(id: IndexId) -> Vec<u8> {
    tagged(POSITION, id, None)
}

pub fn clearing(id: IndexId, vb: VbId) -> Vec<u8> {
    tagged(CLEARING, id, Some(vb))
}

pub fn clearing_prefix(id: IndexId) -> Vec<u8> {
    tagged(CLEARING, id, None)
}

/// The vbucket at the end of a `p…` or `c…` key.
pub fn vb_of(key: &[u8]) -> Option<VbId> {
    match key {
        [_, _, _, _, _, hi, lo] => Some(VbId(u16::from_be_bytes([*hi, *lo]))),
        _ => None,
    }
}

pub fn entries_keyspace(id: IndexId) -> String {
    format!("ix_{}_entries", id.0)
}

pub fn back_keyspace(id: IndexId) -> String {
    format!("ix_{}_back", id.0)
}

/// The back index's key of a document: its vbucket first, so one vbucket is one range.
pub fn back(vb: VbId, doc_key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(2 + doc_key.len());
    k.extend_from_slice(&vb.0.to_be_bytes());
    k.extend_from_slice(doc_key);
    k
}

pub fn back_prefix(vb: VbId) -> [u8; 2] {
    vb.0.to_be_bytes()
}

fn tagged(tag: u8, id: IndexId, vb: Option<VbId>) -> Vec<u8> {
    let mut k = vec![tag];
    k.extend_from_slice(&id.0.to_be_bytes());
    if let Some(vb) = vb {
        k.extend_from_slice(&vb.0.to_be_bytes());
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vbucket_key_gives_its_vbucket_back() {
        assert_eq!(vb_of(&position(IndexId(3), VbId(1023))), Some(VbId(1023)));
        assert_eq!(vb_of(&clearing(IndexId(3), VbId(7))), Some(VbId(7)));
        assert_eq!(vb_of(&def(IndexId(3))), None);
        assert!(position(IndexId(3), VbId(1)).starts_with(&position_prefix(IndexId(3))));
        assert!(!position(IndexId(4), VbId(1)).starts_with(&position_prefix(IndexId(3))));
    }
}
