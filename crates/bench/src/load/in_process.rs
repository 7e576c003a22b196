//! `--in-process`: the engine called directly from threads, no sockets, no protocol. What the
//! engine can do on this machine, as a ceiling for the network numbers.

use serde::Serialize;
use sluice_engine::{
    Bucket, BucketConfig, BucketType, Cas, Datatype, EngineError, StoreKind, StoreRequest,
    SystemClock, VbId,
};
use sluice_storage::{FjallStore, Store};
use sluice_types::vbucket_of;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::BenchError;
use crate::load::workload::{key, Op, Rng, Workload};
use crate::report::median;

/// Operations between two clock reads: keeps `Instant::now()` out of the per-op cost.
const OPS_PER_CLOCK_READ: u64 = 32;

#[derive(Debug, Clone, Serialize)]
pub struct InProcessResult {
    pub bucket_type: &'static str,
    pub threads: usize,
    /// ops/s of each run.
    pub runs_ops_per_s: Vec<f64>,
    pub median_ops_per_s: f64,
    pub get_misses: u64,
    pub errors: u64,
}

pub struct InProcessSpec {
    /// Bumped by every thread every [`OPS_PER_CLOCK_READ`] operations, for the progress bar.
    pub completed: Arc<AtomicU64>,
    pub threads: usize,
    pub quota_bytes: u64,
    pub num_vbuckets: u16,
    pub warmup: Duration,
    pub duration: Duration,
    pub runs: u32,
}

/// Runs the load on an ephemeral bucket, then on a couchbase bucket. Blocking: call it from
/// a blocking thread.
pub fn run_all(spec: &InProcessSpec, work: &Workload) -> Result<Vec<InProcessResult>, BenchError> {
    let mut out = Vec::new();
    for bucket_type in [BucketType::Ephemeral, BucketType::Couchbase] {
        out.push(run_bucket(spec, work, bucket_type)?);
    }
    Ok(out)
}

fn run_bucket(
    spec: &InProcessSpec,
    work: &Workload,
    bucket_type: BucketType,
) -> Result<InProcessResult, BenchError> {
    let (bucket, dir) = open_bucket(spec, bucket_type)?;
    prefill(&bucket, work, spec.threads)?;
    let mut runs = Vec::new();
    let (mut misses, mut errors) = (0, 0);
    for run in 0..spec.runs {
        let t = timed_run(&bucket, work, spec, u64::from(run));
        runs.push(t.ops as f64 / spec.duration.as_secs_f64());
        misses += t.misses;
        // The KV report has no column of its own for temporary OOMs (an in-memory bucket
        // under the default quota never reaches one): they show as errors.
        errors += t.errors + t.refused;
    }
    bucket.shutdown()?;
    // The storage engine's last cleanups need the directory: it goes after the bucket.
    drop(bucket);
    drop(dir);
    Ok(InProcessResult {
        bucket_type: match bucket_type {
            BucketType::Couchbase => "couchbase",
            BucketType::Ephemeral => "ephemeral",
        },
        threads: spec.threads,
        median_ops_per_s: median(&runs),
        runs_ops_per_s: runs,
        get_misses: misses,
        errors,
    })
}

/// A fresh bucket of `bucket_type` with the spec's quota and vbuckets; a couchbase bucket
/// stores into a temporary directory, removed when the returned guard is dropped (drop the
/// bucket first).
pub fn open_bucket(
    spec: &InProcessSpec,
    bucket_type: BucketType,
) -> Result<(Arc<Bucket>, tempfile::TempDir), BenchError> {
    let dir = tempfile::Builder::new()
        .prefix("sluice-bench-ip-")
        .tempdir()?;
    let mut config = BucketConfig::new("bench", bucket_type);
    config.quota_bytes = spec.quota_bytes;
    config.num_vbuckets = spec.num_vbuckets;
    let store: Option<Arc<dyn Store>> = match bucket_type {
        BucketType::Couchbase => Some(Arc::new(FjallStore::open(dir.path())?)),
        BucketType::Ephemeral => None,
    };
    let bucket = Bucket::open(config, store, Arc::new(SystemClock))?;
    Ok((bucket, dir))
}

/// Stores every key of `work` once, from `threads` threads.
pub fn prefill(bucket: &Bucket, work: &Workload, threads: usize) -> Result<(), BenchError> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads as u64)
            .map(|t| {
                s.spawn(move || {
                    for i in (t..work.keys).step_by(threads) {
                        store_retrying(bucket, &key(i), &work.value)?;
                    }
                    Ok::<_, EngineError>(())
                })
            })
            .collect();
        for h in handles {
            h.join().expect("prefill thread panicked")?;
        }
        Ok(())
    })
}

