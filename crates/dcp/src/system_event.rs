//! A vbucket's scope or collection record (`sluice_types::system_event`) as the
//! DCP_SYSTEM_EVENT a collection-aware consumer receives (protocol.md §4.4): event 0 makes
//! a collection (version 1 when it has a maxTTL), 1 drops one, 3 makes a scope, 4 drops
//! one; the key is the name of what was made, empty for a drop.

use bytes::Bytes;
use sluice_proto::dcp::message::DcpSystemEvent;
use sluice_types::system_event::SystemEvent;
use sluice_types::Seqno;

const CREATE_COLLECTION: u32 = 0;
const DROP_COLLECTION: u32 = 1;
const CREATE_SCOPE: u32 = 3;
const DROP_SCOPE: u32 = 4;

pub fn to_dcp(seqno: Seqno, record: &SystemEvent) -> DcpSystemEvent {
    let mut value = Vec::with_capacity(20);
    let (event, version, key) = match record {
        SystemEvent::Collection {
            dropped,
            manifest_uid,
            scope,
            collection,
            max_ttl_s,
            name,
        } => {
            value.extend_from_slice(&manifest_uid.to_be_bytes());
            value.extend_from_slice(&scope.to_be_bytes());
            value.extend_from_slice(&collection.to_be_bytes());
            match dropped {
                true => (DROP_COLLECTION, 0, Bytes::new()),
                false if *max_ttl_s > 0 => {
                    value.extend_from_slice(&max_ttl_s.to_be_bytes());
                    (CREATE_COLLECTION, 1, Bytes::from(name.clone()))
                }
                false => (CREATE_COLLECTION, 0, Bytes::from(name.clone())),
            }
        }
        SystemEvent::Scope {
            dropped,
            manifest_uid,
            scope,
            name,
        } => {
            value.extend_from_slice(&manifest_uid.to_be_bytes());
            value.extend_from_slice(&scope.to_be_bytes());
            match dropped {
                true => (DROP_SCOPE, 0, Bytes::new()),
                false => (CREATE_SCOPE, 0, Bytes::from(name.clone())),
            }
        }
    };
    DcpSystemEvent {
        seqno,
        event,
        version,
        key,
        value: Bytes::from(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collection(dropped: bool, max_ttl_s: u32) -> SystemEvent {
        SystemEvent::Collection {
            dropped,
            manifest_uid: 2,
            scope: 8,
            collection: 9,
            max_ttl_s,
            name: b"hotel".to_vec(),
        }
    }

    fn scope(dropped: bool) -> SystemEvent {
        SystemEvent::Scope {
            dropped,
            manifest_uid: 1,
            scope: 8,
            name: b"inventory".to_vec(),
        }
    }

    #[test]
    fn records_become_the_events_couchbase_sends() {
        let e = to_dcp(Seqno(5), &collection(false, 0));
        assert_eq!((e.event, e.version, &e.key[..]), (0, 0, &b"hotel"[..]));
        assert_eq!(
            &e.value[..],
            &[0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 8, 0, 0, 0, 9]
        );
        let e = to_dcp(Seqno(5), &collection(false, 60));
        assert_eq!((e.event, e.version, e.value.len()), (0, 1, 20));
        let e = to_dcp(Seqno(6), &collection(true, 60));
        assert_eq!(
            (e.event, e.version, e.key.len(), e.value.len()),
            (1, 0, 0, 16)
        );
        let e = to_dcp(Seqno(1), &scope(false));
        assert_eq!(
            (e.event, &e.key[..], e.value.len()),
            (3, &b"inventory"[..], 12)
        );
        let e = to_dcp(Seqno(9), &scope(true));
        assert_eq!((e.event, e.key.len()), (4, 0));
    }
}
