//! What collections add to the parsers, on arbitrary bytes: the collection-qualified key
//! (`split_key`: LEB128 prefix, canonical form), a vbucket's scope and collection records
//! (`SystemEvent::decode`) and a DCP stream request's filter (`FilterRequest::parse`).
//! Checks: never a panic; a key that splits re-encodes to the same bytes; a record that
//! decodes encodes back to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_dcp::filter::FilterRequest;
use sluice_types::collection::{split_key, LEB128_BYTES_MAX};
use sluice_types::system_event::SystemEvent;

fuzz_target!(|data: &[u8]| {
    if let Ok((cid, logical)) = split_key(data) {
        let mut buf = [0; LEB128_BYTES_MAX];
        let mut again = cid.encode(&mut buf).to_vec();
        again.extend_from_slice(logical);
        assert_eq!(again, data);
    }
    let (key, value) = data.split_at(data.len().min(4));
    if let Some(record) = SystemEvent::decode(key, value) {
        assert_eq!(record.encode(), value);
    }
    let _ = FilterRequest::parse(data);
});
