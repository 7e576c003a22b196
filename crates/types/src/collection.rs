//! Collection ids and the collection-qualified document key.
//!
//! Every document belongs to a collection, and the engine, storage and replication know a
//! document by its *qualified key*: the collection id as unsigned LEB128, then the key the
//! application chose (the *logical key*). That is the key a collection-aware client sends
//! on the wire; a client that did not negotiate collections sends the logical key alone,
//! and the server puts the default collection's prefix (`0x00`) in front.
//!
//! The LEB128 rules are Couchbase's: at most 5 bytes and only the shortest encoding of a
//! value; anything else is not a key.

use std::fmt;

/// A collection's id within its bucket's manifest. `_default._default` is 0; ids 1–7 are
/// reserved (1 names the system events' key space); others are handed out from 8.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct CollectionId(pub u32);

impl CollectionId {
    pub const DEFAULT: CollectionId = CollectionId(0);
    /// The key space of system events (collection create/drop markers in a vbucket).
    pub const SYSTEM: CollectionId = CollectionId(1);

    /// This id's LEB128 prefix, written into `buf`; returns the bytes used.
    pub fn encode(self, buf: &mut [u8; LEB128_BYTES_MAX]) -> &[u8] {
        let mut v = self.0;
        let mut n = 0;
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                buf[n] = byte;
                n += 1;
                break;
            }
            buf[n] = byte | 0x80;
            n += 1;
        }
        &buf[..n]
    }

    /// This id's prefix as a new vector.
    pub fn prefix(self) -> Vec<u8> {
        let mut buf = [0; LEB128_BYTES_MAX];
        self.encode(&mut buf).to_vec()
    }
}

impl fmt::Display for CollectionId {
    /// Couchbase shows collection ids in hex.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// Longest LEB128 encoding of a `u32`.
pub const LEB128_BYTES_MAX: usize = 5;

/// Longest qualified key: the logical key's limit with a one-byte prefix, as Couchbase
/// caps a collection-aware client's key (a longer prefix leaves less for the key).
pub const QUALIFIED_KEY_BYTES_MAX: usize = crate::limits::KEY_BYTES_MAX + 1;

/// Why bytes are not a qualified key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyError {
    /// The LEB128 prefix is cut short, longer than 5 bytes, above `u32::MAX`, or not the
    /// shortest encoding of its value.
    BadPrefix,
    /// Nothing follows the prefix.
    EmptyKey,
    /// The whole key is longer than [`QUALIFIED_KEY_BYTES_MAX`].
    TooLong,
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyError::BadPrefix => "the key's collection prefix is not canonical LEB128",
            KeyError::EmptyKey => "the key is empty after its collection prefix",
            KeyError::TooLong => "the key is too long",
        })
    }
}

/// Reads the collection id at the start of `bytes`: the id and the prefix's length.
pub fn decode_prefix(bytes: &[u8]) -> Result<(CollectionId, usize), KeyError> {
    let mut value: u64 = 0;
    for (i, &b) in bytes.iter().take(LEB128_BYTES_MAX).enumerate() {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            // A last byte of 0 after others means a shorter encoding existed.
            if i > 0 && b == 0 {
                return Err(KeyError::BadPrefix);
            }
            let id = u32::try_from(value).map_err(|_| KeyError::BadPrefix)?;
            return Ok((CollectionId(id), i + 1));
        }
    }
    Err(KeyError::BadPrefix)
}

/// Splits a qualified key into its collection and logical key, checking both.
pub fn split_key(qualified: &[u8]) -> Result<(CollectionId, &[u8]), KeyError> {
    if qualified.len() > QUALIFIED_KEY_BYTES_MAX {
        return Err(KeyError::TooLong);
    }
    let (cid, n) = decode_prefix(qualified)?;
    let logical = &qualified[n..];
    if logical.is_empty() {
        return Err(KeyError::EmptyKey);
    }
    Ok((cid, logical))
}

