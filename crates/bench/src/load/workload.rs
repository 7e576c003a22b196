//! What the load is made of: a key space of 32-byte keys (memaslap's size), one value, the
//! get/set mix, and a tiny seeded RNG so each connection's sequence is reproducible and costs
//! a few nanoseconds per operation.

use bytes::Bytes;
use sluice_types::collection::LEB128_BYTES_MAX;
use sluice_types::CollectionId;

/// Every key is this long, like memaslap's default.
pub const KEY_BYTES: usize = 32;
const KEY_PREFIX: &[u8] = b"sluice:";

pub type Key = [u8; KEY_BYTES];

/// A key with the longest collection prefix.
const WIRE_KEY_BYTES_MAX: usize = KEY_BYTES + LEB128_BYTES_MAX;

/// A key as a request carries it (see [`Workload::wire_key`]).
#[derive(Debug, Clone, Copy)]
pub struct WireKey {
    bytes: [u8; WIRE_KEY_BYTES_MAX],
    len: usize,
    /// The key without its collection prefix: what the vbucket is hashed from.
    pub logical: Key,
}

impl WireKey {
    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

#[derive(Debug, Clone)]
pub struct Workload {
    pub keys: u64,
    pub get_ratio: f64,
    pub value: Bytes,
    pub mix: Mix,
    /// The collection ids keys are spread over (key i in `collections[i % len]`); empty:
    /// the default collection, keys without prefix (no collections negotiated).
    pub collections: Vec<u32>,
}

/// What the reads and writes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mix {
    /// GET and SET of an opaque value (memaslap's load).
    #[default]
    Binary,
    /// GET and SET of a JSON document: the full-document baseline of `Subdoc`.
    Json,
    /// The same JSON document through sub-document commands: a single-path lookup of one
    /// field for a read, a counter increment of another for a write.
    Subdoc,
}

/// The field a sub-document read gets and the one a write increments.
pub const SUBDOC_GET_PATH: &[u8] = b"name";
pub const SUBDOC_COUNTER_PATH: &[u8] = b"n";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Get,
    Set,
}

impl Workload {
    pub fn new(keys: u64, get_ratio: f64, value_bytes: usize) -> Workload {
        Workload::with_mix(keys, get_ratio, value_bytes, Mix::Binary)
    }

    /// A workload of `mix`. Binary values are printable and not JSON, so no server spends
    /// time on datatype detection differences; JSON ones are an object of `value_bytes`
    /// (at least its fixed fields) with the fields sub-document commands use.
    pub fn with_mix(keys: u64, get_ratio: f64, value_bytes: usize, mix: Mix) -> Workload {
        let value: Vec<u8> = match mix {
            Mix::Binary => (0..value_bytes).map(|i| b'a' + (i % 26) as u8).collect(),
            Mix::Json | Mix::Subdoc => json_document(value_bytes),
        };
        Workload {
            keys,
            get_ratio,
            value: Bytes::from(value),
            mix,
            collections: Vec::new(),
        }
    }

    /// Key `i` as sent: behind its collection's LEB128 prefix when the load spreads over
    /// collections. The vbucket is the logical key's ([`WireKey::logical`]).
    pub fn wire_key(&self, i: u64) -> WireKey {
        let logical = key(i);
        let mut bytes = [0u8; WIRE_KEY_BYTES_MAX];
        let prefix_len = match self.collections.as_slice() {
            [] => 0,
            ids => {
                let cid = ids[(i % ids.len() as u64) as usize];
                let mut buf = [0u8; LEB128_BYTES_MAX];
                let prefix = CollectionId(cid).encode(&mut buf);
                bytes[..prefix.len()].copy_from_slice(prefix);
                prefix.len()
            }
        };
        bytes[prefix_len..prefix_len + KEY_BYTES].copy_from_slice(&logical);
        WireKey {
            bytes,
            len: prefix_len + KEY_BYTES,
            logical,
        }
    }

