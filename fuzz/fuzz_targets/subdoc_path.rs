//! The sub-document path parser (`sluice_subdoc::Path::parse`) on arbitrary bytes. Checks:
//! never a panic; what it accepts stays within the limits; and its rendering parses back to
//! the same path.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_subdoc::{Path, PATH_BYTES_MAX, PATH_COMPONENTS_MAX};

fuzz_target!(|data: &[u8]| {
    if let Ok(path) = Path::parse(data) {
        assert!(data.len() <= PATH_BYTES_MAX);
        assert!(path.components().len() <= PATH_COMPONENTS_MAX);
        let again = Path::parse(path.to_string().as_bytes());
        assert_eq!(again.as_ref(), Ok(&path), "{path}");
    }
});
