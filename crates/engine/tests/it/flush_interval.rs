//! `BucketConfig::flush_interval`: a steady trickle of writes is persisted in a few commits,
//! one per interval at most, instead of one commit per write; and a write that finds the
//! flusher idle is persisted at once, not an interval later.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;
use common::*;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(10);

fn open_with_interval(
    dir: &std::path::Path,
    interval: Duration,
) -> std::sync::Arc<sluice_engine::Bucket> {
    let mut c = config(64, 16);
    c.flush_interval = interval;
    open(dir, c)
}

#[test]
fn a_trickle_of_writes_is_persisted_at_most_once_per_interval() {
    let dir = tempfile::tempdir().unwrap();
    let b = open_with_interval(dir.path(), Duration::from_millis(100));
    // The first round (every vbucket's metadata) and its interval pass.
    std::thread::sleep(Duration::from_millis(300));
    let before = b.stats.flusher_commits.get();
    let began = Instant::now();
    let mut last = None;
    for i in 0..100 {
        last = Some(set(&b, &key(i), &value(i, 100)));
        std::thread::sleep(Duration::from_millis(3));
    }
    let m = last.unwrap();
    assert!(b.wait_persisted(vb(&b, &key(99)), m.seqno, WAIT).unwrap());
    let commits = b.stats.flusher_commits.get() - before;
    // One commit at the first write, then at most one per interval started since.
    let most = began.elapsed().as_millis() as u64 / 100 + 2;
    assert!(
        commits <= most,
        "{commits} commits for 100 writes over {:?} (at most {most})",
        began.elapsed()
    );
    for i in 0..100 {
        assert_eq!(get(&b, &key(i)), Some(value(i, 100)));
    }
}

#[test]
fn a_write_to_an_idle_flusher_is_persisted_without_waiting_an_interval() {
    let dir = tempfile::tempdir().unwrap();
    let b = open_with_interval(dir.path(), Duration::from_secs(2));
    // The first round commits every vbucket's metadata and then waits out its interval;
    // after that the flusher is idle.
    std::thread::sleep(Duration::from_millis(2500));
    let m = set(&b, &key(1), &value(1, 100));
    // Well within the interval: the write did not wait for one.
    assert!(
        b.wait_persisted(vb(&b, &key(1)), m.seqno, Duration::from_millis(1500))
            .unwrap(),
        "a write to an idle flusher waited"
    );
}
