//! A snapshot held while the store is rewritten heavily (flushes, compactions) still scans
//! every record it held.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line
use crate::common;

use common::*;
use sluice_storage::{FlushBatch, Store};
use sluice_types::{Seqno, VbId};

#[test]
fn a_long_held_snapshot_survives_heavy_rewrites() {
    let (_dir, store) = temp_store();
    let keys = 20_000u64;
    let mut seqno = 0u64;
    let val = "x".repeat(600);
    for chunk in 0..(keys / 1000) {
        let items = (0..1000)
            .map(|i| {
                seqno += 1;
                item(0, &format!("k{}", chunk * 1000 + i), seqno, &val)
            })
            .collect();
        store
            .commit(&FlushBatch {
                items,
                vb_meta: vec![(VbId(0), vb_meta(seqno))],
                ..FlushBatch::default()
            })
            .unwrap();
    }
    let snap = store.snapshot();
    let end = snap.high_seqno(VbId(0)).unwrap();
    assert_eq!(end, Seqno(seqno));
    // Rewrite every key several times: old by_seqno entries are removed, compactions run.
    for round in 0..6 {
        for chunk in 0..(keys / 1000) {
            let items = (0..1000)
                .map(|i| {
                    seqno += 1;
                    item(
                        0,
                        &format!("k{}", (chunk * 1000 + i * 7 + round) % keys),
                        seqno,
                        &val,
                    )
                })
                .collect();
            store
                .commit(&FlushBatch {
                    items,
                    vb_meta: vec![(VbId(0), vb_meta(seqno))],
                    ..FlushBatch::default()
                })
                .unwrap();
        }
    }
    let seen: Vec<_> = snap
        .scan_seqnos(VbId(0), Seqno(0), end)
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(seen.len() as u64, keys, "every record the snapshot held");
}
