//! Applying what the source sent into the local replica vbucket: a document change or
//! prepare as the source numbered it, or a commit or abort of a prepare held here. A replica
//! out of memory answers TMPFAIL; the change is retried after a pause, and nothing more is
//! read meanwhile, so nothing more is acked.

use super::FeedError;
use crate::bucket_handle::BucketHandle;
use crate::dcp::replication_stats::{now_unix_ns, FeedStats};
use crate::dcp::stages::{Stage, StageLatency};
use sluice_client::dcp::DcpItem;
use sluice_engine::{EngineError, Expiry, ItemMeta, QueueOp, ReplicaChange};
use sluice_types::{Seqno, VbId};
use std::time::Duration;

/// Pause before retrying a change the replica had no memory for.
const TEMPFAIL_WAIT: Duration = Duration::from_millis(10);

/// Applies one document change or prepare (`deleted`: a tombstone, or a durable delete's
/// prepare), waiting out temporary memory pressure.
pub(super) async fn apply(
    bucket: &BucketHandle,
    stats: &FeedStats,
    stages: &StageLatency,
    item: DcpItem,
    op: QueueOp,
    deleted: bool,
) -> Result<(), FeedError> {
    stages.record(Stage::Received, item.cas.0, now_unix_ns());
    let change = ReplicaChange {
        meta: ItemMeta {
            seqno: item.seqno,
            rev_seqno: item.rev_seqno,
            cas: item.cas,
            flags: item.flags,
            expiry: match op {
                // A tombstone from an expiry keeps a non-zero expiry (see the engine).
                QueueOp::Expiration => Expiry(1),
                _ if deleted => Expiry::NEVER,
                _ => Expiry(item.expiry),
            },
            datatype: item.datatype,
            deleted,
            delete_time: item.delete_time.unwrap_or(0),
        },
        key: item.key,
        value: item.value,
        op,
    };
    let bytes = change.key.len() + change.value.len();
    apply_change(bucket, item.vb, change).await?;
    let now = now_unix_ns();
    stats.record(bytes, item.cas.0, now);
    stages.record(Stage::Applied, item.cas.0, now);
    Ok(())
}

/// Applies a commit or an abort: the engine takes the rest from the prepare it holds.
pub(super) async fn complete(
    bucket: &BucketHandle,
    vb: VbId,
    key: bytes::Bytes,
    seqno: Seqno,
    op: QueueOp,
) -> Result<(), FeedError> {
    let change = ReplicaChange {
        key,
        value: bytes::Bytes::new(),
        meta: ItemMeta {
            seqno,
            ..ItemMeta::default()
        },
        op,
    };
    apply_change(bucket, vb, change).await
}

async fn apply_change(
    bucket: &BucketHandle,
    vb: VbId,
    change: ReplicaChange,
) -> Result<(), FeedError> {
    loop {
        match bucket.engine.apply_replica(vb, change.clone()) {
            Ok(()) => return Ok(()),
            Err(EngineError::TempFail) => tokio::time::sleep(TEMPFAIL_WAIT).await,
            Err(e) => return Err(e.into()),
        }
    }
}
