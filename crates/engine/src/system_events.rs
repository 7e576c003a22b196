//! System events: each vbucket's record of the scopes and collections it has seen made and
//! dropped, written into its own seqno order so that DCP consumers (and replicas) learn of
//! a collection at the point in the stream where its documents begin or end.
//!
//! A record is a document of the system key space (collection 1, which no client can
//! name); its key and value are `sluice_types::system_event`'s.
//!
//! A drop rewrites the record (it never becomes a tombstone), so a vbucket always knows
//! what it announced; replication and backfill carry records like any document. Records
//! never leave memory (the pager skips them, warmup always loads them): reconciling a
//! vbucket with the manifest looks them up by key.
//!
//! An active vbucket is reconciled whenever the node learns a new manifest and whenever it
//! becomes active (a promoted replica may have missed some): every live scope and
//! collection without a live record gets one, every live record of a dropped one is
//! rewritten as dropped. Scopes are made before their collections and dropped after them.

use crate::collections::LiveCollections;
pub use sluice_types::system_event::{collection_key, is_system_key, scope_key, SystemEvent};
use sluice_types::CollectionId;

/// The records an active vbucket must write to agree with `live`, in the order to write
/// them, given `current(key)`: the record the vbucket holds under a key, if any.
pub fn reconcile(
    live: &LiveCollections,
    current: impl Fn(&[u8]) -> Option<SystemEvent>,
) -> Vec<(Vec<u8>, SystemEvent)> {
    let uid = live.manifest_uid();
    let mut out = Vec::new();
    let is_live = |key: &[u8]| current(key).is_some_and(|e| !e.is_dropped());
    for (sid, name) in live.scopes().filter(|(sid, _)| *sid != 0) {
        let key = scope_key(sid);
        if !is_live(&key) {
            let e = SystemEvent::Scope {
                dropped: false,
                manifest_uid: uid,
                scope: sid,
                name: name.as_bytes().to_vec(),
            };
            out.push((key, e));
        }
    }
    for (cid, c) in live
        .entries()
        .filter(|(cid, _)| *cid != CollectionId::DEFAULT)
    {
        let key = collection_key(cid);
        if !is_live(&key) {
            let e = SystemEvent::Collection {
                dropped: false,
                manifest_uid: uid,
                scope: c.scope,
                collection: cid.0,
                max_ttl_s: c.max_ttl_s,
                name: c.name.as_bytes().to_vec(),
            };
            out.push((key, e));
        }
    }
    for cid in live.dropped() {
        let key = collection_key(cid);
        if let Some(SystemEvent::Collection {
            dropped: false,
            scope,
            max_ttl_s,
            name,
            ..
        }) = current(&key)
        {
            let e = SystemEvent::Collection {
                dropped: true,
                manifest_uid: uid,
                scope,
                collection: cid.0,
                max_ttl_s,
                name,
            };
            out.push((key, e));
        }
    }
    for sid in live.dropped_scopes() {
        let key = scope_key(sid);
        if let Some(SystemEvent::Scope {
            dropped: false,
            name,
            ..
        }) = current(&key)
        {
            let e = SystemEvent::Scope {
                dropped: true,
                manifest_uid: uid,
                scope: sid,
                name,
            };
            out.push((key, e));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collections::CollectionEntry;
    use std::collections::BTreeMap;

    fn live(
        collections: &[(u32, u32, &str)],
        scopes: &[(u32, &str)],
        next: (u32, u32),
    ) -> LiveCollections {
        LiveCollections::with_entries(
            7,
            scopes.iter().map(|(s, n)| (*s, n.to_string())),
            collections.iter().map(|(c, s, n)| {
                (
                    CollectionId(*c),
                    CollectionEntry {
                        scope: *s,
                        name: n.to_string(),
                        max_ttl_s: 0,
                    },
                )
            }),
            next.0,
            next.1,
        )
    }

    #[test]
    fn reconcile_makes_scopes_first_and_drops_what_the_vbucket_announced() {
        let records: BTreeMap<Vec<u8>, SystemEvent> = BTreeMap::new();
        let now = live(
            &[(0, 0, "_default"), (8, 8, "a"), (9, 8, "b")],
            &[(0, "_default"), (8, "s")],
            (10, 9),
        );
        let writes = reconcile(&now, |k| records.get(k).cloned());
        let keys: Vec<Vec<u8>> = writes.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(
            keys,
            vec![
                scope_key(8),
                collection_key(CollectionId(8)),
                collection_key(CollectionId(9))
            ]
        );
        let records: BTreeMap<Vec<u8>, SystemEvent> = writes.into_iter().collect();
        assert!(
            reconcile(&now, |k| records.get(k).cloned()).is_empty(),
            "nothing twice"
        );

        // Scope s goes, with both its collections.
        let later = live(&[(0, 0, "_default")], &[(0, "_default")], (10, 9));
        let writes = reconcile(&later, |k| records.get(k).cloned());
        let keys: Vec<Vec<u8>> = writes.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(
            keys,
            vec![
                collection_key(CollectionId(8)),
                collection_key(CollectionId(9)),
                scope_key(8)
            ]
        );
        assert!(writes.iter().all(|(_, e)| e.is_dropped()));
        // A vbucket that never announced a collection announces no drop of it.
        assert!(reconcile(&later, |_| None).is_empty());
    }
}
