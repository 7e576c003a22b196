//! A durable writer's wait: for the monitor's outcome, for local persistence first at the
//! persist levels (so the commit follows the fsync without waiting for the next pass), and
//! at its deadline for the abort it triggers.

use super::WriteOutcome;
use crate::bucket_handle::BucketHandle;
use sluice_types::{DurabilityLevel, Seqno, VbId};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// A durable write made (its prepare is tracked), waiting for its outcome.
#[derive(Debug)]
pub struct DurableWrite {
    pub vb: VbId,
    /// The prepare's seqno.
    pub seqno: Seqno,
    pub level: DurabilityLevel,
    pub deadline: Instant,
    pub outcome: oneshot::Receiver<WriteOutcome>,
}

/// Once the deadline passed and the abort was asked for, how long the outcome may take to
/// arrive (it is decided under one lock at once; this only guards against a lost sender).
const OUTCOME_AFTER_DEADLINE: Duration = Duration::from_secs(1);

/// Waits until `seqno` of `vb` is persisted on this node, at most `timeout`: `false` on the
/// timeout, or when the bucket refuses writes after a storage failure.
pub async fn wait_persisted(
    bucket: &BucketHandle,
    vb: VbId,
    seqno: Seqno,
    timeout: Duration,
) -> bool {
    let bucket = bucket.engine.clone();
    let done = tokio::task::spawn_blocking(move || bucket.wait_persisted(vb, seqno, timeout)).await;
    matches!(done, Ok(Ok(true)))
}

/// Waits for the write's outcome.
pub async fn wait(bucket: &BucketHandle, w: DurableWrite) -> WriteOutcome {
    let DurableWrite {
        vb,
        seqno,
        level,
        deadline,
        mut outcome,
    } = w;
    let until = tokio::time::Instant::from_std(deadline);
    if level.persist_active() {
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::select! {
            o = &mut outcome => return o.unwrap_or(WriteOutcome::Unknown),
            persisted = wait_persisted(bucket, vb, seqno, left) => {
                if persisted {
                    bucket.durability.persisted(bucket, vb);
                }
            }
        }
    }
    tokio::select! {
        o = &mut outcome => return o.unwrap_or(WriteOutcome::Unknown),
        _ = tokio::time::sleep_until(until) => {}
    }
    bucket.durability.expire(bucket, vb, Instant::now());
    match tokio::time::timeout(OUTCOME_AFTER_DEADLINE, outcome).await {
        Ok(Ok(o)) => o,
        _ => WriteOutcome::Unknown,
    }
}
