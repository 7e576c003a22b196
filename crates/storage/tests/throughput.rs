//! Throughput sanity check: batches of 1000 × 1 KiB items, one fsync per batch.
//! Run with `cargo test -p sluice-storage --test throughput -- --ignored --nocapture`.
mod common;

use common::*;
use sluice_storage::{FlushBatch, Store};
use sluice_types::VbId;
use std::time::Instant;

#[test]
#[ignore = "timing; run by hand"]
fn commit_throughput() {
    const BATCHES: u64 = 50;
    const PER_BATCH: u64 = 1000;
    let (_dir, store) = temp_store();
    let value = "v".repeat(1024);
    let start = Instant::now();
    for b in 0..BATCHES {
        let items = (0..PER_BATCH)
            .map(|i| {
                let seqno = b * PER_BATCH + i + 1;
                // Keys repeat every 10 batches, so rewrites (by_key reads + removals) happen too.
                item(
                    (i % 64) as u16,
                    &format!("key-{}", seqno % (10 * PER_BATCH)),
                    seqno,
                    &value,
                )
            })
            .collect();
        store
            .commit(FlushBatch {
                items,
                purges: vec![],
                vb_meta: vec![(VbId(0), vb_meta(b))],
            })
            .expect("commit");
    }
    let elapsed = start.elapsed();
    let items = BATCHES * PER_BATCH;
    println!(
        "{items} items in {BATCHES} commits: {:.2?}, {:.0} items/s, {:.1} commits/s, disk {} MiB",
        elapsed,
        items as f64 / elapsed.as_secs_f64(),
        BATCHES as f64 / elapsed.as_secs_f64(),
        store.disk_bytes() / (1024 * 1024)
    );
}