/// `logical` in collection `cid` as the engine keys it, built in `buf`.
pub fn qualify<'b>(
    cid: CollectionId,
    logical: &[u8],
    buf: &'b mut [u8; QUALIFIED_KEY_BYTES_MAX],
) -> Result<&'b [u8], KeyError> {
    if logical.is_empty() {
        return Err(KeyError::EmptyKey);
    }
    let mut prefix = [0; LEB128_BYTES_MAX];
    let prefix = cid.encode(&mut prefix);
    let n = prefix.len() + logical.len();
    if n > QUALIFIED_KEY_BYTES_MAX {
        return Err(KeyError::TooLong);
    }
    buf[..prefix.len()].copy_from_slice(prefix);
    buf[prefix.len()..n].copy_from_slice(logical);
    Ok(&buf[..n])
}

/// The collection of a key the engine holds. Keys are checked when they come in, so a
/// stored key always has a prefix; a key that somehow has none counts as the default
/// collection's rather than failing a reader.
pub fn collection_of(qualified: &[u8]) -> CollectionId {
    decode_prefix(qualified).map_or(CollectionId::DEFAULT, |(cid, _)| cid)
}

/// The logical key of a key the engine holds (see [`collection_of`]).
pub fn logical_key(qualified: &[u8]) -> &[u8] {
    decode_prefix(qualified).map_or(qualified, |(_, n)| &qualified[n..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_encode_as_couchbase_documents_them() {
        let cases: &[(u32, &[u8])] = &[
            (0, &[0x00]),
            (8, &[0x08]),
            (0x7f, &[0x7f]),
            (0x80, &[0x80, 0x01]),
            (0x555, &[0xd5, 0x0a]),
            (0xffff_ffff, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        ];
        for &(id, bytes) in cases {
            let mut buf = [0; LEB128_BYTES_MAX];
            assert_eq!(CollectionId(id).encode(&mut buf), bytes, "{id:#x}");
            assert_eq!(
                decode_prefix(bytes),
                Ok((CollectionId(id), bytes.len())),
                "{id:#x}"
            );
        }
    }

    #[test]
    fn a_logical_key_qualifies_within_the_limit_and_splits_back() {
        let mut buf = [0; QUALIFIED_KEY_BYTES_MAX];
        let q = qualify(CollectionId(0x555), b"k1", &mut buf)
            .unwrap()
            .to_vec();
        assert_eq!(q, [0xd5, 0x0a, b'k', b'1']);
        assert_eq!(split_key(&q), Ok((CollectionId(0x555), &b"k1"[..])));
        let longest = vec![b'x'; crate::limits::KEY_BYTES_MAX];
        assert!(qualify(CollectionId(8), &longest, &mut buf).is_ok());
        // A two-byte prefix leaves one byte less for the key.
        assert_eq!(
            qualify(CollectionId(0x80), &longest, &mut buf),
            Err(KeyError::TooLong)
        );
        assert_eq!(
            qualify(CollectionId(8), b"", &mut buf),
            Err(KeyError::EmptyKey)
        );
    }

    #[test]
    fn only_canonical_prefixes_of_at_most_five_bytes_decode() {
        let bad: &[&[u8]] = &[
            &[],
            &[0x80],                               // cut short
            &[0x80, 0x00],                         // 0 spelled in two bytes
            &[0x88, 0x80, 0x00],                   // 8 spelled in three
            &[0xff, 0xff, 0xff, 0xff, 0x1f],       // above u32::MAX
            &[0x80, 0x80, 0x80, 0x80, 0x80, 0x01], // six bytes
        ];
        for b in bad {
            assert_eq!(decode_prefix(b), Err(KeyError::BadPrefix), "{b:x?}");
        }
    }

    #[test]
    fn a_qualified_key_splits_into_collection_and_logical_key() {
        assert_eq!(split_key(b"\x08doc"), Ok((CollectionId(8), &b"doc"[..])));
        assert_eq!(split_key(b"\x00"), Err(KeyError::EmptyKey));
        let mut long = vec![0u8];
        long.extend(std::iter::repeat_n(b'k', 250));
        assert!(split_key(&long).is_ok());
        long.push(b'k');
        assert_eq!(split_key(&long), Err(KeyError::TooLong));
        assert_eq!(collection_of(b"\x80\x01k"), CollectionId(0x80));
        assert_eq!(logical_key(b"\x80\x01k"), b"k");
    }
}
