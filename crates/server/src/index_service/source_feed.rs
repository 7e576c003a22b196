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
//! - A vbucket's batch is due when its snapshot is complete, or once it holds
//!   [`BATCH_CHANGES_MAX`] changes or [`BATCH_BYTES_MAX`] bytes; and every vbucket's
//!   batch is due once they hold [`SOURCE_HELD_BYTES_MAX`] together, so what a source
//!   holds is bounded whatever the snapshots' sizes and the number of vbuckets (an index
//!   on a cluster of N members holds at most N times that).
//! - Group commit: the due batches of every vbucket go to the store together, in one
//!   commit, and while that group is written the stream is read on and the next group
//!   forms. Under a steady write load each write is a snapshot of its own; one commit per
//!   snapshot could not keep up, one commit per group does, and an idle source still
//!   applies each snapshot as soon as it is complete.
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
use sluice_index::{Change, Doc, VbChanges, VbPosition};
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
struct HeldChange {
    key: Vec<u8>,
    body: Option<Option<serde_json::Value>>,
    meta: sluice_query::DocMeta,
}

impl HeldChange {
    fn change(&self) -> Change<'_> {
        match &self.body {
            Some(body) => Change::Upsert(Doc {
                key: &self.key,
                body: body.as_ref(),
                meta: self.meta,
            }),
            None => Change::Delete { key: &self.key },
        }
    }
}

