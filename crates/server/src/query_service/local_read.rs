//! Documents read straight from this node's engine, when their vbucket is active here.
//!
//! A query fetches every document its index scan names. Through KV that is a request to
//! this node's own KV port (or a peer's): an encode, a loopback round trip and two thread
//! hand-offs per page, which cost a point lookup more than everything else it does. For a
//! vbucket active here the engine answers the same thing in place: the document as a GET
//! returns it (xattrs left out, decompressed), `KeyNotFound` for a deleted or expired one.
//!
//! Whatever else the engine says (not active here, the node fenced, a value evicted to
//! disk, a durable write being re-committed) leaves the document to the KV path, which
//! knows how to wait, fetch from disk or ask the node that has it. The caller has already
//! been checked for reading the bucket (RBAC is the query service's, as through KV).

use bytes::Bytes;
use sluice_client::GetResult;
use sluice_engine::EngineError;
use sluice_types::collection::{qualify, QUALIFIED_KEY_BYTES_MAX};
use sluice_types::{vbucket_of, CollectionId, Datatype};

use crate::bucket_handle::BucketHandle;
use crate::node::Node;

/// What the engine of this node says of one document.
#[derive(Debug)]
pub(super) enum LocalRead {
    Found(GetResult),
    /// Deleted, expired or never written.
    NotFound,
    /// Not for this node to answer: read it through KV.
    Elsewhere,
}

/// Reads the document `key` of collection `cid` of `bucket` from this node's engine.
pub(super) fn read(node: &Node, bucket: &BucketHandle, cid: CollectionId, key: &[u8]) -> LocalRead {
    // A fenced node serves no active vbucket; KV says so with the right status.
    if node.is_fenced() {
        return LocalRead::Elsewhere;
    }
    // The key as the engine holds it (a key that is no key is left to KV, which says why).
    let mut buf = [0; QUALIFIED_KEY_BYTES_MAX];
    let Ok(qualified) = qualify(cid, key, &mut buf) else {
        return LocalRead::Elsewhere;
    };
    let engine = &bucket.engine;
    let vb = vbucket_of(key, engine.num_vbuckets());
    let read = engine.read(vb, qualified, |meta, value| {
        (meta.cas, meta.flags, meta.datatype, value.clone())
    });
    match read {
        Ok((cas, flags, datatype, stored)) => match as_get(cas, flags, datatype, stored) {
            Some(doc) => LocalRead::Found(doc),
            None => LocalRead::Elsewhere,
        },
        Err(EngineError::KeyNotFound) => LocalRead::NotFound,
        Err(_) => LocalRead::Elsewhere,
    }
}

/// The stored value as GET hands it to a client that negotiated neither snappy nor
/// xattrs; `None` if it does not decompress (KV then reports that).
fn as_get(cas: sluice_types::Cas, flags: u32, dt: Datatype, stored: Bytes) -> Option<GetResult> {
    let (mut dt, mut value) = (dt, stored);
    if dt.is_snappy() {
        value = Bytes::from(sluice_engine::inflate(&value).ok()?);
        dt = dt.without(Datatype::SNAPPY);
    }
    if dt.is_xattr() {
        let body = sluice_subdoc::xattr::body_offset(&value).unwrap_or(0);
        value = value.slice(body..);
        dt = dt.without(Datatype::XATTR);
    }
    Some(GetResult {
        value,
        flags,
        cas,
        datatype: dt.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_types::Cas;

    /// An xattr section holding `_sys: {}`, then `body`.
    fn with_xattrs(body: &[u8]) -> Vec<u8> {
        let pair = b"_sys\0{}\0";
        let mut v = Vec::new();
        v.extend_from_slice(&(4 + pair.len() as u32).to_be_bytes());
        v.extend_from_slice(&(pair.len() as u32).to_be_bytes());
        v.extend_from_slice(pair);
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn a_document_reads_as_get_gives_it_without_xattrs_and_decompressed() {
        let body = br#"{"k":1}"#;
        let plain = as_get(
            Cas(7),
            3,
            Datatype(Datatype::JSON),
            Bytes::from_static(body),
        )
        .unwrap();
        assert_eq!(
            (&plain.value[..], plain.cas, plain.flags),
            (&body[..], Cas(7), 3)
        );
        assert_eq!(plain.datatype, Datatype::JSON);

        let stored = with_xattrs(body);
        let dt = Datatype(Datatype::JSON | Datatype::XATTR);
        let got = as_get(Cas(8), 0, dt, Bytes::from(stored.clone())).unwrap();
        assert_eq!((&got.value[..], got.datatype), (&body[..], Datatype::JSON));

        let packed = snap::raw::Encoder::new().compress_vec(&stored).unwrap();
        let dt = Datatype(dt.0 | Datatype::SNAPPY);
        let got = as_get(Cas(9), 0, dt, Bytes::from(packed)).unwrap();
        assert_eq!((&got.value[..], got.datatype), (&body[..], Datatype::JSON));

        // Not snappy after all: left to KV, which reports it.
        let bad = Datatype(Datatype::JSON | Datatype::SNAPPY);
        assert!(as_get(Cas(1), 0, bad, Bytes::from_static(b"\xff\xff\xff")).is_none());
    }
}
