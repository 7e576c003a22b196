//! XDCR filtering expressions (`sluice_query::xdcr_filter`) on arbitrary bytes. Checks:
//! compiling never panics, and an accepted filter is evaluated against a few fixed changes
//! (a JSON body with xattrs, a body that is not an object, a deletion with only its key, a
//! change with nothing readable) without a panic; a filter that reads only the key judges
//! the same key the same way whatever else the change carries.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_query::serde_json::json;
use sluice_query::xdcr_filter::{Filter, Subject};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(filter) = Filter::compile(text) else {
        return;
    };
    let body = json!({"a": 1, "b": "x", "c": [1, 2, {"d": null}], "e": {"f": true},
                      "g": "2019-01-25T18:40:37Z", "h": -2.5});
    let scalar = json!("not an object");
    let xattrs = json!({"color": "blue", "_sync": {"rev": 3}});
    let full = Subject {
        key: Some("order::42"),
        body: Some(&body),
        xattrs: Some(&xattrs),
    };
    let judged = filter.matches(&full);
    let _ = filter.matches(&Subject {
        key: Some("k"),
        body: Some(&scalar),
        xattrs: None,
    });
    let bare = filter.matches(&Subject {
        key: Some("order::42"),
        ..Subject::default()
    });
    let _ = filter.matches(&Subject::default());
    if filter.reads().key_only() {
        assert_eq!(judged, bare, "{text:?} reads only the key");
    }
});
