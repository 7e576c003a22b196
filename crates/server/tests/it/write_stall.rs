//! A write to a durable bucket that finds no memory for it (the persistence backlog at its
//! budget, the quota full of unpersisted items) waits for the flusher and the pager to make
//! room, up to `ServerConfig::write_stall`, instead of being answered TMPFAIL at once; with
//! the stall off it is refused, as before. An ephemeral bucket never frees memory by itself,
//! so its refusals are not held. Over real sockets, on the memcached port.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::dcp_peer::write_all;
use common::kv_peer::Kv;
use common::loopback_config;
use sluice_engine::BucketType;
use std::time::{Duration, Instant};

/// 16 MiB: a checkpoint budget of about 3 MiB, which a pipelined burst of 16 KiB values
/// fills in milliseconds, far faster than a flusher commits.
const QUOTA_MB: u64 = 16;
const VALUE_BYTES: usize = 16 * 1024;
const ITEMS: usize = 3000;

async fn start(
    bucket_type: BucketType,
    stall: Duration,
) -> (sluice_manager::Running, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut c = loopback_config(dir.path(), bucket_type, 16, QUOTA_MB);
    c.write_stall = stall;
    (sluice_manager::start(c).await.unwrap(), dir)
}

/// 48 MiB of distinct keys: three times the quota.
fn burst() -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..ITEMS)
        .map(|i| {
            let mut v = format!("v{i}-").into_bytes();
            v.resize(VALUE_BYTES, b'x');
            (format!("stall-{i}").into_bytes(), v)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_wait_for_room_instead_of_being_refused() {
    // Generous, so that a slow CI disk cannot turn a wait into a refusal.
    let (node, _dir) = start(BucketType::Couchbase, Duration::from_secs(20)).await;
    let items = burst();
    let tmpfails = write_all(node.memcached_addr.unwrap(), &items).await;
    assert_eq!(tmpfails, 0, "every write waited for room and was applied");
    let mut kv = Kv::open(node.kv_addr).await;
    for (k, v) in items.iter().step_by(97) {
        let vb = sluice_types::vbucket_of(k, 16).0;
        let got = kv.get(k, vb).await;
        assert_eq!(got.status, 0, "{}", String::from_utf8_lossy(k));
        assert_eq!(&got.value, v);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_stall_the_same_burst_is_refused() {
    let (node, _dir) = start(BucketType::Couchbase, Duration::ZERO).await;
    let tmpfails = write_all(node.memcached_addr.unwrap(), &burst()).await;
    assert!(tmpfails > 0, "a burst of three quotas is refused at first");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_ephemeral_bucket_refuses_at_once() {
    let (node, _dir) = start(BucketType::Ephemeral, Duration::from_secs(20)).await;
    let mut kv = Kv::open(node.kv_addr).await;
    let value = vec![b'e'; VALUE_BYTES];
    let began = Instant::now();
    let mut refused = None;
    for i in 0..ITEMS {
        let key = format!("eph-{i}").into_bytes();
        let vb = sluice_types::vbucket_of(&key, 16).0;
        let answer = kv.set(&key, &value, vb).await;
        if answer.status != 0 {
            refused = Some(answer.status);
            break;
        }
    }
    assert_eq!(
        refused,
        Some(0x86),
        "the quota ends the writes with TMPFAIL"
    );
    assert!(
        began.elapsed() < Duration::from_secs(15),
        "the refusal was not held for the stall ({:?})",
        began.elapsed()
    );
}
