//! Helpers shared by the engine's integration tests (real fjall storage in a temp dir).
#![allow(dead_code)]

use sluice_engine::{
    Bucket, BucketConfig, BucketType, QueuedItem, StoreKind, StoreRequest, SystemClock,
};
use sluice_storage::{FjallStore, Store};
use sluice_types::{vbucket_of, Cas, Datatype, Seqno, VbId};
use std::path::Path;
use std::sync::Arc;

pub fn config(quota_mb: u64, vbuckets: u16) -> BucketConfig {
    let mut c = BucketConfig::new("default", BucketType::Couchbase);
    c.quota_bytes = quota_mb * 1024 * 1024;
    c.num_vbuckets = vbuckets;
    c
}

pub fn open(dir: &Path, config: BucketConfig) -> Arc<Bucket> {
    let store: Arc<dyn Store> = Arc::new(FjallStore::open(dir).expect("store opens"));
    Bucket::open(config, Some(store), Arc::new(SystemClock)).expect("bucket opens")
}

pub fn key(i: usize) -> Vec<u8> {
    format!("key-{i:08}").into_bytes()
}

pub fn value(i: usize, len: usize) -> Vec<u8> {
    let mut v = format!("{i:08}:").into_bytes();
    v.resize(len, b'v');
    v
}

pub fn vb(bucket: &Bucket, key: &[u8]) -> VbId {
    vbucket_of(key, bucket.num_vbuckets())
}

/// One SET attempt, with its outcome as the engine gives it.
pub fn try_set(
    bucket: &Bucket,
    key: &[u8],
    value: &[u8],
) -> Result<sluice_engine::Mutation, sluice_engine::EngineError> {
    try_set_durable(bucket, key, value, None)
}

/// One SET attempt at a durability level (a SyncWrite's prepare), or none.
pub fn try_set_durable(
    bucket: &Bucket,
    key: &[u8],
    value: &[u8],
    durability: Option<sluice_types::DurabilityLevel>,
) -> Result<sluice_engine::Mutation, sluice_engine::EngineError> {
    let req = StoreRequest {
        kind: StoreKind::Set,
        key,
        value,
        flags: 0,
        expiry_wire: 0,
        datatype: Datatype::RAW,
        cas: Cas::ZERO,
        preserve_ttl: false,
        durability,
        macros: &[],
        access_deleted: false,
        store_deleted: false,
    };
    bucket.store(vb(bucket, key), &req)
}

/// SET, retrying temporary failures (memory pressure) the way a client would.
pub fn set(bucket: &Bucket, key: &[u8], value: &[u8]) -> sluice_engine::Mutation {
    for _ in 0..10_000 {
        match try_set(bucket, key, value) {
            Ok(m) => return m,
            Err(sluice_engine::EngineError::TempFail) => {
                std::thread::sleep(std::time::Duration::from_millis(1))
            }
            Err(sluice_engine::EngineError::NeedsFetch) => {
                bucket.fetch(vb(bucket, key), key).expect("fetch")
            }
            Err(e) => panic!("set failed: {e}"),
        }
    }
    panic!("set kept failing temporarily");
}

/// GET, fetching from disk when the engine asks for it.
pub fn get(bucket: &Bucket, key: &[u8]) -> Option<Vec<u8>> {
    for _ in 0..4 {
        match bucket.get(vb(bucket, key), key) {
            Ok(doc) => return Some(doc.value.to_vec()),
            Err(sluice_engine::EngineError::KeyNotFound) => return None,
            Err(sluice_engine::EngineError::NeedsFetch) => {
                bucket.fetch(vb(bucket, key), key).expect("fetch")
            }
            Err(e) => panic!("get failed: {e}"),
        }
    }
    panic!("value never became resident");
}

/// Copies a data directory, as a crash would leave it, while its bucket still holds it open.
pub fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("dir entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            std::fs::create_dir_all(&target).expect("create dir");
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

/// Streams `vb` from its first change to the end of what memory holds, the way a producer
/// does: a backfill from disk first when the checkpoints no longer reach back to seqno 1
/// (the flusher frees what it persisted, at a moment the test does not choose), then the
/// cursor. `between` runs after every backfill chunk. The items come once each, in seqno
/// order.
pub fn stream_from_start(
    b: &Bucket,
    vb: VbId,
    mut between: impl FnMut(usize),
) -> Vec<Arc<QueuedItem>> {
    let mut got: Vec<Arc<QueuedItem>> = Vec::new();
    let mut last = Seqno::ZERO;
    let mut step = 0;
    let cursor = loop {
        if let Some(c) = b.stream_cursor(vb, last).expect("vbucket exists") {
            break c;
        }
        let mut backfill = b.backfill(vb, last).expect("backfill starts");
        assert!(backfill.end >= last);
        loop {
            let chunk = backfill.next_chunk(200).expect("backfill reads");
            if chunk.is_empty() {
                break;
            }
            for item in chunk {
                assert!(item.meta.seqno > last, "no duplicate, in order");
                last = item.meta.seqno;
                got.push(item);
            }
            between(step);
            step += 1;
        }
        last = backfill.end;
        if let Some(c) = backfill.cursor {
            break c;
        }
    };
    loop {
        let chunks = b
            .read_stream_cursor(vb, cursor, 1 << 20)
            .expect("vbucket exists")
            .expect("nothing drops the cursor of a test that reads at once");
        let items: Vec<_> = chunks.into_iter().flat_map(|c| c.items).collect();
        if items.is_empty() {
            break;
        }
        for item in items {
            if item.meta.seqno <= last {
                continue; // a cursor registered mid-checkpoint may repeat nothing newer
            }
            last = item.meta.seqno;
            got.push(item);
        }
    }
    b.release_stream_cursor(vb, cursor);
    got
}
