//! A dropped collection's documents leave memory and disk in the background, and nothing of
//! them comes back at warmup; the other collections' documents stay. Also: a store written
//! before collections is refused rather than misread.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;
use common::*;
use sluice_engine::{CollectionEntry, LiveCollections};
use sluice_types::CollectionId;
use std::time::{Duration, Instant};

fn qualified(cid: u32, i: usize) -> Vec<u8> {
    let mut k = CollectionId(cid).prefix();
    k.extend_from_slice(&key(i));
    k
}

/// A manifest (uid `uid`) with scope `s` (8) holding collections `ids` besides `_default`.
fn live(uid: u64, ids: &[u32], next_id: u32) -> LiveCollections {
    let entry = |id: &u32| {
        let e = CollectionEntry {
            scope: if *id == 0 { 0 } else { 8 },
            name: format!("c{id}"),
            max_ttl_s: 0,
        };
        (CollectionId(*id), e)
    };
    let scopes = [(0, "_default".to_string()), (8, "s".to_string())];
    LiveCollections::with_entries(uid, scopes, ids.iter().map(entry), next_id, 9)
}

fn curr_items(b: &sluice_engine::Bucket) -> u64 {
    let gauges = b.gauges();
    gauges
        .iter()
        .find(|(k, _)| *k == "curr_items")
        .map(|(_, v)| *v)
        .unwrap()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_dropped_collection_leaves_memory_and_disk_and_stays_gone() {
    let dir = tempfile::tempdir().unwrap();
    let n = 300;
    {
        let b = open(dir.path(), config(64, 8));
        b.set_live_collections(live(1, &[0, 8, 9], 10));
        let mut last = Vec::new();
        for i in 0..n {
            for cid in [0, 8, 9] {
                let k = qualified(cid, i);
                last.push((vb(&b, &k), set(&b, &k, b"v").seqno));
            }
        }
        for (vbid, seqno) in last {
            assert!(b
                .wait_persisted(vbid, seqno, Duration::from_secs(10))
                .unwrap());
        }
        let items = b.collection_items();
        assert_eq!(items.get(&CollectionId(8)), Some(&(n as u64)));
        assert_eq!(items.get(&CollectionId::DEFAULT), Some(&(n as u64)));
        assert_eq!(
            items.get(&CollectionId::SYSTEM),
            None,
            "records are no documents"
        );
        assert_eq!(curr_items(&b), 3 * n as u64);
        // Each collection's entries take memory: the same keys and values, the same bytes.
        let usage = b.collection_usage();
        let mem = |cid| usage.get(&CollectionId(cid)).map(|u| u.mem_bytes);
        assert!(mem(8).unwrap() > (n * 3) as u64, "{usage:?}");
        assert_eq!(mem(8), mem(9));

        // Collection 8 is dropped.
        b.set_live_collections(live(2, &[0, 9], 10));
        wait_until("collection 8 has left memory", || {
            !b.collection_items().contains_key(&CollectionId(8))
        });
        wait_until("collection 8 takes no memory", || {
            !b.collection_usage().contains_key(&CollectionId(8))
        });
        assert_eq!(get(&b, &qualified(8, 1)), None);
        assert_eq!(get(&b, &qualified(9, 1)), Some(b"v".to_vec()));
        assert_eq!(get(&b, &qualified(0, 1)), Some(b"v".to_vec()));
        wait_until("the sweep is done", || b.collection_sweep_done());
        // n entries from memory, n keys from disk.
        assert_eq!(b.stats.collection_items_swept.get(), 2 * n as u64);
        b.shutdown().unwrap();
    }
    // Warmup reads the disk alone (no live set yet): collection 8 is not there.
    let b = open(dir.path(), config(64, 8));
    let items = b.collection_items();
    assert_eq!(items.get(&CollectionId(8)), None, "{items:?}");
    assert_eq!(items.get(&CollectionId(9)), Some(&(n as u64)));
    assert_eq!(items.get(&CollectionId::DEFAULT), Some(&(n as u64)));
    b.shutdown().unwrap();
}

#[test]
fn changes_of_a_collection_dropped_before_they_were_flushed_never_reach_the_disk() {
    let dir = tempfile::tempdir().unwrap();
    {
        let b = open(dir.path(), config(64, 8));
        b.set_live_collections(live(1, &[0, 8], 9));
        // The write and the drop race the flusher: whichever comes first, the document
        // must not be on disk afterwards.
        let k = qualified(8, 7);
        let m = set(&b, &k, b"v");
        b.set_live_collections(live(2, &[0], 9));
        let k0 = qualified(0, 7);
        let kept = set(&b, &k0, b"v");
        for (key, seqno) in [(&k, m.seqno), (&k0, kept.seqno)] {
            assert!(b
                .wait_persisted(vb(&b, key), seqno, Duration::from_secs(10))
                .unwrap());
        }
        wait_until("the sweep is done", || b.collection_sweep_done());
        b.shutdown().unwrap();
    }
    let b = open(dir.path(), config(64, 8));
    assert_eq!(get(&b, &qualified(8, 7)), None);
    assert_eq!(get(&b, &qualified(0, 7)), Some(b"v".to_vec()));
    b.shutdown().unwrap();
}
