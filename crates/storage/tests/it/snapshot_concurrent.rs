//! Reads beside a writer that keeps rewriting keys, as DCP backfills and reads of evicted
//! values run beside the flusher: a snapshot scanned in chunks holds every key of a vbucket
//! exactly once and its high seqno never changes, and `get` always finds a key that exists.
//!
//! fjall can open a snapshot in the middle of a commit (a background flush moves the
//! visible seqno past a batch still being applied); without `consistent_snapshot` this test
//! sees scans short of whole batches within a few seconds.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line
use crate::common;

use common::*;
use sluice_storage::{FlushBatch, Store};
use sluice_types::{Seqno, VbId};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const VBS: u16 = 8;
const KEYS_PER_VB: u64 = 400;
/// Rewrites per vbucket per commit.
const REWRITES: u64 = 60;

/// Scans one vbucket's snapshot in chunks of `chunk` records, each from a new iterator (as
/// a backfill does), and checks it.
fn scan_once(store: &dyn Store, vb: VbId, chunk: usize) -> Result<(), String> {
    let snap = store.snapshot();
    let end = snap.high_seqno(vb).unwrap();
    let mut pos = Seqno(0);
    let mut keys = HashSet::new();
    let mut records = 0u64;
    loop {
        let got: Vec<_> = snap
            .scan_seqnos(vb, pos, end)
            .take(chunk)
            .collect::<Result<_, _>>()
            .unwrap();
        let Some(last) = got.last() else { break };
        pos = last.meta.seqno;
        records += got.len() as u64;
        keys.extend(got.into_iter().map(|r| r.key));
    }
    let end_again = snap.high_seqno(vb).unwrap();
    if records != KEYS_PER_VB || keys.len() as u64 != KEYS_PER_VB || end_again != end {
        return Err(format!(
            "{vb} snapshot at {end} (then {end_again}): {records} records, {} keys",
            keys.len()
        ));
    }
    Ok(())
}

fn get_once(store: &dyn Store, vb: VbId, key: u64) -> Result<(), String> {
    match store.get(vb, format!("k{key}").as_bytes()) {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(format!("{vb} k{key} not found")),
        Err(e) => Err(format!("{vb} k{key}: {e}")),
    }
}

fn commit_rewrites(store: &dyn Store, seqnos: &mut [u64], x: &mut u64, val: &str) {
    let mut batch = FlushBatch::default();
    for vb in 0..VBS {
        for _ in 0..REWRITES {
            *x ^= *x << 13;
            *x ^= *x >> 7;
            *x ^= *x << 17;
            seqnos[usize::from(vb)] += 1;
            let s = seqnos[usize::from(vb)];
            batch
                .items
                .push(item(vb, &format!("k{}", *x % KEYS_PER_VB), s, val));
        }
        batch
            .vb_meta
            .push((VbId(vb), vb_meta(seqnos[usize::from(vb)])));
    }
    store.commit(&batch).unwrap();
}

#[test]
fn reads_beside_a_writer_see_whole_commits() {
    let secs: u64 = std::env::var("SNAPSHOT_STRESS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let (_dir, store) = temp_store();
    let store: Arc<dyn Store> = Arc::new(store);
    let val = "v".repeat(4096);
    let mut seqnos = vec![0u64; usize::from(VBS)];
    for vb in 0..VBS {
        let items = (0..KEYS_PER_VB)
            .map(|k| item(vb, &format!("k{k}"), k + 1, &val))
            .collect();
        seqnos[usize::from(vb)] = KEYS_PER_VB;
        store
            .commit(&FlushBatch {
                items,
                vb_meta: vec![(VbId(vb), vb_meta(KEYS_PER_VB))],
                ..FlushBatch::default()
            })
            .unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (store, stop) = (store.clone(), stop.clone());
        std::thread::spawn(move || {
            let (mut x, mut commits) = (12345u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                commit_rewrites(store.as_ref(), &mut seqnos, &mut x, &val);
                commits += 1;
            }
            commits
        })
    };
    let deadline = Instant::now() + Duration::from_secs(secs);
    let readers: Vec<_> = (0..3u64)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                let (mut reads, mut failures) = (0u64, Vec::new());
                while Instant::now() < deadline {
                    let vb = VbId(((reads + t) % u64::from(VBS)) as u16);
                    // Two readers scan (chunks of 7 and 20 records); one reads keys.
                    let outcome = if t < 2 {
                        scan_once(store.as_ref(), vb, 7 + t as usize * 13)
                    } else {
                        (0..50).try_for_each(|k| {
                            get_once(store.as_ref(), vb, (reads + k) % KEYS_PER_VB)
                        })
                    };
                    failures.extend(outcome.err());
                    reads += 1;
                }
                (reads, failures)
            })
        })
        .collect();
    let (mut reads, mut failures) = (0, Vec::new());
    for r in readers {
        let (n, f) = r.join().unwrap();
        reads += n;
        failures.extend(f);
    }
    stop.store(true, Ordering::Relaxed);
    let commits = writer.join().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {reads} reads beside {commits} commits were wrong, e.g. {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
}
