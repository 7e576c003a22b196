//! A flusher that cannot keep up: writes past the checkpoint budget get temporary failures,
//! the pager does not spin on recovery passes that cannot free anything, and everything is
//! persisted once the disk moves again.

mod common;

use common::{config, key, value};
use sluice_engine::{Bucket, EngineError, StoreKind, StoreRequest, SystemClock};
use sluice_storage::{FjallStore, FlushBatch, ItemRecord, Store, StoreSnapshot, VbMeta};
use sluice_types::{Cas, Datatype, VbId};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// FjallStore whose commits wait while the gate is closed (a disk that stopped moving).
struct GatedStore {
    inner: FjallStore,
    open: Mutex<bool>,
    cv: Condvar,
}

impl GatedStore {
    fn set_open(&self, open: bool) {
        *self.open.lock().unwrap() = open;
        self.cv.notify_all();
    }
}

impl Store for GatedStore {
    fn commit(&self, batch: FlushBatch) -> sluice_storage::Result<()> {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.cv.wait(open).unwrap();
        }
        drop(open);
        self.inner.commit(batch)
    }
    fn get(&self, vb: VbId, key: &[u8]) -> sluice_storage::Result<Option<ItemRecord>> {
        self.inner.get(vb, key)
    }
    fn load_vb_meta(&self) -> sluice_storage::Result<Vec<(VbId, VbMeta)>> {
        self.inner.load_vb_meta()
    }
    fn scan_vb(
        &self,
        vb: VbId,
    ) -> Box<dyn Iterator<Item = sluice_storage::Result<ItemRecord>> + Send + '_> {
        self.inner.scan_vb(vb)
    }
    fn snapshot(&self) -> Box<dyn StoreSnapshot> {
        self.inner.snapshot()
    }
    fn take_clean_shutdown_flag(&self) -> sluice_storage::Result<bool> {
        self.inner.take_clean_shutdown_flag()
    }
    fn mark_clean_shutdown(&self) -> sluice_storage::Result<()> {
        self.inner.mark_clean_shutdown()
    }
    fn disk_bytes(&self) -> u64 {
        self.inner.disk_bytes()
    }
    fn reset_vb(&self, vb: VbId) -> sluice_storage::Result<()> {
        self.inner.reset_vb(vb)
    }
}

fn try_set(b: &Bucket, k: &[u8], v: &[u8]) -> Result<(), EngineError> {
    let req = StoreRequest {
        kind: StoreKind::Set,
        key: k,
        value: v,
        flags: 0,
        expiry_wire: 0,
        datatype: Datatype::RAW,
        cas: Cas::ZERO,
        preserve_ttl: false,
    };
    b.store(common::vb(b, k), &req).map(|_| ())
}

#[test]
fn a_stalled_flusher_refuses_writes_without_a_spinning_pager_and_catches_up() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(GatedStore {
        inner: FjallStore::open(dir.path()).unwrap(),
        open: Mutex::new(false),
        cv: Condvar::new(),
    });
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
    let passes_before = b.stats.checkpoint_recovery_passes.get();
    let began = Instant::now();
    let mut refused = 0u64;
    while began.elapsed() < Duration::from_millis(500) {
        if let Err(EngineError::TempFail) = try_set(&b, &key(written), &val) {
            refused += 1;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    let passes = b.stats.checkpoint_recovery_passes.get() - passes_before;
    assert!(refused > 100, "writes kept being refused: {refused}");
    // One futile pass per 20 ms pause at most (plus slack for the pager's own wake-ups);
    // before the pause it ran a pass for nearly every refused write.
    assert!(
        passes <= 50,
        "{passes} recovery passes in 500 ms, {refused} refusals"
    );

    // The disk moves again: the backlog is persisted and writes are taken again.
    store.set_open(true);
    let deadline = Instant::now() + Duration::from_secs(20);
    while try_set(&b, &key(written), &val).is_err() {
        assert!(Instant::now() < deadline, "writes are accepted again");
        std::thread::sleep(Duration::from_millis(5));
    }
    for (vb, high) in b.vb_seqnos(None) {
        assert!(b.wait_persisted(vb, high, Duration::from_secs(20)).unwrap());
    }
    for i in 0..written {
        assert_eq!(common::get(&b, &key(i)).as_deref(), Some(&val[..]));
    }
}
