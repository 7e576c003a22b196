//! Index freshness (Sluice): how long after a write is acknowledged a not_bounded query
//! through the index finds it. The prober writes a document whose `email` is new, takes
//! the moment the set is acknowledged, then repeats the point query (no pause) until it
//! returns the document; the lag is from the ack to the answer that has it, so it includes
//! up to one query's latency. Meanwhile the writer rewrites other documents with new
//! emails at the target rate.

use serde_json::json;
use sluice_client::{Client, StoreOptions};
use std::time::{Duration, Instant};

use crate::load::latency::Latency;
use crate::scenarios::query::docs::{fields_doc, probe_email};
use crate::scenarios::query::n1ql::N1qlConn;
use crate::scenarios::query::sluice_side::PROBE;

/// A document still not visible after this is counted as a timeout, and the probe moves on.
pub const VISIBLE_TIMEOUT: Duration = Duration::from_secs(30);

pub struct ProbePlan {
    /// Unique to the run and rate: the probes' emails and keys carry it.
    pub tag: String,
    /// Samples written from here on are kept.
    pub measure_from: Instant,
    /// The prober stops once past this with enough samples...
    pub until: Instant,
    pub min_samples: u64,
    /// ...and in any case here.
    pub hard_until: Instant,
}

#[derive(Debug, Clone, Default)]
pub struct ProbeOutcome {
    pub lag: Latency,
    pub samples: u64,
    /// Probes never seen within [`VISIBLE_TIMEOUT`].
    pub timeouts: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    /// When the prober stopped (the writer is stopped then too).
    pub ended: Option<Instant>,
}

pub async fn probe(kv: &mut Client, n1ql: &mut N1qlConn, plan: &ProbePlan) -> ProbeOutcome {
    let mut out = ProbeOutcome::default();
    for n in 0u64.. {
        let now = Instant::now();
        let enough = out.samples >= plan.min_samples;
        if now >= plan.hard_until || (now >= plan.until && enough) {
            break;
        }
        match one_probe(kv, n1ql, &plan.tag, n).await {
            Ok(Some(lag)) if now >= plan.measure_from => {
                out.lag.record(lag);
                out.samples += 1;
            }
            Ok(Some(_)) => {}
            Ok(None) => out.timeouts += 1,
            Err(e) => {
                out.errors += 1;
                out.first_error.get_or_insert(e);
                // A failing server would make this spin: pause before the next probe.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    out.ended = Some(Instant::now());
    out
}

/// One probe: the ack-to-visible lag, or `None` if never visible in time.
async fn one_probe(
    kv: &mut Client,
    n1ql: &mut N1qlConn,
    tag: &str,
    n: u64,
) -> Result<Option<Duration>, String> {
    let email = probe_email(tag, n);
    let doc = fields_doc(&email, i64::MIN + 1, 0, 0, n, n);
    let key = format!("p.{tag}.{n}");
    kv.set(key.as_bytes(), doc.as_bytes(), StoreOptions::default())
        .await
        .map_err(|e| format!("probe set: {e}"))?;
    let acked = Instant::now();
    let query = json!({"statement": PROBE, "$e": email});
    while acked.elapsed() < VISIBLE_TIMEOUT {
        let rows = n1ql
            .count(&query)
            .await
            .map_err(|e| format!("probe query: {e}"))?;
        if rows > 0 {
            return Ok(Some(acked.elapsed()));
        }
    }
    Ok(None)
}
