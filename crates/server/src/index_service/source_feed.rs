//! One index's stream from one member: the vbuckets that are active there, applied to the
//! store a snapshot at a time, each batch with the stream position it reaches.
//!
//! - It streams committed changes only (no SyncWrite prepares): an index never holds a
//!   write that is later aborted.
//! - It starts from the positions saved with the entries: after a restart, or when the map
//!   moved a vbucket here, it resumes.
//! - A rollback of a vbucket (the member does not have the history the saved position is
//!   on, e.g. a promoted replica after a failover) clears that vbucket's entries and
//!   streams it again from zero (`rebuilt_vbuckets`); the other vbuckets are untouched.
//! - A batch is applied when its snapshot is complete, or once it holds
//!   [`BATCH_CHANGES_MAX`] changes or [`BATCH_BYTES_MAX`] bytes; and every vbucket's
//!   batch is applied once they hold [`SOURCE_HELD_BYTES_MAX`] together, so what a source
//!   holds is bounded whatever the snapshots' sizes and the number of vbuckets (an index
//!   on a cluster of N members holds at most N times that).
//! - The connection failing (a member down, not failed over yet), or the store refusing a
//!   batch, restarts this source alone from the saved positions after a pause.
//! - Told to stop (the map moved its vbuckets), it finishes the batch it is applying and
//!   ends.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sluice_client::dcp::{
    DcpEvent, DcpItem, DcpOptions, DcpPosition, DcpStream, RollbackMode, StartFrom, StreamPositions,
};
use sluice_index::{Change, Doc, VbPosition};
use sluice_types::{CollectionId, Seqno, VbId};
use tokio::sync::Notify;

use super::feeder::Shared;
use super::sources::Source;

/// Most changes one batch holds before it is applied mid-snapshot.
pub const BATCH_CHANGES_MAX: usize = 1024;
/// Most key and value bytes one batch holds before it is applied mid-snapshot.
pub const BATCH_BYTES_MAX: usize = 4 << 20;
/// Most bytes one source holds over all its vbuckets' batches.
pub const SOURCE_HELD_BYTES_MAX: usize = 8 << 20;
/// The pause before a failed source starts again, doubled after each failure in a row up to
/// [`RETRY_PAUSE_MAX`].
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

pub(super) struct SourceFeed {
    pub shared: Arc<Shared>,
    pub source: Source,
    /// Notified once, to stop.
    pub stop: Arc<Notify>,
}