/// Longest a prefill store waits for memory, as a client retrying ETMPFAIL would.
const TMP_OOM_WAIT_MAX: Duration = Duration::from_secs(30);

/// A set that waits while the bucket is temporarily out of memory (a durable bucket under a
/// small quota frees memory only as its flusher persists and values are evicted).
fn store_retrying(bucket: &Bucket, k: &[u8], value: &[u8]) -> Result<(), EngineError> {
    let deadline = Instant::now() + TMP_OOM_WAIT_MAX;
    loop {
        match set(bucket, k, value) {
            Err(EngineError::TempFail) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
            }
            other => return other,
        }
    }
}

#[derive(Default)]
pub struct ThreadTally {
    pub ops: u64,
    pub misses: u64,
    /// Temporary OOMs, each followed by a back-off.
    pub refused: u64,
    pub errors: u64,
}

/// One warm-up plus measured run of `work` on `bucket`; counts only the measured part.
pub fn timed_run(bucket: &Bucket, work: &Workload, spec: &InProcessSpec, run: u64) -> ThreadTally {
    let start = Instant::now();
    let measure_from = start + spec.warmup;
    let end = measure_from + spec.duration;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..spec.threads as u64)
            .map(|t| {
                s.spawn(move || {
                    let mut rng = Rng::new(run * 1_000_003 + t);
                    let mut tally = ThreadTally::default();
                    let mut now = Instant::now();
                    while now < end {
                        let measuring = now >= measure_from;
                        for _ in 0..OPS_PER_CLOCK_READ {
                            let (op, i) = work.next(&mut rng);
                            let outcome = one_op(bucket, work, op, &key(i));
                            // As over sockets: an answered get (found or not) or a
                            // stored set is an operation; a temporary OOM is refused
                            // and backed off from (the flusher shares these cores);
                            // anything else is an error.
                            let refused = matches!(outcome, Err(EngineError::TempFail));
                            if measuring {
                                match outcome {
                                    Ok(()) => tally.ops += 1,
                                    Err(EngineError::KeyNotFound) => {
                                        tally.ops += 1;
                                        tally.misses += 1;
                                    }
                                    Err(EngineError::TempFail) => tally.refused += 1,
                                    Err(_) => tally.errors += 1,
                                }
                            }
                            if refused {
                                std::thread::sleep(crate::load::drive::REFUSED_BACKOFF);
                                break;
                            }
                        }
                        spec.completed
                            .fetch_add(OPS_PER_CLOCK_READ, Ordering::Relaxed);
                        now = Instant::now();
                    }
                    tally
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("load thread panicked"))
            .fold(ThreadTally::default(), |a, b| ThreadTally {
                ops: a.ops + b.ops,
                misses: a.misses + b.misses,
                refused: a.refused + b.refused,
                errors: a.errors + b.errors,
            })
    })
}

fn one_op(bucket: &Bucket, work: &Workload, op: Op, k: &[u8]) -> Result<(), EngineError> {
    match op {
        Op::Get => get(bucket, k),
        Op::Set => set(bucket, k, &work.value),
    }
}

fn vb(bucket: &Bucket, k: &[u8]) -> VbId {
    vbucket_of(k, bucket.num_vbuckets())
}

fn get(bucket: &Bucket, k: &[u8]) -> Result<(), EngineError> {
    let vb = vb(bucket, k);
    match bucket.get(vb, k) {
        // An evicted value is read back outside the lock, then the get is retried once.
        Err(EngineError::NeedsFetch) => {
            bucket.fetch(vb, k)?;
            bucket.get(vb, k).map(|_| ())
        }
        other => other.map(|_| ()),
    }
}

fn set(bucket: &Bucket, k: &[u8], value: &[u8]) -> Result<(), EngineError> {
    let req = StoreRequest {
        kind: StoreKind::Set,
        key: k,
        value,
        flags: 0,
        expiry_wire: 0,
        datatype: Datatype::RAW,
        cas: Cas::ZERO,
        preserve_ttl: false,
        durability: None,
        macros: &[],
        access_deleted: false,
        store_deleted: false,
    };
    bucket.store(vb(bucket, k), &req).map(|_| ())
}
