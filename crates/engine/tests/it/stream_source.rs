//! What DCP streams read from the engine, driven step by step: a backfill interleaved with
//! writes hands over to a cursor with no gap and no duplicate (both bucket types), and a
//! cursor that never reads is dropped when checkpoint memory runs short.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;
use common::*;

use sluice_engine::{Bucket, BucketConfig, BucketType, QueueOp, SystemClock};
use sluice_types::{Seqno, VbId};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

const VB: VbId = VbId(0);

/// Keys that all land in vbucket 0 of a one-vbucket bucket.
fn k(i: usize) -> Vec<u8> {
    format!("k{}", i % 40).into_bytes()
}

/// Streams vbucket 0 the way a producer does, calling `between` after every backfill chunk;
/// returns seqno → (key, value) as delivered.
fn stream_all(b: &Bucket, between: impl FnMut(usize)) -> BTreeMap<u64, (Vec<u8>, Vec<u8>)> {
    let items = stream_from_start(b, VB, between);
    let mut got = BTreeMap::new();
    for item in items {
        assert_eq!(item.op, QueueOp::Mutation);
        got.insert(item.meta.seqno.0, (item.key.to_vec(), item.value.to_vec()));
    }
    got
}

fn handover(b: Arc<Bucket>, persistent: bool) {
    let mut want: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
    for i in 0..300 {
        let v = format!("first-{i}").into_bytes();
        set(&b, &k(i), &v);
        want.insert(k(i), v);
    }
    if persistent {
        assert!(b
            .wait_persisted(VB, Seqno(300), Duration::from_secs(10))
            .unwrap());
        // The flusher frees what it persisted: memory no longer holds seqno 1.
        let deadline = Instant::now() + Duration::from_secs(5);
        while b.stream_cursor(VB, Seqno::ZERO).unwrap().is_some_and(|c| {
            b.release_stream_cursor(VB, c);
            true
        }) {
            assert!(Instant::now() < deadline, "checkpoints were freed");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let mut n = 300;
    let got = stream_all(&b, |step| {
        // Rewrite keys already sent and keys still ahead, between backfill chunks.
        for _ in 0..(7 + step % 5) {
            let v = format!("later-{n}").into_bytes();
            set(&b, &k(n * 7), &v);
            want.insert(k(n * 7), v);
            n += 1;
        }
    });
    let high = b.vb_seqnos(None)[0].1;
    assert_eq!(
        *got.keys().last().unwrap(),
        high.0,
        "streamed to the high seqno"
    );
    let mut last_of: HashMap<Vec<u8>, (u64, Vec<u8>)> = HashMap::new();
    for (seqno, (key, value)) in &got {
        last_of.insert(key.clone(), (*seqno, value.clone()));
    }
    assert_eq!(last_of.len(), want.len(), "every key arrived");
    for (key, v) in &want {
        assert_eq!(&last_of[key].1, v, "newest version of {key:?}");
    }
    assert!(n > 300, "writes happened during the backfill");
}

#[test]
fn couchbase_backfill_hands_over_to_a_cursor_without_gap_or_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    handover(open(dir.path(), config(64, 1)), true);
}

#[test]
fn ephemeral_backfill_hands_over_to_a_cursor_without_gap_or_duplicate() {
    let mut c = BucketConfig::new("default", BucketType::Ephemeral);
    c.quota_bytes = 64 << 20;
    c.num_vbuckets = 1;
    handover(Bucket::open(c, None, Arc::new(SystemClock)).unwrap(), false);
}

#[test]
fn a_cursor_that_never_reads_is_dropped_when_checkpoint_memory_runs_short() {
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path(), config(16, 1));
    let stuck = b
        .stream_cursor(VB, Seqno::ZERO)
        .unwrap()
        .expect("memory holds seqno 1");
    let value = vec![b'x'; 4096];
    // 16 MiB quota: the checkpoint budget is ~3.2 MiB; write far more than that.
    for i in 0..4000 {
        set(&b, format!("big{i}").as_bytes(), &value);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.read_stream_cursor(VB, stuck, 1).unwrap().is_some() {
        assert!(Instant::now() < deadline, "the stuck cursor was dropped");
        set(&b, b"nudge", &value);
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(b.stats.cursors_dropped.get() >= 1);
    let m = b.memory();
    assert!(
        m.checkpoint_bytes <= m.checkpoint_bytes_max,
        "checkpoint memory back within budget: {m:?}"
    );
    // The flusher's cursor is never dropped: everything was persisted.
    let high = b.vb_seqnos(None)[0].1;
    assert!(b.wait_persisted(VB, high, Duration::from_secs(10)).unwrap());
}