    /// Picks the next operation and key uniformly over the key space.
    pub fn next(&self, rng: &mut Rng) -> (Op, u64) {
        let op = if rng.next_f64() < self.get_ratio {
            Op::Get
        } else {
            Op::Set
        };
        (op, rng.next_u64() % self.keys)
    }
}

/// `{"n":0,"name":"sluice","pad":"abc…"}`, padded to `bytes` when that is longer.
fn json_document(bytes: usize) -> Vec<u8> {
    let head = br#"{"n":0,"name":"sluice","pad":""#;
    let tail = br#""}"#;
    let pad = bytes.saturating_sub(head.len() + tail.len());
    let mut v = head.to_vec();
    v.extend((0..pad).map(|i| b'a' + (i % 26) as u8));
    v.extend_from_slice(tail);
    v
}

/// Key `i` as `sluice:` followed by zero-padded decimal digits, 32 bytes in all.
pub fn key(i: u64) -> Key {
    let mut k = [b'0'; KEY_BYTES];
    k[..KEY_PREFIX.len()].copy_from_slice(KEY_PREFIX);
    let mut n = i;
    let mut pos = KEY_BYTES;
    while n > 0 && pos > KEY_PREFIX.len() {
        pos -= 1;
        k[pos] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    k
}

/// The `i` of a key made by [`key`]; `None` for any other key.
pub fn key_index(k: &[u8]) -> Option<u64> {
    let digits = k.strip_prefix(KEY_PREFIX)?;
    if k.len() != KEY_BYTES {
        return None;
    }
    digits.iter().try_fold(0u64, |n, d| {
        d.is_ascii_digit()
            .then(|| n.checked_mul(10)?.checked_add(u64::from(d - b'0')))
            .flatten()
    })
}

/// xorshift64*: not cryptographic, just fast and seedable.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // A zero state would stay zero; splitmix the seed so nearby seeds diverge at once.
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_documents_have_the_size_and_the_fields() {
        for bytes in [1, 64, 1024] {
            let w = Workload::with_mix(1, 0.5, bytes, Mix::Subdoc);
            let v: serde_json::Value = serde_json::from_slice(&w.value).unwrap();
            assert_eq!(v["n"], 0);
            assert_eq!(v["name"], "sluice");
            assert_eq!(w.value.len(), bytes.max(32), "{bytes}");
        }
    }

    #[test]
    fn keys_are_32_bytes_distinct_and_readable() {
        assert_eq!(&key(0), b"sluice:0000000000000000000000000");
        assert_eq!(&key(42), b"sluice:0000000000000000000000042");
        assert_eq!(key(u64::MAX).len(), KEY_BYTES);
        assert_ne!(key(1), key(10));
    }

    #[test]
    fn key_index_inverts_key() {
        for i in [0, 7, 42, 999_999, 123_456_789_012] {
            assert_eq!(key_index(&key(i)), Some(i));
        }
        assert_eq!(key_index(b"sluice:12"), None);
        assert_eq!(key_index(b"other:0000000000000000000000042"), None);
        assert_eq!(key_index(b"sluice:00000000000000000000000x2"), None);
    }

    #[test]
    fn the_mix_follows_the_get_ratio() {
        let w = Workload::new(1000, 0.9, 16);
        let mut rng = Rng::new(7);
        let gets = (0..100_000)
            .filter(|_| w.next(&mut rng).0 == Op::Get)
            .count();
        assert!((89_000..91_000).contains(&gets), "{gets}");
        let all_sets = Workload::new(10, 0.0, 16);
        assert!((0..1000).all(|_| all_sets.next(&mut rng).0 == Op::Set));
        let all_gets = Workload::new(10, 1.0, 16);
        assert!((0..1000).all(|_| all_gets.next(&mut rng).0 == Op::Get));
    }

    #[test]
    fn keys_cover_the_space_and_seeds_differ() {
        let w = Workload::new(8, 0.5, 16);
        let mut rng = Rng::new(1);
        let mut seen = [false; 8];
        for _ in 0..1000 {
            seen[w.next(&mut rng).1 as usize] = true;
        }
        assert!(seen.iter().all(|s| *s));
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
        assert_eq!(w.value.len(), 16);
    }
}
