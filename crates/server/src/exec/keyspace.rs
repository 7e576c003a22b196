//! From the key a client sent to the key the engine holds, and back.
//!
//! The engine knows a document by its collection-qualified key (`sluice_types::collection`):
//! the collection id as LEB128, then the logical key. A client that negotiated collections
//! sends exactly that, and the prefix is checked here against the bucket's manifest; a
//! client that did not sends the logical key alone, which names the default collection, and
//! gets the `0x00` prefix put in front. Answers that carry a key (GETK, GET_RANDOM_KEY)
//! give it back in the form the client sent.

use sluice_cluster::Manifest;
use sluice_types::collection::{
    qualify, split_key, CollectionId, KeyError, QUALIFIED_KEY_BYTES_MAX,
};

/// Room for any qualified key.
pub type KeyBuf = [u8; QUALIFIED_KEY_BYTES_MAX];

/// Why a key names no document of this bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyRefusal {
    /// Not a key at all: EINVAL.
    Invalid(KeyError),
    /// A collection the manifest does not hold (never made, or dropped): UNKNOWN_COLLECTION,
    /// with the manifest's uid so the client can tell whether its own manifest is older.
    UnknownCollection,
}

/// How this connection's keys are spelled, and the manifest they are checked against.
#[derive(Debug, Clone, Copy)]
pub enum Keyspace<'m> {
    /// No collections negotiated: logical keys of the default collection.
    Plain,
    /// Collections negotiated: prefixed keys, checked against the bucket's manifest.
    Aware(&'m Manifest),
}

impl Keyspace<'_> {
    /// The qualified key `wire` names: `wire` itself from a collection-aware client (once
    /// checked), else `wire` after the default collection's prefix, built in `buf`.
    pub fn qualify<'b>(&self, wire: &'b [u8], buf: &'b mut KeyBuf) -> Result<&'b [u8], KeyRefusal> {
        if let Keyspace::Aware(manifest) = self {
            let (cid, _) = split_key(wire).map_err(KeyRefusal::Invalid)?;
            return match known(manifest, cid) {
                true => Ok(wire),
                false => Err(KeyRefusal::UnknownCollection),
            };
        }
        qualify(CollectionId::DEFAULT, wire, buf).map_err(KeyRefusal::Invalid)
    }

    /// The key to give back to the client for the engine's `qualified` key.
    pub fn wire_key<'k>(&self, qualified: &'k [u8]) -> &'k [u8] {
        match self {
            Keyspace::Aware(_) => qualified,
            Keyspace::Plain => sluice_types::collection::logical_key(qualified),
        }
    }

    /// The collection a keyless command (GET_RANDOM_KEY) works on: the one it names, which
    /// only a collection-aware client can name, or the default one.
    pub fn collection(&self, named: Option<u32>) -> Result<CollectionId, KeyRefusal> {
        match (self, named) {
            (Keyspace::Aware(m), Some(id)) if !known(m, CollectionId(id)) => {
                Err(KeyRefusal::UnknownCollection)
            }
            (Keyspace::Aware(_), Some(id)) => Ok(CollectionId(id)),
            _ => Ok(CollectionId::DEFAULT),
        }
    }

    /// The maxTTL of the collection `qualified` belongs to, if it has one.
    pub fn max_ttl_s(&self, qualified: &[u8]) -> Option<u32> {
        match self {
            Keyspace::Aware(m) => m
                .max_ttl_s(sluice_types::collection::collection_of(qualified).0)
                .filter(|&t| t > 0),
            Keyspace::Plain => None,
        }
    }

    /// The manifest uid an UNKNOWN_COLLECTION answer carries.
    pub fn manifest_uid(&self) -> u64 {
        match self {
            Keyspace::Aware(m) => m.uid(),
            Keyspace::Plain => 0,
        }
    }
}

/// The expiry a write to a collection with a maxTTL of `max_s` gets for the `wire` expiry
/// it asked for (0 none, up to 30 days relative, else absolute): none or a later one
/// becomes `max_s` from now, as Couchbase caps it. Returned as an absolute time.
pub fn cap_expiry(wire: u32, max_s: u32, now_s: u32) -> u32 {
    let limit = now_s.saturating_add(max_s);
    match sluice_types::Expiry::from_wire(wire, now_s) {
        sluice_types::Expiry::NEVER => limit,
        asked => asked.0.min(limit),
    }
}

