//! One index's feeder: a DCP stream of its bucket, applied to the store a snapshot at a
//! time, each batch with the stream position it reaches.
//!
//! - It streams committed changes only (no SyncWrite prepares): an index never holds a
//!   write that is later aborted.
//! - It starts from the positions saved with the entries: after a restart it resumes, and
//!   says so in the log and in `resumed_vbuckets`.
//! - A rollback of a vbucket clears that vbucket's entries and streams it again from zero
//!   (`rebuilt_vbuckets`); the other vbuckets are untouched.
//! - A batch is applied when its snapshot is complete, or once it holds
//!   [`BATCH_CHANGES_MAX`] changes or [`BATCH_BYTES_MAX`] bytes; and every vbucket's
//!   batch is applied once they hold [`FEEDER_HELD_BYTES_MAX`] together, so what a feeder
//!   holds is bounded whatever the snapshots' sizes and the number of vbuckets.
//! - The connection failing, or the store refusing a batch, restarts the feeder from the
//!   saved positions after a pause (what was not applied is streamed again).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sluice_client::dcp::{
    DcpEvent, DcpItem, DcpOptions, DcpPosition, DcpStream, RollbackMode, StartFrom, StreamPositions,
};
use sluice_client::ConnectOptions;
use sluice_index::{Change, Doc, IndexId, IndexState, IndexStore, VbPosition};
use sluice_types::{CollectionId, Seqno, VbId, VbState};
use tokio::sync::Notify;

use crate::node::Node;

/// Most changes one batch holds before it is applied mid-snapshot.
pub const BATCH_CHANGES_MAX: usize = 1024;
/// Most key and value bytes one batch holds before it is applied mid-snapshot.
pub const BATCH_BYTES_MAX: usize = 4 << 20;
/// Most bytes one feeder holds over all its vbuckets' batches.
pub const FEEDER_HELD_BYTES_MAX: usize = 8 << 20;
/// The pause before a failed feeder starts again, doubled after each failure in a row up to
/// [`RETRY_PAUSE_MAX`] (a bucket not opened yet after a restart is one such failure).
const RETRY_PAUSE: Duration = Duration::from_millis(100);
const RETRY_PAUSE_MAX: Duration = Duration::from_secs(5);

/// Counted since the node started, over every feeder.
#[derive(Debug, Default)]
pub struct FeederCounters {
    pub batches_applied: AtomicU64,
    pub changes_applied: AtomicU64,
    /// Vbuckets a feeder took up again from a saved position (not from zero).
    pub resumed_vbuckets: AtomicU64,
    /// Vbuckets cleared and streamed again from zero after a rollback.
    pub rebuilt_vbuckets: AtomicU64,
    pub restarts: AtomicU64,
}

pub(super) struct Feeder {
    pub node: Arc<Node>,
    pub store: Arc<IndexStore>,
    pub id: IndexId,
    pub applied: Arc<Notify>,
    pub stats: Arc<FeederCounters>,
    /// The vbuckets the producer accepted this feeder's position for, by index (see
    /// `IndexService::confirmed`).
    pub confirmed: Arc<
        parking_lot::Mutex<std::collections::HashMap<IndexId, std::collections::HashSet<VbId>>>,
    >,
    /// Write-to-index lag of this index, recorded once it is online.
    pub lag: Arc<crate::dcp::replication_stats::FeedStats>,
}

