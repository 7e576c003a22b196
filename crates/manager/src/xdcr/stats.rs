//! What one replication did on this node, under Couchbase's names where they exist
//! (`docs_written`, `docs_failed_cr_target`, ...): counted since the node started, kept
//! across the pipeline's restarts, pauses and map changes.
//!
//! The latency is from the write at the source to the target's answer, read off the
//! document's CAS: the source's hybrid logical clock stamps each write with its wall clock
//! in nanoseconds, so on one machine (or with synchronised clocks) `now - cas` is how long
//! the change took to cross. A backfilled change carries its old CAS and reports its age.

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};

/// Largest latency recorded exactly (an hour, in µs); slower counts as this.
const LATENCY_US_MAX: u64 = 3_600_000_000;

/// One replication's counters on this node.
pub struct XdcrStats {
    /// Changes the source stream delivered (Couchbase's `docs_received_from_dcp`).
    pub docs_received: AtomicU64,
    /// Changes the filter (or the collection: only the default one crosses) kept back.
    pub docs_filtered: AtomicU64,
    /// Changes the target stored.
    pub docs_written: AtomicU64,
    /// Changes the target already had, or had a newer version of (KEY_EEXISTS).
    pub docs_failed_cr_target: AtomicU64,
    /// Large documents not sent: the target's metadata (GET_META) showed they would lose.
    pub docs_failed_cr_source: AtomicU64,
    /// Key and value bytes of the changes written (`data_replicated`).
    pub bytes_written: AtomicU64,
    /// Batches written to the target.
    pub batches: AtomicU64,
    /// Times the pipeline started (again) on this node.
    pub starts: AtomicU64,
    /// Vbuckets whose checkpoints went back at a start because the target no longer had
    /// writes they counted on (it restarted uncleanly or failed over), and of those, the
    /// ones that went back to zero.
    pub rewinds: AtomicU64,
    pub rewinds_to_zero: AtomicU64,
    /// At the last start: vbuckets resumed from a checkpoint, and the seqnos they resumed
    /// from, summed (0 when every vbucket started from zero).
    pub resumed_vbuckets: AtomicU64,
    pub resumed_seqnos: AtomicU64,
    /// When the checkpoints last moved (Unix ms; 0 = never).
    pub checkpoint_unix_ms: AtomicU64,
    latency_us: Mutex<Histogram<u64>>,
    last_error: Mutex<Option<String>>,
}

impl Default for XdcrStats {
    fn default() -> XdcrStats {
        XdcrStats {
            docs_received: AtomicU64::new(0),
            docs_filtered: AtomicU64::new(0),
            docs_written: AtomicU64::new(0),
            docs_failed_cr_target: AtomicU64::new(0),
            docs_failed_cr_source: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            starts: AtomicU64::new(0),
            rewinds: AtomicU64::new(0),
            rewinds_to_zero: AtomicU64::new(0),
            resumed_vbuckets: AtomicU64::new(0),
            resumed_seqnos: AtomicU64::new(0),
            checkpoint_unix_ms: AtomicU64::new(0),
            latency_us: Mutex::new(
                Histogram::new_with_bounds(1, LATENCY_US_MAX, 2).expect("valid bounds"),
            ),
            last_error: Mutex::new(None),
        }
    }
}

pub(crate) fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

impl XdcrStats {
    /// One change the target stored: `cas_ns` its CAS, `now_ns` the clock at the answer.
    pub fn written(&self, bytes: usize, cas_ns: u64, now_ns: u64) {
        bump(&self.docs_written, 1);
        bump(&self.bytes_written, bytes as u64);
        let us = (now_ns.saturating_sub(cas_ns) / 1_000).clamp(1, LATENCY_US_MAX);
        self.latency_us.lock().saturating_record(us);
    }

    pub fn set_error(&self, error: Option<String>) {
        *self.last_error.lock() = error;
    }

    /// The figures by name, in one order, with `changes_left` (computed by the caller from
    /// the source's seqnos and the checkpoints).
    pub fn values(&self, changes_left: u64) -> Vec<(&'static str, u64)> {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        vec![
            ("changes_left", changes_left),
            ("docs_received_from_dcp", get(&self.docs_received)),
            ("docs_filtered", get(&self.docs_filtered)),
            ("docs_written", get(&self.docs_written)),
            ("docs_failed_cr_target", get(&self.docs_failed_cr_target)),
            ("docs_failed_cr_source", get(&self.docs_failed_cr_source)),
            ("data_replicated", get(&self.bytes_written)),
            ("batches", get(&self.batches)),
            ("starts", get(&self.starts)),
            ("rewinds", get(&self.rewinds)),
            ("rewinds_to_zero", get(&self.rewinds_to_zero)),
            ("resumed_vbuckets", get(&self.resumed_vbuckets)),
            ("resumed_seqnos", get(&self.resumed_seqnos)),
            ("checkpoint_unix_ms", get(&self.checkpoint_unix_ms)),
        ]
    }

    /// A copy of the latency histogram (µs).
    pub fn latency(&self) -> Histogram<u64> {
        self.latency_us.lock().clone()
    }

    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().clone()
    }
}

/// `values` and the latency as JSON, with the percentiles and the last error.
pub fn to_json(
    values: &[(&'static str, u64)],
    latency: &Histogram<u64>,
    last_error: Option<String>,
) -> serde_json::Value {
    let mut json: serde_json::Map<String, serde_json::Value> = values
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    let (p50, p99) = match latency.len() {
        0 => (0, 0),
        _ => (
            latency.value_at_quantile(0.5),
            latency.value_at_quantile(0.99),
        ),
    };
    json.insert("latency_samples".into(), json!(latency.len()));
    json.insert("latency_p50_us".into(), json!(p50));
    json.insert("latency_p99_us".into(), json!(p99));
    json.insert("last_error".into(), json!(last_error));
    serde_json::Value::Object(json)
}
