//! A bucket opened with a seeded RNG (`Bucket::open_with_rng`) draws the same vbucket uuids on
//! every run — at warmup, after an unclean stop, and when a vbucket becomes active — so a
//! seeded simulation can replay one; another seed gives others.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;
use rand::rngs::StdRng;
use rand::SeedableRng;
use sluice_engine::{Bucket, BucketConfig, BucketType, SystemClock, VbId, VbState, VbUuid};
use sluice_storage::{FjallStore, Store};
use std::path::Path;
use std::sync::Arc;

const VBUCKETS: u16 = 8;

fn uuids(bucket: &Bucket) -> Vec<VbUuid> {
    (0..VBUCKETS)
        .map(|vb| bucket.vb_uuid(VbId(vb)).unwrap())
        .collect()
}

fn ephemeral(seed: u64) -> Arc<Bucket> {
    let mut c = BucketConfig::new("default", BucketType::Ephemeral);
    c.num_vbuckets = VBUCKETS;
    Bucket::open_with_rng(c, None, Arc::new(SystemClock), StdRng::seed_from_u64(seed)).unwrap()
}

/// A new bucket's uuids, then those of the branch each vbucket starts on becoming active.
fn new_then_active(seed: u64) -> (Vec<VbUuid>, Vec<VbUuid>) {
    let b = ephemeral(seed);
    let at_warmup = uuids(&b);
    for vb in 0..VBUCKETS {
        b.set_vbucket_state(VbId(vb), VbState::Replica).unwrap();
        b.set_vbucket_state(VbId(vb), VbState::Active).unwrap();
    }
    let after = uuids(&b);
    b.shutdown().unwrap();
    (at_warmup, after)
}

#[test]
fn a_seed_gives_the_same_uuids_at_warmup_and_on_becoming_active() {
    let (warm, active) = new_then_active(7);
    assert_eq!((warm.clone(), active.clone()), new_then_active(7));
    assert_ne!(warm, active, "becoming active starts a new branch");
    let (other_warm, other_active) = new_then_active(8);
    assert_ne!(warm, other_warm);
    assert_ne!(active, other_active);
}

fn persistent(dir: &Path, seed: u64) -> Arc<Bucket> {
    let store: Arc<dyn Store> = Arc::new(FjallStore::open(dir).unwrap());
    let config = common::config(64, VBUCKETS);
    let rng = StdRng::seed_from_u64(seed);
    Bucket::open_with_rng(config, Some(store), Arc::new(SystemClock), rng).unwrap()
}

/// A new bucket's uuids, then the new branches' after a stop without shutdown. Each open
/// gets its own seed: the same seed again would draw the first open's uuids as the new
/// branches'.
fn crash_and_restart(seed: u64) -> (Vec<VbUuid>, Vec<VbUuid>) {
    let dir = tempfile::tempdir().unwrap();
    let b = persistent(dir.path(), seed);
    let first = uuids(&b);
    b.shutdown().unwrap();
    drop(b);
    // Opened after a clean stop (no new branch), then stopped without shutdown(): the
    // clean-stop flag is never written again, as after kill -9.
    let b = persistent(dir.path(), seed + 1);
    assert_eq!(uuids(&b), first, "a clean stop adds no branch");
    std::mem::forget(b);
    let copy = tempfile::tempdir().unwrap();
    common::copy_dir(dir.path(), copy.path());
    let b = persistent(copy.path(), seed + 2);
    let second = uuids(&b);
    b.shutdown().unwrap();
    (first, second)
}

#[test]
fn a_seed_gives_the_same_uuids_after_an_unclean_restart() {
    let (first, second) = crash_and_restart(11);
    assert!(
        first.iter().zip(&second).all(|(a, b)| a != b),
        "an unclean stop starts a new branch in every vbucket"
    );
    assert_eq!((first, second), crash_and_restart(11));
}
