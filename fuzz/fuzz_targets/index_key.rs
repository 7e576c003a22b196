//! The secondary-index key decoder (`sluice_query::index_key`) on arbitrary bytes. Checks:
//! never a panic; the decoder accepts only canonical encodings, so an accepted entry
//! re-encodes to exactly the input bytes; and, splitting the input in two at a position
//! its first two bytes choose, when both halves decode, their byte order is the order of
//! their tuples (collation element by element, then the document key).
#![no_main]

use std::cmp::Ordering;

use libfuzzer_sys::fuzz_target;
use sluice_query::index_key::{decode_key, decode_value, encode_key, encode_value};
use sluice_query::{collate, Value};

fn roundtrip(bytes: &[u8]) -> Option<(Vec<Value>, Vec<u8>)> {
    let (values, doc) = decode_key(bytes).ok()?;
    let again = encode_key(&values, &doc);
    assert_eq!(again.as_deref(), Ok(bytes), "{values:?} {doc:02x?}");
    Some((values, doc))
}

fn tuple_order(a: &(Vec<Value>, Vec<u8>), b: &(Vec<Value>, Vec<u8>)) -> Ordering {
    for (x, y) in a.0.iter().zip(&b.0) {
        let c = collate(x, y);
        if c != Ordering::Equal {
            return c;
        }
    }
    // Same-arity tuples in an index; a shorter one is a prefix and sorts first (its
    // document-key marker 0x01 is below every tag).
    a.0.len().cmp(&b.0.len()).then_with(|| a.1.cmp(&b.1))
}

fuzz_target!(|data: &[u8]| {
    roundtrip(data);

    // A single value, as `encode_value` writes it.
    if let Ok(v) = decode_value(data) {
        let mut again = Vec::new();
        assert_eq!(encode_value(&v, &mut again), Ok(()));
        assert_eq!(again, data, "{v:?}");
    }

    if data.len() < 2 {
        return;
    }
    let rest = &data[2..];
    let split = usize::from(u16::from_be_bytes([data[0], data[1]])) % (rest.len() + 1);
    let (left, right) = rest.split_at(split);
    if let (Some(a), Some(b)) = (roundtrip(left), roundtrip(right)) {
        assert_eq!(left.cmp(right), tuple_order(&a, &b), "{a:?} vs {b:?}");
    }
});
