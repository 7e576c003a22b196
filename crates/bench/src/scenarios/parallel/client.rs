//! One `bench parallel` client running its build through its own smart client, one request
//! at a time (a build's file operations wait for each other). It records each operation's
//! latency, their sum (seed 004's "sum of client latency"), and when it finished. A failed
//! operation is counted and the build goes on, as a build would report and carry on.

use sluice_client::{ClusterClient, StoreOptions};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use crate::load::latency::Latency;
use crate::scenarios::parallel::build::{document, version_of, BuildOp, BuildPlan, Stage};

/// What one client's build measured.
#[derive(Debug, Clone)]
pub struct ClientOutcome {
    pub latency: Latency,
    /// The sum of every operation's latency.
    pub latency_sum: Duration,
    pub ops: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    /// From the common start to this client's last answer.
    pub finished: Duration,
}

pub async fn run_client(
    client: ClusterClient,
    plan: BuildPlan,
    doc_bytes: usize,
    start: Instant,
    done: Arc<AtomicU64>,
) -> ClientOutcome {
    tokio::time::sleep_until(start).await;
    let mut out = ClientOutcome {
        latency: Latency::new(),
        latency_sum: Duration::ZERO,
        ops: 0,
        errors: 0,
        first_error: None,
        finished: Duration::ZERO,
    };
    for stage in Stage::ALL {
        for op in plan.stage(stage) {
            let t = Instant::now();
            let result = execute(&client, &op, doc_bytes).await;
            let took = t.elapsed();
            out.latency.record(took);
            out.latency_sum += took;
            out.ops += 1;
            done.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = result {
                out.errors += 1;
                out.first_error
                    .get_or_insert_with(|| format!("{stage:?} {op:?}: {e}"));
            }
        }
    }
    out.finished = start.elapsed();
    out
}

async fn execute(client: &ClusterClient, op: &BuildOp, doc_bytes: usize) -> Result<(), String> {
    match op {
        BuildOp::Create(key) => {
            client
                .set(
                    key.as_bytes(),
                    &document(key, 1, doc_bytes),
                    StoreOptions::default(),
                )
                .await
                .map_err(|e| e.to_string())?;
        }
        BuildOp::Read(key) => {
            let doc = client
                .get(key.as_bytes())
                .await
                .map_err(|e| e.to_string())?;
            version_of(key, &doc.value).ok_or("the document is not the one written")?;
        }
        BuildOp::Update(key) => {
            let doc = client
                .get(key.as_bytes())
                .await
                .map_err(|e| e.to_string())?;
            let v = version_of(key, &doc.value).ok_or("the document is not the one written")?;
            let options = StoreOptions {
                cas: doc.cas,
                ..StoreOptions::default()
            };
            client
                .set(key.as_bytes(), &document(key, v + 1, doc_bytes), options)
                .await
                .map_err(|e| e.to_string())?;
        }
        BuildOp::Delete(key) => {
            client
                .delete(key.as_bytes(), sluice_types::Cas(0))
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}
