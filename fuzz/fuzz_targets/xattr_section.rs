//! The xattr section decoder (`sluice_subdoc::Xattrs::decode`) on arbitrary bytes. Checks:
//! never a panic; what it accepts re-encodes to a section that decodes the same (values
//! lose only the whitespace around them), and survives the trip through the JSON object
//! that sub-document paths work on.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_subdoc::Xattrs;

fuzz_target!(|data: &[u8]| {
    let _ = sluice_subdoc::xattr::body_offset(data);
    if let Ok(x) = Xattrs::decode(data) {
        if !x.is_empty() {
            assert_eq!(Xattrs::decode(&x.encode()).as_ref(), Ok(&x));
        }
        let again = Xattrs::from_document(&x.to_document());
        assert_eq!(again.as_ref(), Ok(&x));
    }
});
