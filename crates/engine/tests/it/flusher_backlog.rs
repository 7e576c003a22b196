//! A flusher that cannot keep up: writes past the checkpoint budget get temporary failures,
//! the pager does not spin on recovery passes that cannot free anything, and everything is
//! persisted once the disk moves again.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::{config, key, try_set, value};
use sluice_engine::{Bucket, EngineError, SystemClock};
use sluice_storage::{FaultyStore, FjallStore};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn a_stalled_flusher_refuses_writes_without_a_spinning_pager_and_catches_up() {
    let dir = tempfile::tempdir().unwrap();
    // A disk that stopped moving: commits wait until released.
    let store = Arc::new(FaultyStore::new(FjallStore::open(dir.path()).unwrap()));
    store.hold_commits(true);
    // 16 MiB quota: a checkpoint budget of about 3.2 MiB, filled by a few hundred 4 KiB sets.
    let b = Bucket::open(config(16, 4), Some(store.clone()), Arc::new(SystemClock)).unwrap();
    let val = value(0, 4096);
    let mut written = 0;
    while try_set(&b, &key(written), &val).is_ok() {
        written += 1;
        assert!(
            written < 10_000,
            "writes are refused once the budget is full"
        );
    }
    assert!(
        written > 100,
        "the budget held a few hundred items: {written}"
    );

    // Every refused write wakes the pager, and nothing can be freed until the flusher moves.
    // For half a second, keep writing as a client retrying as fast as it can would.
    // (At least 200 attempts: on a loaded machine the 100 µs sleeps stretch.)
    let passes_before = b.stats.checkpoint_recovery_passes.get();
    let began = Instant::now();
    let (mut refused, mut attempts) = (0u64, 0u64);
    while began.elapsed() < Duration::from_millis(500) || attempts < 200 {
        attempts += 1;
        if let Err(EngineError::TempFail) = try_set(&b, &key(written), &val) {
            refused += 1;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    let passes = b.stats.checkpoint_recovery_passes.get() - passes_before;
    // Not all of them: the items of the batch the flusher holds were read by every cursor,
    // so the pager may expel them and let a few writes in.
    assert!(refused > 0, "writes kept being refused: none of {attempts}");
    // One futile pass per 20 ms pause at most (plus slack for the pager's own wake-ups);
    // before the pause it ran a pass for nearly every refused write.
    let most = began.elapsed().as_millis() as u64 / 20 + 25;
    assert!(
        passes <= most,
        "{passes} recovery passes in {:?} (at most {most}), {refused} refusals",
        began.elapsed()
    );

    // Whoever holds refused writes back hears when room is made, not before.
    let told = Arc::new(AtomicU64::new(0));
    let counter = told.clone();
    assert!(b.set_room_listener(Box::new(move || {
        counter.fetch_add(1, Ordering::Relaxed);
    })));
    assert!(
        !b.set_room_listener(Box::new(|| {})),
        "one listener per bucket"
    );
    std::thread::sleep(Duration::from_millis(100));
    let told_while_held = told.load(Ordering::Relaxed);

    // The disk moves again: the backlog is persisted and writes are taken again.
    store.hold_commits(false);
    let deadline = Instant::now() + Duration::from_secs(20);
    while try_set(&b, &key(written), &val).is_err() {
        assert!(Instant::now() < deadline, "writes are accepted again");
        std::thread::sleep(Duration::from_millis(5));
    }
    for (vb, high) in b.vb_seqnos(None) {
        assert!(b.wait_persisted(vb, high, Duration::from_secs(20)).unwrap());
    }
    assert!(b.has_room_for_writes());
    // The listener hears after the commit's persisted seqnos are published.
    let deadline = Instant::now() + Duration::from_secs(10);
    while told.load(Ordering::Relaxed) == told_while_held {
        assert!(
            Instant::now() < deadline,
            "the commits that made room told the listener"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    for i in 0..written {
        assert_eq!(common::get(&b, &key(i)).as_deref(), Some(&val[..]));
    }
}
