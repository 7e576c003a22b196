//! The consumer side: a node following another node's vbuckets over DCP, applying every
//! change into local replica vbuckets.
//!
//! ```text
//!   connect (backoff 100 ms → 5 s) ─► resume every vbucket from the replica's own position
//!        ▲                               │
//!        │ connection lost               ▼
//!        └──────────────────────── apply changes (seqno, CAS, rev as sent)
//!                                        │ ROLLBACK(to): to ≥ our high seqno → ask again
//!                                        │   from it; below it → reset the vbucket, from 0
//!                                        ▼
//!                                  TMPFAIL (replica out of memory) → wait and retry the same
//!                                  change; nothing more is read meanwhile, so no more is acked
//!                                  stream refused (producer not active yet) → ask again after
//!                                  200 ms while the vbucket is a replica here
//! ```
//!
//! Takeover ([`Replication::takeover`]): the vbucket's stream is closed and requested again
//! with the takeover flag; the producer sends the rest, sets its copy dead, and the replica
//! follows its SET_VBUCKET_STATE messages (pending, then active).
//!
//! Backpressure is the flow-control window: the client acks what it delivered, and this loop
//! takes the next change only after the previous one was applied. The window is 5 % of the
//! bucket quota (at least 1 MiB), as replicas of the reference server size theirs.
//!
//! The stream is the client crate's [`DcpStream`] (acks, noops, failover logs), in
//! [`RollbackMode::Report`]: storage keeps one version per key, so the replica decides how to
//! roll back (see `engine/src/replica.rs`). The decisions (when to retry a refused stream, how
//! to roll back, when to ack) are [`PassiveStreams`]'; this file is the I/O around them.

mod apply;

use crate::bucket_handle::BucketHandle;
use crate::node::Node;
use apply::{apply, complete};
use sluice_client::dcp::{
    DcpError, DcpEvent, DcpOptions, DcpPosition, DcpStream, RollbackMode, StreamPositions,
};
use sluice_dcp::passive::{
    rollback_plan, AllEnded, Applied, PassiveStreams, RollbackPlan, ACK_INTERVAL,
};
use sluice_engine::{EngineError, QueueOp, SnapshotKind, VbId, VbState};
use sluice_proto::dcp::SnapshotFlags;
use sluice_types::FailoverLog;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, Notify};

