//! Decoding random, truncated or bit-flipped bytes returns an error (or a value), never panics.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line
use sluice_storage::{codec, RecordKind};
use sluice_types::{Cas, Datatype, DurabilityLevel, Expiry, ItemMeta, Seqno};

/// Bytes before the kind fields of a record (see the layout in codec.rs).
const RECORD_HEADER_LEN: usize = 41;

/// xorshift64*: deterministic, dependency-free, good enough to shake a decoder.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// A record kind, any of them, with its kind fields' length.
fn random_kind(rng: &mut Rng) -> (RecordKind, usize) {
    match rng.below(4) {
        0 => (RecordKind::Committed, 0),
        1 => {
            // 0 and 4 are no level: the encoder is never asked for those.
            let level = DurabilityLevel::from_wire(1 + rng.below(3) as u8).unwrap();
            (RecordKind::Prepare(level), 1)
        }
        _ => (
            RecordKind::Abort {
                prepared: Seqno(rng.next()),
            },
            8,
        ),
    }
}

/// What the fuzz target checks: whatever decodes re-encodes, with its kind, to the very same
/// bytes (the value is "the rest of the record", so the encoding is canonical).
fn decode_record_checked(bytes: &[u8]) {
    if let Ok(rec) = codec::decode_record(bytes) {
        let enc = codec::encode_record_kind(&rec.key, &rec.meta, rec.kind, &rec.value).unwrap();
        assert_eq!(&enc[..], bytes, "record does not re-encode to its bytes");
    }
}

fn decode_all(bytes: &[u8]) {
    decode_record_checked(bytes);
    let _ = codec::decode_vb_meta(bytes);
    let _ = codec::decode_seqno_key(bytes);
    let _ = codec::decode_seqno(bytes);
    let _ = codec::decode_vb_key(bytes);
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..20_000 {
        let len = rng.below(128);
        let mut bytes = rng.bytes(len);
        // Half the time, start with a valid version byte to get past the first check, and
        // then often with known record bits (any kind, deleted or not) to reach the kind
        // fields.
        if !bytes.is_empty() && rng.next() & 1 == 0 {
            bytes[0] = 1;
            if bytes.len() > 38 && rng.next() & 1 == 0 {
                bytes[38] = rng.below(8) as u8;
            }
        }
        decode_all(&bytes);
    }
}

#[test]
fn truncated_and_mutated_records_never_panic() {
    let mut rng = Rng(42);
    for _ in 0..2_000 {
        let key_len = rng.below(40);
        let key = rng.bytes(key_len);
        let value_len = rng.below(200);
        let value = rng.bytes(value_len);
        let meta = ItemMeta {
            seqno: Seqno(rng.next()),
            rev_seqno: rng.next(),
            cas: Cas(rng.next()),
            flags: rng.next() as u32,
            expiry: Expiry(rng.next() as u32),
            datatype: Datatype(rng.next() as u8 & Datatype::KNOWN),
            deleted: rng.next() & 1 == 0,
            delete_time: rng.next() as u32,
        };
        let (kind, kind_len) = random_kind(&mut rng);
        let enc = codec::encode_record_kind(&key, &meta, kind, &value)
            .expect("encode")
            .to_vec();
        let dec = codec::decode_record(&enc).expect("valid record decodes");
        assert_eq!(
            (&dec.key[..], dec.meta, &dec.value[..], dec.kind),
            (&key[..], meta, &value[..], kind)
        );
        assert_eq!(
            enc.len(),
            RECORD_HEADER_LEN + kind_len + key.len() + value.len()
        );

        // Any cut inside the header, the kind fields or the key is detected.
        let cut = rng.below(RECORD_HEADER_LEN + kind_len + key.len());
        assert!(codec::decode_record(&enc[..cut]).is_err(), "cut at {cut}");

        // Flipped bytes may decode to something else, but must not panic.
        let mut bad = enc.clone();
        for _ in 0..1 + rng.below(4) {
            let i = rng.below(bad.len());
            bad[i] ^= 1 << rng.below(8);
        }
        decode_all(&bad);
    }
}