/// Answers a key that names no document of this bucket.
pub fn refuse(r: &mut super::Responder<'_>, keyspace: &Keyspace, refusal: KeyRefusal) {
    match refusal {
        KeyRefusal::Invalid(e) => r.error(sluice_proto::Status::Einval, &e.to_string()),
        KeyRefusal::UnknownCollection => r.unknown_collection(
            sluice_proto::Status::UnknownCollection,
            keyspace.manifest_uid(),
            "the collection is not in the bucket's manifest",
        ),
    }
}

/// The default collection always exists; the others while the manifest holds them.
fn known(manifest: &Manifest, cid: CollectionId) -> bool {
    cid == CollectionId::DEFAULT || manifest.has_collection(cid.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_types::collection::LEB128_BYTES_MAX;

    fn qualified(cid: CollectionId, logical: &[u8]) -> Vec<u8> {
        let mut buf = [0; LEB128_BYTES_MAX];
        let mut k = cid.encode(&mut buf).to_vec();
        k.extend_from_slice(logical);
        k
    }

    #[test]
    fn a_max_ttl_bounds_every_expiry() {
        let now = 1_800_000_000;
        assert_eq!(cap_expiry(0, 60, now), now + 60, "none becomes the maximum");
        assert_eq!(cap_expiry(30, 60, now), now + 30, "a shorter one stays");
        assert_eq!(cap_expiry(120, 60, now), now + 60, "a longer one is cut");
        assert_eq!(cap_expiry(now + 10, 60, now), now + 10, "absolute, shorter");
        assert_eq!(cap_expiry(now + 600, 60, now), now + 60, "absolute, longer");
    }

    #[test]
    fn keys_are_qualified_by_what_the_connection_negotiated() {
        let mut m = Manifest::default();
        m.create_scope("s").unwrap();
        m.create_collection("s", "c", 0).unwrap();
        let cid = m.collection_id("s", "c").unwrap();
        let mut buf = [0; QUALIFIED_KEY_BYTES_MAX];
        let plain = Keyspace::Plain;
        assert_eq!(plain.qualify(b"doc", &mut buf), Ok(&b"\x00doc"[..]));
        assert_eq!(plain.wire_key(b"\x00doc"), b"doc");
        let long = vec![b'k'; sluice_types::limits::KEY_BYTES_MAX + 1];
        assert_eq!(
            plain.qualify(&long, &mut buf),
            Err(KeyRefusal::Invalid(KeyError::TooLong))
        );

        let snapshot = m.clone();
        let aware = Keyspace::Aware(&snapshot);
        let key = qualified(CollectionId(cid), b"doc");
        assert_eq!(aware.qualify(&key, &mut buf), Ok(&key[..]));
        assert_eq!(aware.wire_key(&key), &key[..]);
        let unknown = qualified(CollectionId(cid + 1), b"doc");
        assert_eq!(
            aware.qualify(&unknown, &mut buf),
            Err(KeyRefusal::UnknownCollection)
        );
        // The system events' key space is no collection a client may name.
        let system = qualified(CollectionId::SYSTEM, b"doc");
        assert_eq!(
            aware.qualify(&system, &mut buf),
            Err(KeyRefusal::UnknownCollection)
        );
        assert_eq!(
            aware.qualify(b"\x80\x00doc", &mut buf),
            Err(KeyRefusal::Invalid(KeyError::BadPrefix))
        );
        m.drop_collection("s", "c").unwrap();
        let aware = Keyspace::Aware(&m);
        assert_eq!(
            aware.qualify(&key, &mut buf),
            Err(KeyRefusal::UnknownCollection)
        );
        assert_eq!(
            aware.collection(Some(cid)),
            Err(KeyRefusal::UnknownCollection)
        );
        assert_eq!(plain.collection(Some(cid)), Ok(CollectionId::DEFAULT));
    }
}
