//! Helpers shared by the storage integration tests (each test binary uses a subset).
#![allow(dead_code)]

use bytes::Bytes;
use sluice_storage::{FjallStore, FlushBatch, ItemRecord, RecordKind, Store, VbMeta};
use sluice_types::{Cas, Datatype, FailoverLog, ItemMeta, Seqno, VbId, VbState, VbUuid};
use tempfile::TempDir;

pub fn temp_store() -> (TempDir, FjallStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = FjallStore::open(dir.path()).expect("open store");
    (dir, store)
}

pub fn item(vb: u16, key: &str, seqno: u64, value: &str) -> ItemRecord {
    ItemRecord {
        vb: VbId(vb),
        key: Bytes::copy_from_slice(key.as_bytes()),
        meta: ItemMeta {
            seqno: Seqno(seqno),
            rev_seqno: seqno,
            cas: Cas(1_000 + seqno),
            flags: 0x0102_0304,
            datatype: Datatype(Datatype::JSON),
            ..ItemMeta::default()
        },
        value: Bytes::copy_from_slice(value.as_bytes()),
        kind: RecordKind::Committed,
    }
}

pub fn tombstone(vb: u16, key: &str, seqno: u64) -> ItemRecord {
    let mut t = item(vb, key, seqno, "");
    t.meta.deleted = true;
    t.meta.delete_time = 1_700_000_000;
    t.meta.datatype = Datatype::RAW;
    t
}

pub fn vb_meta(high_seqno: u64) -> VbMeta {
    VbMeta {
        state: VbState::Active,
        failover_log: FailoverLog::new(VbUuid(0xabcd), Seqno(0)),
        high_seqno: Seqno(high_seqno),
        purge_seqno: Seqno(0),
        max_cas: 1_000 + high_seqno,
        high_completed_seqno: Seqno(0),
    }
}

pub fn commit_items(store: &dyn Store, items: Vec<ItemRecord>) {
    store
        .commit(&FlushBatch {
            items,
            ..FlushBatch::default()
        })
        .expect("commit");
}

pub fn scan(store: &dyn Store, vb: u16) -> Vec<ItemRecord> {
    store
        .scan_vb(VbId(vb))
        .collect::<Result<Vec<_>, _>>()
        .expect("scan")
}

/// (key, seqno) pairs of a scan, for compact assertions.
pub fn keys_and_seqnos(records: &[ItemRecord]) -> Vec<(String, u64)> {
    records
        .iter()
        .map(|r| (String::from_utf8_lossy(&r.key).into_owned(), r.meta.seqno.0))
        .collect()
}
