//! HTTP Basic credentials as the admin port parses them (`parse_basic_header`), on arbitrary
//! header bytes. Checks: never a panic; what it accepts re-encodes (`basic_header`) to a
//! header that parses back to the same user and password; and every user name without a
//! colon, with any password, round-trips.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_sasl::{basic_header, parse_basic_header};

fuzz_target!(|data: &[u8]| {
    if let Some((user, password)) = parse_basic_header(data) {
        assert!(!user.contains(':'), "the user name ends at the first colon");
        let again = parse_basic_header(basic_header(&user, &password).as_bytes());
        assert_eq!(again, Some((user, password)));
    }
    // The same bytes as a user name and password, split at the first NUL.
    if let Ok(text) = std::str::from_utf8(data) {
        let (user, password) = text.split_once('\0').unwrap_or((text, ""));
        if !user.contains(':') {
            let parsed = parse_basic_header(basic_header(user, password).as_bytes());
            assert_eq!(parsed, Some((user.to_string(), password.to_string())));
        }
    }
});
