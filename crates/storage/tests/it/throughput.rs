//! Throughput sanity check: batches of 1000 × 1 KiB items, one fsync per batch.
//! Run with `cargo test -p sluice-storage --test it throughput:: -- --ignored --nocapture`.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line
use crate::common;

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
            .commit(&FlushBatch {
                on_disk: Vec::new(),
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

/// What the on-disk hints save: rewrites of keys spread over a store of 200,000, committed
/// with and without `FlushBatch::on_disk`, in alternating rounds. Thread CPU time per item.
/// `MEMTABLE_MIB` sets the memtable size (default 16):
/// `MEMTABLE_MIB=96 cargo test --release -p sluice-storage --test it throughput::hinted -- --ignored --nocapture`.
#[test]
#[ignore = "timing; run by hand"]
fn hinted_rewrite_cost() {
    const KEYS: u64 = 200_000;
    const PER_BATCH: u64 = 1000;
    let (memtable_mib, _dir, store) = store_for_timing();
    let value = "v".repeat(64);
    // disk[k] = the seqno key k has on disk.
    let mut disk = vec![0u64; KEYS as usize];
    let mut seqno = 0u64;
    let mut commit = |keys: &mut dyn Iterator<Item = u64>, hinted: bool| {
        let mut items = Vec::new();
        let mut on_disk = Vec::new();
        for k in keys {
            seqno += 1;
            items.push(item(0, &format!("key-{k:08}"), seqno, &value));
            on_disk.push(if hinted {
                sluice_storage::OnDisk::At(sluice_types::Seqno(disk[k as usize]))
            } else {
                sluice_storage::OnDisk::Unknown
            });
            disk[k as usize] = seqno;
        }
        commit_hinted(&store, items, on_disk);
    };
    for b in 0..KEYS / PER_BATCH {
        commit(&mut (b * PER_BATCH..(b + 1) * PER_BATCH), false);
    }
    let mut next_key = random_keys(KEYS);
    let mut cpu_us = [0u128; 2];
    let process_before = process_cpu();
    for round in 0..6 {
        let hinted = round % 2 == 1;
        let before = thread_cpu();
        for _ in 0..50 {
            commit(&mut (0..PER_BATCH).map(|_| next_key()), hinted);
        }
        cpu_us[hinted as usize] += (thread_cpu() - before).as_micros();
    }
    let process_us = (process_cpu() - process_before).as_micros();
    let per_item = |us: u128| us as f64 / (3.0 * 50.0 * PER_BATCH as f64);
    println!(
        "memtables of {memtable_mib} MiB: committing thread's CPU per rewritten item: {:.2} µs \
         read from by_key, {:.2} µs hinted; the whole process (storage's background work \
         included): {:.2} µs",
        per_item(cpu_us[0]),
        per_item(cpu_us[1]),
        per_item(process_us) / 2.0
    );
}

/// A store for the timing tests, without hint checks, its memtables `MEMTABLE_MIB` MiB
/// (default 16). Returns the size, the directory (keep it alive) and the store.
fn store_for_timing() -> (u64, tempfile::TempDir, sluice_storage::FjallStore) {
    let memtable_mib: u64 = std::env::var("MEMTABLE_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let dir = tempfile::tempdir().unwrap();
    let memory = sluice_storage::StoreMemory {
        memtable_bytes: memtable_mib << 20,
        ..sluice_storage::StoreMemory::default()
    };
    let store = sluice_storage::FjallStore::open_with(dir.path(), memory)
        .unwrap()
        .with_hint_checks(false);
    (memtable_mib, dir, store)
}

/// Keys below `keys` in a fixed pseudo-random order (xorshift), the same every run.
fn random_keys(keys: u64) -> impl FnMut() -> u64 {
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % keys
    }
}

fn commit_hinted(
    store: &sluice_storage::FjallStore,
    items: Vec<sluice_storage::ItemRecord>,
    on_disk: Vec<sluice_storage::OnDisk>,
) {
    store
        .commit(&FlushBatch {
            items,
            on_disk,
            ..FlushBatch::default()
        })
        .expect("commit");
}

/// This process's CPU time (user + system), all threads.
fn process_cpu() -> std::time::Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("stat");
    // Fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    let ticks_per_s = 100; // USER_HZ on Linux
    std::time::Duration::from_millis((f[11] + f[12]) * 1000 / ticks_per_s)
}

/// This thread's CPU time (user + system).
fn thread_cpu() -> std::time::Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    let ns: u64 = stat.split_whitespace().next().unwrap().parse().unwrap();
    std::time::Duration::from_nanos(ns)
}

