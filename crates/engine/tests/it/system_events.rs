//! Each active vbucket records scope and collection changes in its own seqno order: a new
//! manifest writes the records it lacks, a drop rewrites them, a replica promoted to active
//! catches up, and the records are no documents (curr_items leaves them out).
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;
use common::*;
use sluice_engine::system_events::{collection_key, scope_key, SystemEvent};
use sluice_engine::{CollectionEntry, LiveCollections};
use sluice_types::{CollectionId, Seqno, VbId, VbState};

fn manifest(uid: u64, collections: &[(u32, &str)], next_id: u32) -> LiveCollections {
    let entry = |(id, name): &(u32, &str)| {
        let e = CollectionEntry {
            scope: 8,
            name: name.to_string(),
            max_ttl_s: 0,
        };
        (CollectionId(*id), e)
    };
    let scopes = [(0, "_default".to_string()), (8, "inventory".to_string())];
    LiveCollections::with_entries(uid, scopes, collections.iter().map(entry), next_id, 9)
}

/// The records of `vb` as a stream from seqno 0 reads them, in seqno order.
fn records(b: &sluice_engine::Bucket, vb: VbId) -> Vec<(Seqno, SystemEvent)> {
    stream_from_start(b, vb, |_| {})
        .iter()
        .filter_map(|i| SystemEvent::decode(&i.key, &i.value).map(|e| (i.meta.seqno, e)))
        .collect()
}

#[test]
fn active_vbuckets_record_creates_and_drops_in_seqno_order() {
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path(), config(64, 4));
    b.set_live_collections(manifest(1, &[(8, "airline"), (9, "hotel")], 10));
    for vb in 0..4 {
        let got = records(&b, VbId(vb));
        let names: Vec<(u64, bool)> = got.iter().map(|(s, e)| (s.0, e.is_dropped())).collect();
        assert_eq!(names, vec![(1, false), (2, false), (3, false)], "vb {vb}");
        assert!(
            matches!(&got[0].1, SystemEvent::Scope { scope: 8, name, .. } if name == b"inventory")
        );
        assert!(matches!(&got[2].1,
            SystemEvent::Collection { collection: 9, scope: 8, manifest_uid: 1, name, .. } if name == b"hotel"));
    }
    // The same manifest again writes nothing.
    b.set_live_collections(manifest(1, &[(8, "airline"), (9, "hotel")], 10));
    assert_eq!(b.vb_state_and_high(VbId(0)).unwrap().1, Seqno(3));

    b.set_live_collections(manifest(2, &[(9, "hotel")], 10));
    let got = records(&b, VbId(0));
    let last = got.last().unwrap();
    assert_eq!(last.0, Seqno(4));
    assert!(matches!(&last.1,
        SystemEvent::Collection { dropped: true, collection: 8, manifest_uid: 2, name, .. } if name == b"airline"));
    let gauges = b.gauges();
    let curr = gauges.iter().find(|(k, _)| *k == "curr_items").unwrap().1;
    assert_eq!(curr, 0, "records are not documents");
    b.shutdown().unwrap();
}

#[test]
fn a_replica_promoted_to_active_writes_the_records_it_missed() {
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path(), config(64, 2));
    b.set_vbucket_state(VbId(1), VbState::Replica).unwrap();
    b.set_live_collections(manifest(1, &[(8, "airline")], 9));
    assert_eq!(records(&b, VbId(0)).len(), 2);
    assert_eq!(
        b.vb_state_and_high(VbId(1)).unwrap().1,
        Seqno(0),
        "replicas write nothing"
    );
    b.set_vbucket_state(VbId(1), VbState::Active).unwrap();
    let got = records(&b, VbId(1));
    assert_eq!(got.len(), 2);
    assert_eq!(
        got[1].1,
        SystemEvent::Collection {
            dropped: false,
            manifest_uid: 1,
            scope: 8,
            collection: 8,
            max_ttl_s: 0,
            name: b"airline".to_vec()
        }
    );
    // Records survive a restart (warmup keeps them in memory): nothing is written twice.
    b.shutdown().unwrap();
    drop(b);
    let b = open(dir.path(), config(64, 2));
    b.set_live_collections(manifest(1, &[(8, "airline")], 9));
    assert_eq!(b.vb_state_and_high(VbId(1)).unwrap().1, Seqno(2));
    assert!(b.get(VbId(0), &collection_key(CollectionId(8))).is_ok());
    assert!(b.get(VbId(0), &scope_key(8)).is_ok());
    b.shutdown().unwrap();
}
