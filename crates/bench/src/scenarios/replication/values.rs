//! The documents `bench replication` writes: JSON objects of exactly the configured value
//! size, so that an index on them has entries (the views columns' indexes are on `f0`,
//! `f1`, …), the same bytes on every target (Redis stores them as opaque strings):
//!
//! `{"f0":41234,"f1":907,…,"f15":5521,"pad":"vvvv…"}`
//!
//! Each field is a number below [`FIELD_VALUES`] that differs from write to write (a mix of
//! the write's slot, the field and the step's salt); `pad` fills the rest. A latency
//! sample's document starts with its number (`{"s":17,"f0":…`), so that every sample's
//! value differs from every other's. Sizes below [`EXACT_FROM`] bytes cannot hold the
//! skeleton and come out a little longer.

use bytes::Bytes;
use std::io::Write;

/// Indexed fields at most (`f0` … `f15`; one per index of a `views:16` column).
pub const FIELDS_MAX: usize = 16;
/// Each field's values are `0..FIELD_VALUES`: a point query on one field matches
/// about items / FIELD_VALUES documents.
pub const FIELD_VALUES: u64 = 100_000;
/// Room kept for a sample's number (`"s":18446744073709551615,`).
const SAMPLE_ROOM: usize = 26;
/// `{` + `"pad":"` + `"}`.
const SKELETON: usize = 1 + 7 + 2;
/// The smallest size every document comes out exactly at.
pub const EXACT_FROM: usize = SKELETON + SAMPLE_ROOM;

/// Bytes field `i` takes at most: `"f{i}":99999,`.
fn field_room(i: usize) -> usize {
    format!("\"f{i}\":,").len() + (FIELD_VALUES - 1).to_string().len()
}

/// Fields that fit, with their worst-case widths, in a document of `len` bytes.
pub fn fields_fitting(len: usize) -> usize {
    let mut used = SKELETON + SAMPLE_ROOM;
    let mut n = 0;
    while n < FIELDS_MAX && used + field_room(n) <= len {
        used += field_room(n);
        n += 1;
    }
    n
}

/// The smallest value size whose documents hold `fields` fields.
pub fn bytes_for_fields(fields: usize) -> usize {
    SKELETON + SAMPLE_ROOM + (0..fields).map(field_room).sum::<usize>()
}

/// splitmix64's finalizer: a cheap, well-spread mix.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Makes the documents of one series of writes (a prefill, a step's load, its samples).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Docs {
    /// Every document's size in bytes.
    pub len: usize,
    /// Mixed into every field: two series with different salts write different fields.
    pub salt: u64,
    fields: usize,
}

impl Docs {
    pub fn new(len: usize, salt: u64) -> Docs {
        Docs {
            len,
            salt,
            fields: fields_fitting(len),
        }
    }

    /// The same sizes, other field values.
    pub fn salted(self, salt: u64) -> Docs {
        Docs { salt, ..self }
    }

    /// Fields each document carries (`f0` … `f{n-1}`).
    pub fn fields(&self) -> usize {
        self.fields
    }

    /// Field `i`'s value in write `n`.
    pub fn field(&self, n: u64, i: usize) -> u64 {
        mix(self.salt ^ mix(n.wrapping_mul(FIELDS_MAX as u64) + i as u64)) % FIELD_VALUES
    }

    /// The document of write `n`.
    pub fn doc(&self, n: u64) -> Bytes {
        self.build(None, n)
    }

    /// Latency sample `n`'s document: its number first, so that no two samples' values are
    /// equal.
    pub fn sample(&self, n: u64) -> Bytes {
        self.build(Some(n), n)
    }

    fn build(&self, sample: Option<u64>, n: u64) -> Bytes {
        let mut v = Vec::with_capacity(self.len.max(EXACT_FROM));
        v.push(b'{');
        if let Some(s) = sample {
            write!(v, "\"s\":{s},").expect("writing to a Vec");
        }
        for i in 0..self.fields {
            write!(v, "\"f{i}\":{},", self.field(n, i)).expect("writing to a Vec");
        }
        v.extend_from_slice(b"\"pad\":\"");
        let pad = self.len.saturating_sub(v.len() + 2);
        v.resize(v.len() + pad, b'v');
        v.extend_from_slice(b"\"}");
        Bytes::from(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &[u8]) -> serde_json::Map<String, serde_json::Value> {
        match serde_json::from_slice(v).expect("valid JSON") {
            serde_json::Value::Object(m) => m,
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn documents_are_json_of_exactly_the_value_size() {
        for len in [EXACT_FROM, 64, 100, 200, 256, 300, 1000, 1024, 4096, 20_000] {
            let docs = Docs::new(len, 7);
            for n in [0, 1, 2, 99, 12_345_678, u64::MAX] {
                for v in [docs.doc(n), docs.sample(n)] {
                    assert_eq!(v.len(), len, "len {len}, write {n}");
                    let m = parse(&v);
                    assert!(m["pad"].as_str().unwrap().bytes().all(|b| b == b'v'));
                    for i in 0..docs.fields() {
                        let f = m[&format!("f{i}")].as_u64().unwrap();
                        assert_eq!(f, docs.field(n, i));
                        assert!(f < FIELD_VALUES);
                    }
                }
            }
        }
    }

    #[test]
    fn one_kilobyte_holds_every_field_and_small_values_fewer() {
        assert_eq!(Docs::new(1024, 0).fields(), FIELDS_MAX);
        assert_eq!(
            Docs::new(bytes_for_fields(FIELDS_MAX), 0).fields(),
            FIELDS_MAX
        );
        assert_eq!(Docs::new(bytes_for_fields(5), 0).fields(), 5);
        assert_eq!(Docs::new(bytes_for_fields(5) - 1, 0).fields(), 4);
        assert_eq!(Docs::new(EXACT_FROM, 0).fields(), 0);
        // Below the skeleton: still JSON, a little longer than asked.
        let tiny = Docs::new(4, 0).doc(3);
        assert!(tiny.len() > 4);
        parse(&tiny);
    }

    #[test]
    fn samples_start_with_their_number_and_all_differ() {
        let docs = Docs::new(1024, 3);
        let s = docs.sample(42);
        assert!(s.starts_with(b"{\"s\":42,"), "{:?}", &s[..16]);
        assert_eq!(parse(&s)["s"], 42);
        let all: std::collections::HashSet<Bytes> = (0..1000).map(|n| docs.sample(n)).collect();
        assert_eq!(all.len(), 1000);
    }

    #[test]
    fn fields_vary_per_write_and_per_salt() {
        let a = Docs::new(1024, 1);
        let b = a.salted(2);
        assert_eq!(b.len, 1024);
        let distinct: std::collections::HashSet<u64> = (0..1000).map(|n| a.field(n, 0)).collect();
        assert!(distinct.len() > 950, "{}", distinct.len());
        assert_ne!(a.doc(5), a.doc(6));
        assert_ne!(a.doc(5), b.doc(5));
        assert_eq!(a.doc(5), Docs::new(1024, 1).doc(5), "deterministic");
        assert_ne!(a.field(5, 0), a.field(5, 1));
    }
}