const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Why a replication connection ended; the connection is opened again after a backoff.
#[derive(Debug, thiserror::Error)]
enum FeedError {
    #[error(transparent)]
    Dcp(#[from] DcpError),
    #[error("the replica: {0}")]
    Engine(#[from] EngineError),
    #[error("resetting the replica: {0}")]
    Reset(#[from] tokio::task::JoinError),
}

/// What to follow, and from where.
#[derive(Debug, Clone)]
pub struct ReplicationSpec {
    /// The producer node's KV address (host:port).
    pub source: String,
    pub username: String,
    pub password: String,
    pub bucket: String,
    pub vbuckets: Vec<VbId>,
    /// DCP_OPEN name, e.g. `replication:<from>-><to>:<bucket>`.
    pub name: String,
    /// This node's id: the `consumer_name` the producer counts our seqno acks for.
    pub consumer_name: String,
    /// Over TLS, verifying the source against the cluster's CA (`Node::member_tls`): a
    /// member's stream when the cluster encrypts its data (`source` is then a TLS KV port).
    pub tls: bool,
}

/// Takeover requests waiting for a feed, at most one per vbucket a bucket can have (2 bytes
/// each): a rebalance asks for one vbucket at a time.
pub const TAKEOVERS_QUEUED_MAX: usize = sluice_types::limits::VBUCKETS_MAX as usize;

/// A running replication; dropping it does not stop it, [`Replication::stop`] does.
pub struct Replication {
    stop: Arc<Notify>,
    takeovers: mpsc::Sender<VbId>,
    task: tokio::task::JoinHandle<()>,
}

impl Replication {
    /// Follows `spec` into `bucket` (this node's bucket of the source bucket's name).
    pub fn start(node: Arc<Node>, bucket: Arc<BucketHandle>, spec: ReplicationSpec) -> Replication {
        let stop = Arc::new(Notify::new());
        let (takeovers, rx) = mpsc::channel(TAKEOVERS_QUEUED_MAX);
        let task = tokio::spawn(run(node, bucket, spec, stop.clone(), rx));
        Replication {
            stop,
            takeovers,
            task,
        }
    }

    /// Takes `vb` over from the producer: it streams the rest, stops taking writes, and this
    /// node's replica becomes active (with a new failover branch). The vbucket then leaves
    /// the replication. `false` if the request could not be queued (the replication has
    /// stopped, or [`TAKEOVERS_QUEUED_MAX`] requests wait already).
    pub fn takeover(&self, vb: VbId) -> bool {
        self.takeovers.try_send(vb).is_ok()
    }

    pub async fn stop(self) {
        self.stop.notify_one();
        let _ = self.task.await;
    }
}

async fn run(
    node: Arc<Node>,
    bucket: Arc<BucketHandle>,
    spec: ReplicationSpec,
    stop: Arc<Notify>,
    mut takeovers: mpsc::Receiver<VbId>,
) {
    for &vb in &spec.vbuckets {
        if let Err(e) = bucket.engine.set_vbucket_state(vb, VbState::Replica) {
            tracing::error!(%vb, error = %e, "cannot make the vbucket a replica");
            return;
        }
    }
    let mut backoff = BACKOFF_MIN;
    let mut wanted: BTreeSet<VbId> = BTreeSet::new();
    loop {
        let began = std::time::Instant::now();
        let outcome = tokio::select! {
            _ = stop.notified() => return,
            r = follow(&node, &bucket, &spec, &mut takeovers, &mut wanted) => r,
        };
        match outcome {
            Ok(()) => {
                tracing::info!(source = %spec.source, "no replica vbuckets left to follow");
                return;
            }
            Err(e) => tracing::warn!(source = %spec.source, error = %e,
                "replication stream lost; reconnecting"),
        }
        if began.elapsed() > BACKOFF_MAX * 2 {
            // It ran for a while: this is a new failure, not a repeat of the last one.
            backoff = BACKOFF_MIN;
        }
        tokio::select! {
            _ = stop.notified() => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

fn options(node: &Node, bucket: &BucketHandle, spec: &ReplicationSpec) -> DcpOptions {
    let mut connect = node.member_connect_options(
        &spec.source,
        &spec.bucket,
        (&spec.username, &spec.password),
        spec.tls,
    );
    // Every collection, keys as the engine holds them (with their collection prefix).
    connect.features.push(sluice_proto::Feature::Collections);
    let mut opts = DcpOptions::new(connect);
    opts.name = spec.name.clone();
    let quota = bucket.engine.config.quota_bytes;
    opts.window_bytes = (quota / 20).clamp(1 << 20, u64::from(u32::MAX)) as u32;
    opts.rollback = RollbackMode::Report;
    opts.priority = Some("high");
    opts.consumer_name = Some(spec.consumer_name.clone());
    // A replica holds prepares too: it acknowledges them, and a promoted replica commits
    // what it holds.
    opts.sync_writes = true;
    // A replica keeps a document's xattrs with it.
    opts.xattrs = true;
    opts
}

/// Every vbucket of the spec that is still a replica here (one taken over is active now).
fn positions(
    bucket: &BucketHandle,
    spec: &ReplicationSpec,
) -> Result<StreamPositions, EngineError> {
    let mut out = Vec::with_capacity(spec.vbuckets.len());
    for &vb in &spec.vbuckets {
        if let Some(p) = position(bucket, vb)? {
            out.push(p);
        }
    }
    Ok(StreamPositions::from_positions(out))
}

/// Where the replica `vb` resumes from; `None` if it is no longer a replica here.
fn position(bucket: &BucketHandle, vb: VbId) -> Result<Option<DcpPosition>, EngineError> {
    if !matches!(
        bucket.engine.vb_state(vb)?,
        VbState::Replica | VbState::Pending
    ) {
        return Ok(None);
    }
    let p = bucket.engine.replica_position(vb)?;
    Ok(Some(DcpPosition {
        vb,
        vb_uuid: p.vb_uuid,
        seqno: p.high_seqno,
        snap_start: p.snap_start,
        snap_end: p.snap_end,
    }))
}

/// One connection's life: `Ok` when nothing is left to follow, `Err` when the connection
/// is lost (the caller reconnects). `wanted` holds takeovers asked for and not yet started.
async fn follow(
    node: &Arc<Node>,
    bucket: &BucketHandle,
    spec: &ReplicationSpec,
    takeovers: &mut mpsc::Receiver<VbId>,
    wanted: &mut BTreeSet<VbId>,
) -> Result<(), FeedError> {
    let start = positions(bucket, spec)?;
    if start.is_empty() {
        return Ok(());
    }
    let mut stream = DcpStream::resume(&spec.source, options(node, bucket, spec), start).await?;
    let stats = node.replication.feed(&spec.name);
    let stages = &node.replication.stages;
    tracing::info!(source = %spec.source, vbuckets = spec.vbuckets.len(), name = %spec.name,
        "replication stream open");
    // The sender goes away with the `Replication` handle; then stop polling it.
    let mut asking = true;
    let mut passive = PassiveStreams::default();
    let mut ack_timer = tokio::time::interval(ACK_INTERVAL);
    ack_timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // A takeover starts once its vbucket is requested (the stream defers it until the
        // producer accepts the request).
        wanted.retain(|&vb| !stream.takeover(vb));
        let next_retry = passive.next_retry().map(tokio::time::Instant::from_std);
        let event = tokio::select! {
            vb = takeovers.recv(), if asking => {
                match vb {
                    Some(vb) => {
                        wanted.insert(vb);
                    }
                    None => asking = false,
                }
                continue;
            }
            _ = tokio::time::sleep_until(next_retry.unwrap_or_else(tokio::time::Instant::now)),
                if next_retry.is_some() =>
            {
                for vb in passive.take_due(std::time::Instant::now()) {
                    // Asked again while it is a replica here.
                    if let Some(p) = position(bucket, vb)? {
                        passive.on_restarted(stream.restart(p));
                    }
                }
                if passive.is_done() {
                    return Ok(());
                }
                continue;
            }
            _ = ack_timer.tick(), if passive.acks_pending() => {
                for (vb, in_memory, persisted) in
                    passive.acks_due(|vb| bucket.engine.persisted_seqno(vb).ok())
                {
                    stream.ack_seqno(vb, in_memory, persisted);
                }
                continue;
            }
            e = stream.next(), if !passive.is_idle() => e,
        };
        let event = match event {
            Ok(e) => e,
            Err(DcpError::AllStreamsEnded) => match passive.on_all_ended() {
                // Streams refused a moment ago will be asked for again.
                AllEnded::WaitForRetries => continue,
                AllEnded::Done => return Ok(()),
            },
            Err(DcpError::StreamRequest { vb, status }) => {
                tracing::debug!(%vb, ?status, "replication stream request refused; retrying");
                passive.on_refused(vb, std::time::Instant::now());
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let applied = match &event {
            DcpEvent::Mutation(i) | DcpEvent::Deletion(i) | DcpEvent::Expiration(i) => {
                Some((i.vb, i.seqno, Applied::Other))
            }
            DcpEvent::Prepare { item: i, .. } => Some((i.vb, i.seqno, Applied::Prepare)),
            DcpEvent::Commit { vb, seqno, .. } | DcpEvent::Abort { vb, seqno, .. } => {
                Some((*vb, *seqno, Applied::Other))
            }
            _ => None,
        };
        match event {
            DcpEvent::StreamOpened { vb, failover_log } => {
                // The replica's history is the producer's.
                bucket
                    .engine
                    .set_failover_log(vb, FailoverLog::from_entries(failover_log))?;
                passive.on_opened(vb, bucket.engine.replica_position(vb)?.high_seqno);
            }
            DcpEvent::Mutation(i) => {
                apply(bucket, &stats, stages, i, QueueOp::Mutation, false).await?
            }
            DcpEvent::Deletion(i) => {
                apply(bucket, &stats, stages, i, QueueOp::Deletion, true).await?
            }
            DcpEvent::Expiration(i) => {
                apply(bucket, &stats, stages, i, QueueOp::Expiration, true).await?
            }
            DcpEvent::Prepare {
                item,
                deleted,
                level,
            } => {
                apply(
                    bucket,
                    &stats,
                    stages,
                    item,
                    QueueOp::Prepare(level),
                    deleted,
                )
                .await?
            }
            DcpEvent::Commit {
                vb,
                key,
                prepared,
                seqno,
            } => complete(bucket, vb, key, seqno, QueueOp::Commit { prepared }).await?,
            DcpEvent::Abort {
                vb,
                key,
                prepared,
                seqno,
            } => complete(bucket, vb, key, seqno, QueueOp::Abort { prepared }).await?,
            DcpEvent::SnapshotMarker {
                vb,
                start,
                end,
                flags,
            } => {
                // A disk snapshot is deduplicated: the replica's pending writes complete by
                // key in it (see the engine's `prepares`).
                let kind = if flags.contains(SnapshotFlags::DISK) {
                    SnapshotKind::Disk
                } else {
                    SnapshotKind::Memory
                };
                bucket.engine.replica_snapshot(vb, start, end, kind)?;
                passive.on_snapshot(vb, end);
            }
            DcpEvent::Rollback { vb, to } => {
                let pos = bucket.engine.replica_position(vb)?;
                let restart = match rollback_plan(to, pos.high_seqno) {
                    // Ask again holding a complete snapshot at our high seqno.
                    RollbackPlan::Resume { seqno } => DcpPosition {
                        vb,
                        vb_uuid: pos.vb_uuid,
                        seqno,
                        snap_start: seqno,
                        snap_end: seqno,
                    },
                    RollbackPlan::StartOver => {
                        tracing::warn!(%vb, to = to.0, high = pos.high_seqno.0,
                            "replica rolls back: starting the vbucket over from 0");
                        let engine = bucket.engine.clone();
                        tokio::task::spawn_blocking(move || engine.reset_vbucket(vb)).await??;
                        DcpPosition::zero(vb)
                    }
                };
                passive.on_rolled_back(vb, restart.seqno);
                stream.restart(restart);
            }
            DcpEvent::VbucketState { vb, state } => {
                // Takeover: pending while the producer sends the rest, then active here.
                tracing::info!(%vb, state = state.as_str(), "takeover: vbucket state from the producer");
                bucket.engine.set_vbucket_state(vb, state)?;
            }
            DcpEvent::StreamEnd { vb, reason } => {
                tracing::info!(%vb, reason = reason.name(), "replication stream ended");
            }
        }
        if let Some((vb, seqno, kind)) = applied {
            // The end of a snapshot holding a prepare is acked at once: a durable write on
            // the active waits for it. The rest (mid-snapshot, persistence) goes out on the
            // timer.
            if let Some((in_memory, persisted)) =
                passive.on_applied(vb, seqno, kind, || bucket.engine.persisted_seqno(vb).ok())
            {
                stream.ack_seqno(vb, in_memory, persisted);
            }
        }
    }
}
