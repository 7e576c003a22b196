//! `codec::decode_record` (the `by_seqno` value) on arbitrary bytes, plus the small key
//! decoders of the same codec (`decode_seqno_key`, `decode_seqno`, `decode_vb_key`).
//!
//! Checks: never a panic, only `StoreError::Corrupt` on bad input, and an exact roundtrip:
//! whatever decodes re-encodes with `encode_record_kind` to the very same bytes (the value is "the
//! rest of the record", so the encoding is canonical). The key decoders accept exactly the
//! lengths they document and their encoders reproduce the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_storage::codec::{
    decode_record, decode_seqno, decode_seqno_key, decode_vb_key, encode_record_kind,
    encode_seqno, seqno_key, vb_key,
};
use sluice_storage::{RecordKind, StoreError};

/// Bytes before the key in a version-1 record (see the layout in codec.rs).
const RECORD_HEADER_LEN: usize = 41;

fuzz_target!(|data: &[u8]| {
    match decode_record(data) {
        Ok(rec) => {
            // A prepare carries its level (1 byte), an abort its prepared seqno (8 bytes).
            let kind_len = match rec.kind {
                RecordKind::Committed => 0,
                RecordKind::Prepare(_) => 1,
                RecordKind::Abort { .. } => 8,
            };
            assert_eq!(
                data.len(),
                RECORD_HEADER_LEN + kind_len + rec.key.len() + rec.value.len()
            );
            let enc = encode_record_kind(&rec.key, &rec.meta, rec.kind, &rec.value)
                .expect("re-encode");
            assert_eq!(&enc[..], data, "record does not re-encode to its bytes");
        }
        Err(e) => assert!(matches!(e, StoreError::Corrupt(_)), "{e:?}"),
    }

    match decode_seqno_key(data) {
        Ok((vb, seqno)) => assert_eq!(seqno_key(vb, seqno)[..], data[..]),
        Err(e) => {
            assert!(matches!(e, StoreError::Corrupt(_)));
            assert_ne!(data.len(), 10);
        }
    }
    match decode_seqno(data) {
        Ok(seqno) => assert_eq!(encode_seqno(seqno)[..], data[..]),
        Err(_) => assert_ne!(data.len(), 8),
    }
    match decode_vb_key(data) {
        Ok(vb) => assert_eq!(vb_key(vb)[..], data[..]),
        Err(_) => assert_ne!(data.len(), 2),
    }
});
