//! `codec::decode_vb_meta` (the `vb_meta` value) on arbitrary bytes.
//!
//! Checks: never a panic (in particular not the `FailoverLog::from_entries` assertion on an
//! empty log), no allocation driven by a corrupt count, only `StoreError::Corrupt` on bad
//! input, every accepted log is non-empty with no uuid 0, and an exact roundtrip: whatever
//! decodes re-encodes with `encode_vb_meta` to the very same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_storage::codec::{decode_vb_meta, encode_vb_meta};
use sluice_storage::StoreError;

/// Fixed part of a version-1 vb_meta value, then 16 bytes per failover entry.
const VB_META_HEADER_LEN: usize = 30;
const FAILOVER_ENTRY_LEN: usize = 16;

fuzz_target!(|data: &[u8]| {
    match decode_vb_meta(data) {
        Ok(meta) => {
            let entries = meta.failover_log.entries();
            assert!(!entries.is_empty());
            assert!(entries.iter().all(|e| e.uuid.0 != 0));
            assert_eq!(
                data.len(),
                VB_META_HEADER_LEN + entries.len() * FAILOVER_ENTRY_LEN
            );
            assert_eq!(
                encode_vb_meta(&meta),
                data,
                "vb_meta does not re-encode to its bytes"
            );
        }
        Err(e) => assert!(matches!(e, StoreError::Corrupt(_)), "{e:?}"),
    }
});