#[derive(Default)]
struct Batch {
    changes: Vec<HeldChange>,
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
                    c.remove(*vb);
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
        let mut held = Held::of(def.collection_id);
        // The seqno each vbucket's last applied batch reached (as saved in the store).
        let mut applied: BTreeMap<VbId, Seqno> =
            saved.iter().map(|(vb, p)| (*vb, p.seqno)).collect();
        // The one group of batches being applied (see `Group`).
        let mut in_flight: Option<tokio::task::JoinHandle<Result<Group, FeedError>>> = None;
        loop {
            if in_flight.is_none() {
                // Past the source's bound, every vbucket's batch goes in, each with the
                // position its stream reached (a valid resume point inside a snapshot).
                if held.bytes >= SOURCE_HELD_BYTES_MAX {
                    held.due.extend(held.batches.keys().copied());
                }
                if !held.due.is_empty() {
                    in_flight = Some(self.spawn_apply(held.take_due(stream.positions())));
                }
            }
            // While a group is applied the stream is read on (the next group forms), up to
            // the source's bound; past it the stream waits, and so does its producer.
            let reading = held.bytes < SOURCE_HELD_BYTES_MAX;
            let event = tokio::select! {
                _ = self.stop.notified() => {
                    // Stopping drops the stream and what it held, once the group being
                    // applied is in: the saved positions are where the next stream of
                    // these vbuckets resumes.
                    if let Some(group) = in_flight.take() {
                        self.finish(group.await??, &mut applied);
                    }
                    return Ok(());
                }
                group = async { in_flight.as_mut().expect("guarded").await }, if in_flight.is_some() => {
                    in_flight = None;
                    self.finish(group??, &mut applied);
                    continue;
                }
                e = stream.next(), if reading => e?,
            };
            let vb = event.vb();
            tracing::trace!(index = s.id.0, ?event, "index feed event");
            match &event {
                DcpEvent::StreamOpened { vb, .. } => {
                    s.confirmed.lock().entry(s.id).or_default().insert(*vb);
                    s.applied.notify_waiters();
                }
                DcpEvent::Mutation(item) => held.hold(item, true),
                DcpEvent::Deletion(item) | DcpEvent::Expiration(item) => held.hold(item, false),
                DcpEvent::Rollback { vb, to } => {
                    // The vbucket's entries are cleared once no group writes them.
                    if let Some(group) = in_flight.take() {
                        self.finish(group.await??, &mut applied);
                    }
                    held.forget(*vb);
                    applied.remove(vb);
                    if let Some(c) = s.confirmed.lock().get_mut(&s.id) {
                        c.remove(*vb);
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
            let complete = pos.seqno == pos.snap_end;
            let moved = applied.get(&vb) != Some(&pos.seqno);
            let full = held.batches.get(&vb).is_some_and(|b| {
                b.changes.len() >= BATCH_CHANGES_MAX || b.bytes >= BATCH_BYTES_MAX
            });
            if (complete && moved) || full {
                held.due.insert(vb);
            }
        }
    }

    /// Applies `group` to the store on the blocking pool.
    fn spawn_apply(&self, group: Group) -> tokio::task::JoinHandle<Result<Group, FeedError>> {
        let (store, id) = (self.shared.store.clone(), self.shared.id);
        tracing::trace!(index = id.0, vbuckets = group.parts.len(), "index group");
        tokio::task::spawn_blocking(move || {
            let parts: Vec<VbChanges<'_>> = group
                .parts
                .iter()
                .map(|(vb, batch, pos)| VbChanges {
                    vb: *vb,
                    changes: batch.changes.iter().map(HeldChange::change).collect(),
                    to: VbPosition {
                        vb_uuid: pos.vb_uuid,
                        seqno: pos.seqno,
                        snap_start: pos.snap_start,
                        snap_end: pos.snap_end,
                    },
                })
                .collect();
            store.apply_many(id, &parts)?;
            drop(parts);
            Ok(group)
        })
    }

    /// Counts an applied group, records its changes' lag, and wakes the scans waiting.
    fn finish(&self, group: Group, applied: &mut BTreeMap<VbId, Seqno>) {
        let s = &self.shared;
        // What each change waited, from its write (its CAS is the writer's clock) to here.
        let now = crate::dcp::replication_stats::now_unix_ns();
        let online = s.online.load(Ordering::Relaxed);
        let mut n = 0u64;
        for (vb, batch, pos) in &group.parts {
            n += batch.changes.len() as u64;
            if online {
                for h in &batch.changes {
                    s.lag.record(h.key.len(), h.meta.cas, now);
                }
            }
            applied.insert(*vb, pos.seqno);
            s.stats.batches_applied.fetch_add(1, Ordering::Relaxed);
        }
        s.stats.changes_applied.fetch_add(n, Ordering::Relaxed);
        s.applied.notify_waiters();
    }
}

/// Batches applied together, in one store commit: each vbucket's, with the stream position
/// it reaches.
struct Group {
    parts: Vec<(VbId, Batch, DcpPosition)>,
}

/// What a source holds until it is applied: a batch per vbucket, the bytes they hold
/// together, and the vbuckets whose batch is due (its snapshot complete, or full).
struct Held {
    /// The indexed collection: the others' changes only move the stream's position.
    collection: CollectionId,
    batches: BTreeMap<VbId, Batch>,
    bytes: usize,
    due: std::collections::BTreeSet<VbId>,
}

impl Held {
    fn of(collection: CollectionId) -> Held {
        Held {
            collection,
            batches: BTreeMap::new(),
            bytes: 0,
            due: Default::default(),
        }
    }

    /// Takes the due batches out, each with its vbucket's position now.
    fn take_due(&mut self, positions: &StreamPositions) -> Group {
        let mut parts = Vec::with_capacity(self.due.len());
        for vb in std::mem::take(&mut self.due) {
            let Some(at) = positions.get(vb).copied() else {
                continue;
            };
            let batch = self.batches.remove(&vb).unwrap_or_default();
            self.bytes -= batch.bytes;
            parts.push((vb, batch, at));
        }
        Group { parts }
    }

    /// Drops what is held for `vb` (rolled back).
    fn forget(&mut self, vb: VbId) {
        self.bytes -= self.batches.remove(&vb).map_or(0, |b| b.bytes);
        self.due.remove(&vb);
    }

    /// Holds `item` for its vbucket's next batch if it is of the indexed collection (the
    /// stream is collection-aware: its keys carry their collection's id).
    fn hold(&mut self, item: &DcpItem, live: bool) {
        let key = match sluice_types::collection::split_key(&item.key) {
            Ok((cid, key)) if cid == self.collection => key,
            _ => return,
        };
        let batch = self.batches.entry(item.vb).or_default();
        let body = live.then(|| {
            item.datatype
                .is_json()
                .then(|| serde_json::from_slice(&item.value).ok())
                .flatten()
        });
        let bytes = key.len() + item.value.len();
        batch.bytes += bytes;
        self.bytes += bytes;
        batch.changes.push(HeldChange {
            key: key.to_vec(),
            body,
            meta: sluice_query::DocMeta {
                cas: item.cas.0,
                expiration: item.expiry,
                flags: item.flags,
                is_json: item.datatype.is_json(),
            },
        });
    }
}
