//! Which changes a replication sends: its filter (`sluice_query::xdcr_filter`) and its
//! deletion settings, applied to one change from the source's DCP stream. Pure.
//!
//! - A mutation is judged on its key, its body (when JSON; a binary body reads as MISSING)
//!   and its extended attributes; only what the filter reads is decoded.
//! - A deletion or an expiration has no body. `filterDeletion` / `filterExpiration` drop
//!   them all. Otherwise a filter that reads only the key judges them as it judges the
//!   key's mutations (so a key filter keeps its deletions, as it always did), and a filter
//!   that reads the body or xattrs cannot judge them: they are sent, as Couchbase sends
//!   tombstones past body filters. (Couchbase 8 adds an option to judge them by key only;
//!   Sluice does that whenever it can.)

use serde_json::{Map, Value as J};
use sluice_client::dcp::DcpItem;
use sluice_cluster::metadata::ReplicationSettings;
use sluice_query::xdcr_filter::{Filter, Subject};
use sluice_subdoc::Xattrs;
use sluice_types::Datatype;

/// What the source's stream said happened to a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Set,
    Delete,
    Expire,
}

/// Whether the change of `key` (the key without its collection prefix) is sent.
pub fn sends(
    filter: Option<&Filter>,
    settings: &ReplicationSettings,
    key: &[u8],
    item: &DcpItem,
    change: Change,
) -> bool {
    match change {
        Change::Delete if settings.filter_deletion => return false,
        Change::Expire if settings.filter_expiration => return false,
        _ => {}
    }
    let Some(filter) = filter else {
        return true;
    };
    let key = std::str::from_utf8(key).ok();
    let reads = filter.reads();
    if change != Change::Set {
        return !reads.key_only()
            || filter.matches(&Subject {
                key,
                ..Subject::default()
            });
    }
    let (xattrs, body) = split(item);
    let body = if reads.body {
        body.filter(|_| item.datatype.0 & Datatype::JSON != 0)
            .and_then(|b| serde_json::from_slice::<J>(b).ok())
    } else {
        None
    };
    let xattrs = if reads.xattrs {
        xattrs
            .and_then(|section| Xattrs::decode(section).ok())
            .map(xattrs_json)
    } else {
        None
    };
    filter.matches(&Subject {
        key,
        body: body.as_ref(),
        xattrs: xattrs.as_ref(),
    })
}

/// The value's xattr section (if it has one) and its body, as bytes: each is decoded only
/// if the filter reads it. `None` for a body that cannot be read (compressed, or a
/// malformed section).
fn split(item: &DcpItem) -> (Option<&[u8]>, Option<&[u8]>) {
    let datatype = item.datatype.0;
    if datatype & Datatype::SNAPPY != 0 {
        return (None, None);
    }
    if datatype & Datatype::XATTR == 0 {
        return (None, Some(&item.value));
    }
    match sluice_subdoc::xattr::body_offset(&item.value) {
        Ok(at) => (Some(&item.value[..at]), Some(&item.value[at..])),
        Err(_) => (None, None),
    }
}