/// What a by_key read costs for a key that is not on disk at all (a new key): batches of new
/// keys into a store of 200,000, committed with the read and with an `OnDisk::Absent` hint.
#[test]
#[ignore = "timing; run by hand"]
fn new_key_read_cost() {
    const KEYS: u64 = 200_000;
    const PER_BATCH: u64 = 1000;
    let dir = tempfile::tempdir().unwrap();
    let store = sluice_storage::FjallStore::open(dir.path())
        .unwrap()
        .with_hint_checks(false);
    let value = "v".repeat(1024);
    let mut seqno = 0u64;
    let mut next_key = 0u64;
    let mut commit = |n: u64, skip_read: bool| {
        let mut items = Vec::new();
        let mut on_disk = Vec::new();
        for _ in 0..n {
            seqno += 1;
            next_key += 1;
            // Spread like the generator's keys: not in order.
            let k = next_key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 20;
            items.push(item(
                (k % 1024) as u16,
                &format!("key-{k:016}"),
                seqno,
                &value,
            ));
            on_disk.push(if skip_read {
                sluice_storage::OnDisk::Absent
            } else {
                sluice_storage::OnDisk::Unknown
            });
        }
        commit_hinted(&store, items, on_disk);
    };
    for _ in 0..KEYS / PER_BATCH {
        commit(PER_BATCH, false);
    }
    let mut cpu_us = [0u128; 2];
    for round in 0..6 {
        let skip = round % 2 == 1;
        let before = thread_cpu();
        for _ in 0..50 {
            commit(PER_BATCH, skip);
        }
        cpu_us[skip as usize] += (thread_cpu() - before).as_micros();
    }
    let per_item = |us: u128| us as f64 / (3.0 * 50.0 * PER_BATCH as f64);
    println!(
        "committing thread's CPU per new 1 KiB item: {:.2} µs reading by_key, {:.2} µs hinted absent",
        per_item(cpu_us[0]),
        per_item(cpu_us[1]),
    );
}

/// Commits shaped like the flusher's under a set-only load: batches of 7,000 rewrites of 1 KiB
/// values over 500,000 keys in 1,024 vbuckets, grouped by vbucket in seqno order, with exact
/// on-disk hints and one vb_meta per vbucket touched. Prints the committing thread's CPU per
/// item and the whole process's (the storage engine's background work included).
/// `MEMTABLE_MIB` sets the memtable size (default 16):
/// `cargo test --release -p sluice-storage --test it throughput::flusher_shaped -- --ignored --nocapture`.
#[test]
#[ignore = "timing; run by hand"]
fn flusher_shaped_cost() {
    const KEYS: u64 = 500_000;
    const VBS: u64 = 1024;
    const PER_BATCH: usize = 7_000;
    const MEASURED_BATCHES: u64 = 200;
    let (memtable_mib, _dir, store) = store_for_timing();
    let value = "v".repeat(1024);
    let mut disk = vec![0u64; KEYS as usize];
    let mut high = vec![0u64; VBS as usize];
    let mut commit = |mut keys: Vec<u64>| {
        // The flusher reads vbucket by vbucket, each in seqno order.
        keys.sort_unstable_by_key(|k| (k % VBS, *k));
        keys.dedup();
        let mut items = Vec::with_capacity(keys.len());
        let mut on_disk = Vec::with_capacity(keys.len());
        let mut metas: Vec<(VbId, sluice_storage::VbMeta)> = Vec::new();
        for k in keys {
            let vb = (k % VBS) as usize;
            high[vb] += 1;
            items.push(item(vb as u16, &format!("key-{k:016}"), high[vb], &value));
            on_disk.push(match disk[k as usize] {
                0 => sluice_storage::OnDisk::Absent,
                s => sluice_storage::OnDisk::At(sluice_types::Seqno(s)),
            });
            disk[k as usize] = high[vb];
            match metas.last_mut() {
                Some((v, meta)) if usize::from(v.0) == vb => *meta = vb_meta(high[vb]),
                _ => metas.push((VbId(vb as u16), vb_meta(high[vb]))),
            }
        }
        let n = items.len();
        store
            .commit(&FlushBatch {
                items,
                on_disk,
                purges: vec![],
                vb_meta: metas,
            })
            .expect("commit");
        n
    };
    // Load every key once.
    let all: Vec<u64> = (0..KEYS).collect();
    for chunk in all.chunks(PER_BATCH) {
        commit(chunk.to_vec());
    }
    let mut next_key = random_keys(KEYS);
    let process_before = process_cpu();
    let thread_before = thread_cpu();
    let mut items = 0usize;
    for _ in 0..MEASURED_BATCHES {
        items += commit((0..PER_BATCH).map(|_| next_key()).collect());
    }
    let thread_us = (thread_cpu() - thread_before).as_micros() as f64;
    let process_us = (process_cpu() - process_before).as_micros() as f64;
    println!(
        "memtables of {memtable_mib} MiB, {items} rewritten 1 KiB items: committing thread {:.2} \
         µs/item, whole process {:.2} µs/item",
        thread_us / items as f64,
        process_us / items as f64
    );
}