/// Why one run of a source (or the feeder) ended.
#[derive(Debug, thiserror::Error)]
pub(super) enum FeedError {
    #[error("index store: {0}")]
    Store(#[from] sluice_index::IndexError),
    #[error("change stream: {0}")]
    Dcp(#[from] sluice_client::dcp::DcpError),
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

impl SourceFeed {
    /// Streams until told to stop or the index is gone; every other failure restarts the
    /// stream after a pause (doubled after each failure in a row).
    pub async fn run(self) -> Result<(), FeedError> {
        let s = self.shared.clone();
        let mut pause = RETRY_PAUSE;
        loop {
            let started = tokio::time::Instant::now();
            let e = match self.feed().await {
                Ok(()) => return Ok(()),
                Err(e @ FeedError::Store(sluice_index::IndexError::NoSuchIndex(_))) => {
                    return Err(e)
                }
                Err(e) => e,
            };
            s.stats.restarts.fetch_add(1, Ordering::Relaxed);
            // Its vbuckets count again once the producer accepts them on the next stream.
            if let Some(c) = s.confirmed.lock().get_mut(&s.id) {
                for vb in &self.source.vbuckets {
                    c.remove(vb);
                }
            }
            // A run that went on for a while was no failure in a row.
            if started.elapsed() > RETRY_PAUSE_MAX {
                pause = RETRY_PAUSE;
            }
            tracing::warn!(index = s.id.0, source = %self.source.node.id, error = %e,
                retry_in = ?pause, "index source restarts");
            tokio::select! {
                _ = self.stop.notified() => return Ok(()),
                _ = tokio::time::sleep(pause) => {}
            }
            pause = (pause * 2).min(RETRY_PAUSE_MAX);
        }
    }

    /// One stream from the source's saved positions. `Ok` once told to stop.
    async fn feed(&self) -> Result<(), FeedError> {
        let s = &self.shared;
        let def = s.store.definition(s.id)?;
        let saved = s.store.positions(s.id)?;
        let positions = StreamPositions::from_positions(self.source.vbuckets.iter().map(|&vb| {
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
        let creds = s.node.peer_credentials();
        let addr = s.node.peer_kv_addr(&self.source.node);
        let connect = s.node.member_connect_options(
            &addr,
            &def.bucket,
            (&creds.username, &creds.password),
            s.node.config.cluster_encryption.data(),
        );
        let mut opts = DcpOptions::new(connect);
        // Unique per copy: every node's copy of the index streams from the same producers,
        // and a producer closes a connection when another opens under its name.
        opts.name = format!(
            "sluice-index:{}:{}@{}:{}",
            def.bucket,
            def.name,
            s.node.config.advertise_host,
            s.node.kv_port()
        );
        opts.rollback = RollbackMode::Report;
        tracing::debug!(index = %def.name, %addr, vbuckets = self.source.vbuckets.len(),
            "index source streams");
        let mut stream = tokio::select! {
            _ = self.stop.notified() => return Ok(()),
            r = DcpStream::connect(&addr, opts, StartFrom::Positions(positions)) => r?,
        };
        let mut batches: BTreeMap<VbId, Batch> = BTreeMap::new();
        // Bytes held in `batches`, all vbuckets together.
        let mut held = 0usize;
        // The seqno each vbucket's last applied batch reached (as saved in the store).
        let mut applied: BTreeMap<VbId, Seqno> =
            saved.iter().map(|(vb, p)| (*vb, p.seqno)).collect();
        loop {
            // Stopping drops the stream and what it held: the saved positions are where
            // the next stream of these vbuckets resumes.
            let event = tokio::select! {
                _ = self.stop.notified() => return Ok(()),
                e = stream.next() => e?,
            };
            let vb = event.vb();
            tracing::trace!(index = s.id.0, ?event, "index feed event");
            match &event {
                DcpEvent::StreamOpened { vb, .. } => {
                    s.confirmed.lock().entry(s.id).or_default().insert(*vb);
                    s.applied.notify_waiters();
                }
                DcpEvent::Mutation(item) => held += hold(&mut batches, item, true),
                DcpEvent::Deletion(item) | DcpEvent::Expiration(item) => {
                    held += hold(&mut batches, item, false)
                }
                DcpEvent::Rollback { vb, to } => {
                    held -= batches.remove(vb).map_or(0, |b| b.bytes);
                    applied.remove(vb);
                    if let Some(c) = s.confirmed.lock().get_mut(&s.id) {
                        c.remove(vb);
                    }
                    let (store, id, v) = (s.store.clone(), s.id, *vb);
                    let removed =
                        tokio::task::spawn_blocking(move || store.clear_vb(id, v)).await??;
                    s.stats.rebuilt_vbuckets.fetch_add(1, Ordering::Relaxed);
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
            // Bounded across vbuckets too: past the source's bound, every vbucket's batch
            // goes in, each with the position its stream reached (a valid resume point
            // inside a snapshot).
            if held >= SOURCE_HELD_BYTES_MAX {
                due = batches.keys().copied().collect();
            }
            for v in due {
                let Some(at) = stream.positions().get(v).copied() else {
                    continue;
                };
                let batch = batches.remove(&v).unwrap_or_default();
                held -= batch.bytes;
                self.apply(v, batch, at).await?;
                applied.insert(v, at.seqno);
            }
        }
    }

    async fn apply(&self, vb: VbId, batch: Batch, pos: DcpPosition) -> Result<(), FeedError> {
        let s = &self.shared;
        let online = s.online.load(Ordering::Relaxed);
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
        let (store, id) = (s.store.clone(), s.id);
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
            s.lag.record(bytes, cas, now);
        }
        s.stats.batches_applied.fetch_add(1, Ordering::Relaxed);
        s.stats.changes_applied.fetch_add(n, Ordering::Relaxed);
        s.applied.notify_waiters();
        Ok(())
    }
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