/// The extended attributes as one JSON object; an attribute whose value is not JSON is
/// left out.
fn xattrs_json(x: Xattrs) -> J {
    let mut map = Map::new();
    for name in x.keys() {
        if let Some(v) = x.get(name).and_then(|v| serde_json::from_slice(v).ok()) {
            map.insert(name.to_string(), v);
        }
    }
    J::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use sluice_types::{Cas, Seqno, VbId};

    fn item(value: Vec<u8>, datatype: u8) -> DcpItem {
        DcpItem {
            vb: VbId(1),
            key: Bytes::from_static(b"k"),
            value: Bytes::from(value),
            cas: Cas(1),
            seqno: Seqno(1),
            rev_seqno: 1,
            flags: 0,
            expiry: 0,
            datatype: Datatype(datatype),
            delete_time: None,
        }
    }

    fn with_xattrs(body: &[u8]) -> Vec<u8> {
        let mut v = sluice_subdoc::xattr::encode_pairs([
            (&b"color"[..], &b"\"blue\""[..]),
            (&b"_sync"[..], &b"{\"rev\":3}"[..]),
        ]);
        v.extend_from_slice(body);
        v
    }

    fn f(text: &str) -> Filter {
        Filter::compile(text).unwrap()
    }

    const ALL: ReplicationSettings = ReplicationSettings {
        filter_deletion: false,
        filter_expiration: false,
        bypass_expiry: false,
        optimistic_threshold: 256,
    };

    #[test]
    fn mutations_are_judged_on_key_body_and_xattrs() {
        let json = Datatype::JSON;
        let doc = item(br#"{"type":"hotel","n":3}"#.to_vec(), json);
        let cases: &[(&str, &[u8], &DcpItem, bool)] = &[
            (r#"type = "hotel""#, b"h1", &doc, true),
            (r#"type = "airline""#, b"h1", &doc, false),
            (
                r#"type = "hotel" AND REGEXP_CONTAINS(META().id, "^h")"#,
                b"h1",
                &doc,
                true,
            ),
            (
                r#"type = "hotel" AND REGEXP_CONTAINS(META().id, "^x")"#,
                b"h1",
                &doc,
                false,
            ),
            ("^h", b"h1", &doc, true),
            ("^h", b"x1", &doc, false),
            // A key that is not UTF-8 matches no key filter.
            ("^h", b"h\xff", &doc, false),
        ];
        for (filter, key, item, want) in cases {
            assert_eq!(
                sends(Some(&f(filter)), &ALL, key, item, Change::Set),
                *want,
                "{filter}"
            );
        }
        let with = item(with_xattrs(br#"{"type":"hotel"}"#), json | Datatype::XATTR);
        assert!(sends(
            Some(&f(r#"META().xattrs.color = "blue""#)),
            &ALL,
            b"k",
            &with,
            Change::Set
        ));
        assert!(sends(
            Some(&f("META().xattrs._sync.rev = 3")),
            &ALL,
            b"k",
            &with,
            Change::Set
        ));
        assert!(sends(
            Some(&f(r#"type = "hotel""#)),
            &ALL,
            b"k",
            &with,
            Change::Set
        ));
        // The xattrs are not part of the body, nor the body of the xattrs.
        assert!(!sends(
            Some(&f("EXISTS(color)")),
            &ALL,
            b"k",
            &with,
            Change::Set
        ));
        assert!(!sends(
            Some(&f("EXISTS(META().xattrs.type)")),
            &ALL,
            b"k",
            &with,
            Change::Set
        ));
        // A body that is not JSON reads as MISSING.
        let binary = item(br#"{"type":"hotel"}"#.to_vec(), 0);
        assert!(!sends(
            Some(&f(r#"type = "hotel""#)),
            &ALL,
            b"k",
            &binary,
            Change::Set
        ));
        assert!(sends(
            Some(&f("type IS MISSING")),
            &ALL,
            b"k",
            &binary,
            Change::Set
        ));
        // No filter: everything.
        assert!(sends(None, &ALL, b"k", &binary, Change::Set));
    }

    #[test]
    fn deletions_and_expirations() {
        let gone = item(Vec::new(), 0);
        let key_filter = f("^keep");
        let body_filter = f(r#"type = "hotel""#);
        for change in [Change::Delete, Change::Expire] {
            assert!(sends(Some(&key_filter), &ALL, b"keep-1", &gone, change));
            assert!(!sends(Some(&key_filter), &ALL, b"drop-1", &gone, change));
            // A body filter cannot judge a tombstone: it is sent.
            assert!(sends(Some(&body_filter), &ALL, b"drop-1", &gone, change));
            assert!(sends(None, &ALL, b"k", &gone, change));
        }
        let no_deletes = ReplicationSettings {
            filter_deletion: true,
            ..ALL
        };
        assert!(!sends(None, &no_deletes, b"k", &gone, Change::Delete));
        assert!(sends(None, &no_deletes, b"k", &gone, Change::Expire));
        let no_expiries = ReplicationSettings {
            filter_expiration: true,
            ..ALL
        };
        assert!(sends(None, &no_expiries, b"k", &gone, Change::Delete));
        assert!(!sends(None, &no_expiries, b"k", &gone, Change::Expire));
        assert!(sends(
            None,
            &no_expiries,
            b"k",
            &item(b"1".to_vec(), 0),
            Change::Set
        ));
    }
}