/// Why one run of the feeder ended.
#[derive(Debug, thiserror::Error)]
enum FeedError {
    #[error("index store: {0}")]
    Store(#[from] sluice_index::IndexError),
    #[error("change stream: {0}")]
    Dcp(#[from] sluice_client::dcp::DcpError),
    #[error("bucket {0} is not on this node")]
    NoBucket(String),
    #[error("the store task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// A change held until its batch is applied.
struct Held {
    key: Vec<u8>,
    body: Option<Option<serde_json::Value>>,
    meta: sluice_query::DocMeta,
}

#[derive(Default)]
struct Batch {
    changes: Vec<Held>,
    bytes: usize,
}

impl Feeder {
    pub async fn run(self) {
        let mut pause = RETRY_PAUSE;
        loop {
            let started = tokio::time::Instant::now();
            match self.feed().await {
                Ok(()) => return,
                Err(FeedError::Store(sluice_index::IndexError::NoSuchIndex(_))) => return,
                Err(e) => {
                    self.stats.restarts.fetch_add(1, Ordering::Relaxed);
                    // A run that went on for a while was no failure in a row.
                    if started.elapsed() > RETRY_PAUSE_MAX {
                        pause = RETRY_PAUSE;
                    }
                    tracing::warn!(index = self.id.0, error = %e, retry_in = ?pause,
                        "index feeder restarts");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(RETRY_PAUSE_MAX);
                }
            }
        }
    }

    async fn feed(&self) -> Result<(), FeedError> {
        let def = self.store.definition(self.id)?;
        let bucket = self
            .node
            .buckets
            .get(&def.bucket)
            .ok_or_else(|| FeedError::NoBucket(def.bucket.clone()))?;
        let saved = self.store.positions(self.id)?;
        let vbuckets = bucket.engine.num_vbuckets();
        let positions = StreamPositions::from_positions((0..vbuckets).map(|vb| {
            let vb = VbId(vb);
            match saved.get(&vb) {
                Some(p) => DcpPosition {
                    vb,
                    vb_uuid: p.vb_uuid,
                    seqno: p.seqno,
                    snap_start: p.snap_start,
                    snap_end: p.snap_end,
                },
                None => DcpPosition::zero(vb),
            }
        }));
        let resumed = saved.values().filter(|p| p.seqno > Seqno::ZERO).count();
        self.stats
            .resumed_vbuckets
            .fetch_add(resumed as u64, Ordering::Relaxed);
        tracing::info!(index = %def.name, bucket = %def.bucket, resumed_vbuckets = resumed,
            from_zero = usize::from(vbuckets) - resumed, "index feeder starts");
        // Online once every vbucket reaches what was visible when the build started.
        let mut build_targets: Option<BTreeMap<VbId, Seqno>> = (def.state == IndexState::Building)
            .then(|| {
                bucket
                    .engine
                    .vb_visible_seqnos(Some(VbState::Active))
                    .into_iter()
                    .collect()
            });
        let creds = self.node.peer_credentials();
        let mut opts = DcpOptions::new(ConnectOptions::sluice(
            &creds.username,
            &creds.password,
            &def.bucket,
        ));
        opts.name = format!("sluice-index:{}:{}", def.bucket, def.name);
        opts.rollback = RollbackMode::Report;
        let addr = format!(
            "{}:{}",
            self.node.config.advertise_host,
            self.node.kv_port()
        );
        let mut stream = DcpStream::connect(&addr, opts, StartFrom::Positions(positions)).await?;
        let mut batches: BTreeMap<VbId, Batch> = BTreeMap::new();
        // Bytes held in `batches`, all vbuckets together.
        let mut held = 0usize;
        // The seqno each vbucket's last applied batch reached (as saved in the store).
        let mut applied: BTreeMap<VbId, Seqno> =
            saved.iter().map(|(vb, p)| (*vb, p.seqno)).collect();
        loop {
            let event = stream.next().await?;
            let vb = event.vb();
            tracing::trace!(index = self.id.0, ?event, "index feed event");
            match &event {
                DcpEvent::StreamOpened { vb, .. } => {
                    self.confirmed
                        .lock()
                        .entry(self.id)
                        .or_default()
                        .insert(*vb);
                    self.applied.notify_waiters();
                }
                DcpEvent::Mutation(item) => held += hold(&mut batches, item, true),
                DcpEvent::Deletion(item) | DcpEvent::Expiration(item) => {
                    held += hold(&mut batches, item, false)
                }
                DcpEvent::Rollback { vb, to } => {
                    held -= batches.remove(vb).map_or(0, |b| b.bytes);
                    applied.remove(vb);
                    if let Some(c) = self.confirmed.lock().get_mut(&self.id) {
                        c.remove(vb);
                    }
                    let (store, id, v) = (self.store.clone(), self.id, *vb);
                    let removed =
                        tokio::task::spawn_blocking(move || store.clear_vb(id, v)).await??;
                    self.stats.rebuilt_vbuckets.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(index = %def.name, vb = vb.0, rollback_to = to.0, removed,
                        "index vbucket rolled back: cleared and streamed again from zero");
                    stream.restart(DcpPosition::zero(*vb));
                    continue;
                }
                _ => {}
            }
            let Some(pos) = stream.positions().get(vb).copied() else {
                continue;
            };
            let batch = batches.entry(vb).or_default();
            let complete = pos.seqno == pos.snap_end;
            let full = batch.changes.len() >= BATCH_CHANGES_MAX || batch.bytes >= BATCH_BYTES_MAX;
            let moved = applied.get(&vb) != Some(&pos.seqno);
            let mut due: Vec<VbId> = Vec::new();
            if (complete && moved) || full {
                due.push(vb);
            }
            // Bounded across vbuckets too: past the feeder's bound, every vbucket's batch
            // goes in, each with the position its stream reached (a valid resume point
            // inside a snapshot).
            if held >= FEEDER_HELD_BYTES_MAX {
                due = batches.keys().copied().collect();
            }
            let any_applied = !due.is_empty();
            for v in due {
                let Some(at) = stream.positions().get(v).copied() else {
                    continue;
                };
                let batch = batches.remove(&v).unwrap_or_default();
                held -= batch.bytes;
                self.apply(v, batch, at, build_targets.is_none()).await?;
                applied.insert(v, at.seqno);
            }
            if let (true, Some(targets)) = (any_applied, &build_targets) {
                if caught_up(targets, &applied) {
                    self.store.set_state(self.id, IndexState::Online)?;
                    tracing::info!(index = %def.name, "index online");
                    build_targets = None;
                }
            }
        }
    }

    async fn apply(
        &self,
        vb: VbId,
        batch: Batch,
        pos: DcpPosition,
        online: bool,
    ) -> Result<(), FeedError> {
        // What each change waited, from its write (its CAS is the writer's clock) to here.
        let stamps: Vec<(usize, u64)> = if online {
            batch
                .changes
                .iter()
                .map(|h| (h.key.len(), h.meta.cas))
                .collect()
        } else {
            Vec::new()
        };
        let (store, id) = (self.store.clone(), self.id);
        let n = batch.changes.len() as u64;
        tracing::trace!(
            index = id.0,
            vb = vb.0,
            changes = n,
            seqno = pos.seqno.0,
            "index batch"
        );
        tokio::task::spawn_blocking(move || {
            let changes: Vec<Change<'_>> = batch
                .changes
                .iter()
                .map(|h| match &h.body {
                    Some(body) => Change::Upsert(Doc {
                        key: &h.key,
                        body: body.as_ref(),
                        meta: h.meta,
                    }),
                    None => Change::Delete { key: &h.key },
                })
                .collect();
            let to = VbPosition {
                vb_uuid: pos.vb_uuid,
                seqno: pos.seqno,
                snap_start: pos.snap_start,
                snap_end: pos.snap_end,
            };
            store.apply(id, vb, &changes, to)
        })
        .await??;
        let now = crate::dcp::replication_stats::now_unix_ns();
        for (bytes, cas) in stamps {
            self.lag.record(bytes, cas, now);
        }
        self.stats.batches_applied.fetch_add(1, Ordering::Relaxed);
        self.stats.changes_applied.fetch_add(n, Ordering::Relaxed);
        self.applied.notify_waiters();
        Ok(())
    }
}

/// Whether every vbucket reached its build target (an empty vbucket has nothing to reach),
/// by the seqnos the feeder's batches reached.
fn caught_up(targets: &BTreeMap<VbId, Seqno>, applied: &BTreeMap<VbId, Seqno>) -> bool {
    targets
        .iter()
        .all(|(vb, want)| *want == Seqno::ZERO || applied.get(vb).is_some_and(|at| at >= want))
}

/// Holds `item` for its vbucket's next batch. The stream is collection-aware (its keys
/// carry their collection's id): only the default collection is indexed so far, so the
/// others' changes only move the position.
/// Returns the bytes it now holds for it.
fn hold(batches: &mut BTreeMap<VbId, Batch>, item: &DcpItem, live: bool) -> usize {
    let key = match sluice_types::collection::split_key(&item.key) {
        Ok((CollectionId::DEFAULT, key)) => key,
        _ => return 0,
    };
    let batch = batches.entry(item.vb).or_default();
    let body = live.then(|| {
        item.datatype
            .is_json()
            .then(|| serde_json::from_slice(&item.value).ok())
            .flatten()
    });
    let bytes = key.len() + item.value.len();
    batch.bytes += bytes;
    batch.changes.push(Held {
        key: key.to_vec(),
        body,
        meta: sluice_query::DocMeta {
            cas: item.cas.0,
            expiration: item.expiry,
            flags: item.flags,
            is_json: item.datatype.is_json(),
        },
    });
    bytes
}
