//! The flusher tells storage which seqno each key already has on disk, from what the hash
//! table remembers, instead of storage reading by_key. Here keys are rewritten, deleted,
//! re-created and rewritten again across flushes and restarts, with storage checking every
//! hint: a wrong one fails the commit (and the bucket refuses writes). Afterwards storage
//! holds exactly one version per key, the newest.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;
use common::*;
use sluice_engine::{Bucket, Cas, SystemClock, VbId};
use sluice_storage::{FjallStore, Store};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

fn open_checked(dir: &Path) -> (Arc<Bucket>, Arc<dyn Store>) {
    let store: Arc<dyn Store> = Arc::new(
        FjallStore::open(dir)
            .expect("open the store")
            .with_hint_checks(true),
    );
    let bucket = Bucket::open(config(64, 8), Some(store.clone()), Arc::new(SystemClock)).unwrap();
    (bucket, store)
}

/// Waits until every vbucket's writes so far are on disk.
fn persisted(b: &Bucket, high: &High) {
    for (&vb, &seqno) in high {
        assert!(
            b.wait_persisted(vb, seqno, Duration::from_secs(10))
                .unwrap(),
            "{vb:?} reached {seqno:?}"
        );
    }
}

type Expected = BTreeMap<usize, Option<Vec<u8>>>;
type High = HashMap<VbId, sluice_engine::Seqno>;

fn write(b: &Bucket, i: usize, round: usize, high: &mut High, expected: &mut Expected) {
    let v = value(i * 100 + round, 40);
    let m = set(b, &key(i), &v);
    high.insert(vb(b, &key(i)), m.seqno);
    expected.insert(i, Some(v));
}

#[test]
fn hinted_commits_keep_one_version_per_key_across_rewrites_deletes_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    // key index -> expected value (None: deleted)
    let mut expected = Expected::new();
    let mut high = High::new();
    {
        let (b, _) = open_checked(dir.path());
        for round in 0..4 {
            for i in 0..300 {
                write(&b, i, round, &mut high, &mut expected);
            }
            if round % 2 == 1 {
                persisted(&b, &high);
            }
        }
        persisted(&b, &high);
        for i in (0..300).step_by(5) {
            let d = b.delete(vb(&b, &key(i)), &key(i), Cas::ZERO, None).unwrap();
            high.insert(vb(&b, &key(i)), d.seqno);
            expected.insert(i, None);
        }
        persisted(&b, &high);
        // Re-created after their tombstones left memory.
        for i in (0..300).step_by(10) {
            write(&b, i, 7, &mut high, &mut expected);
        }
        persisted(&b, &high);
        b.shutdown().unwrap();
    }
    {
        // After warmup the hash table knows the disk again.
        let (b, _) = open_checked(dir.path());
        for round in 8..11 {
            for i in (0..300).step_by(3) {
                write(&b, i, round, &mut high, &mut expected);
            }
            persisted(&b, &high);
        }
        b.shutdown().unwrap();
    }
    let (b, store) = open_checked(dir.path());
    let mut on_disk: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
    for v in 0..8u16 {
        for r in store.scan_vb(VbId(v)) {
            let r = r.unwrap();
            *on_disk.entry(r.key.to_vec()).or_default() += 1;
        }
    }
    assert!(
        on_disk.values().all(|&n| n == 1),
        "keys with more than one version on disk: {:?}",
        on_disk.iter().filter(|(_, &n)| n > 1).count()
    );
    for (i, want) in expected {
        assert_eq!(get(&b, &key(i)), want, "key {i}");
    }
    b.shutdown().unwrap();
}
