//! The monitors of this node's active vbuckets, their waiting writers, and the engine calls
//! that carry out what the monitors decide.

use crate::bucket_handle::BucketHandle;
use parking_lot::Mutex;
use sluice_cluster::NodeId;
use sluice_dcp::durability::{
    ActiveMonitor, AddError, Chain, Impossible, Outcome, ReplicaAck, Resolution,
};
use sluice_engine::{EngineError, Mutation};
use sluice_types::{DurabilityLevel, Seqno, VbId, VbState, VbUuid};
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::time::Instant;
use tokio::sync::oneshot;

/// How a durable write ended, as its writer is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    Committed,
    /// Aborted at its deadline: the old value stays. The client hears "ambiguous", as
    /// Couchbase Server answers a timeout.
    Aborted,
    /// The vbucket left this node (or the engine refused the commit): the prepare may yet
    /// be committed by whoever is active next.
    Unknown,
}

/// Why a durable write was not made.
#[derive(Debug, thiserror::Error)]
pub enum TrackError {
    #[error(transparent)]
    Impossible(#[from] Impossible),
    /// The map does not (yet) place this vbucket's active here, though the engine may say
    /// it is active (a takeover ahead of the map): there is no chain to count.
    #[error("the vbucket is moving to this node; retry")]
    Moving,
    #[error(transparent)]
    Engine(#[from] EngineError),
}

struct VbEntry {
    /// The failover-log branch this monitor counts acks for.
    vb_uuid: VbUuid,
    monitor: ActiveMonitor<NodeId>,
    waiters: HashMap<Seqno, oneshot::Sender<WriteOutcome>>,
    /// The producer connection that delivered each replica's latest ack.
    ack_conns: HashMap<NodeId, u64>,
}

#[derive(Default)]
pub struct DurabilityMonitor {
    vbs: Mutex<HashMap<VbId, VbEntry>>,
    /// Active vbuckets with inherited prepares whose monitor could not start yet (the map
    /// does not name this node their active yet). Lock order: `vbs`, then this.
    to_adopt: Mutex<std::collections::BTreeSet<VbId>>,
}

impl DurabilityMonitor {
    /// Makes a durable write and tracks it, atomically: `write` runs the engine call (with
    /// the durability level), and the prepare it returns is tracked before any other
    /// durable write or ack of the vbucket is looked at. Returns the prepare's mutation and
    /// the receiver of its outcome (with whatever else `write` returned).
    pub fn write<T>(
        &self,
        bucket: &BucketHandle,
        vb: VbId,
        level: DurabilityLevel,
        deadline: Instant,
        write: impl FnOnce() -> Result<(Mutation, T), EngineError>,
    ) -> Result<((Mutation, T), oneshot::Receiver<WriteOutcome>), TrackError> {
        let mut vbs = self.vbs.lock();
        let entry = entry(&mut vbs, bucket, vb)?.ok_or(TrackError::Moving)?;
        entry.monitor.chain().check_possible()?;
        let (m, extra) = write()?;
        let (tx, rx) = oneshot::channel();
        entry.waiters.insert(m.seqno, tx);
        match entry.monitor.add(m.seqno, level, Some(deadline)) {
            Ok(resolutions) => apply(bucket, vb, entry, resolutions),
            Err(e) => {
                // The chain was checked under this same lock: only a bug gets here. The
                // prepare must not stay pending with nobody tracking it.
                tracing::error!(%vb, seqno = %m.seqno, error = %e, "durable write not tracked");
                let outcome = match bucket.engine.abort(vb, m.seqno) {
                    Ok(_) => WriteOutcome::Aborted,
                    Err(_) => WriteOutcome::Unknown,
                };
                notify(entry, m.seqno, outcome);
                if let AddError::Impossible(i) = e {
                    return Err(i.into());
                }
            }
        }
        Ok(((m, extra), rx))
    }

    /// A replica's DCP_SEQNO_ACKNOWLEDGED, received on producer connection `conn`.
    pub fn ack(
        &self,
        bucket: &BucketHandle,
        conn: u64,
        vb: VbId,
        from: NodeId,
        in_memory: Seqno,
        persisted: Option<Seqno>,
    ) {
        let mut vbs = self.vbs.lock();
        let Ok(Some(entry)) = entry(&mut vbs, bucket, vb) else {
            return;
        };
        entry.ack_conns.insert(from, conn);
        let ack = ReplicaAck {
            in_memory,
            persisted: persisted.map_or(Seqno::ZERO, |p| p.min(in_memory)),
        };
        let resolutions = entry.monitor.ack(from, ack);
        apply(bucket, vb, entry, resolutions);
    }

    /// Producer connection `conn` closed: the acks it delivered (and no newer connection
    /// of the same replica replaced) no longer count.
    pub fn connection_closed(&self, conn: u64) {
        for entry in self.vbs.lock().values_mut() {
            let gone: Vec<NodeId> = entry
                .ack_conns
                .iter()
                .filter(|(_, &c)| c == conn)
                .map(|(&n, _)| n)
                .collect();
            for n in gone {
                entry.ack_conns.remove(&n);
                entry.monitor.forget(n);
            }
        }
    }

    /// The active persisted `vb` further (a persist-level writer saw it happen).
    pub fn persisted(&self, bucket: &BucketHandle, vb: VbId) {
        let Ok(seqno) = bucket.engine.persisted_seqno(vb) else {
            return;
        };
        let mut vbs = self.vbs.lock();
        if let Some(entry) = vbs.get_mut(&vb) {
            let resolutions = entry.monitor.persisted(seqno);
            apply(bucket, vb, entry, resolutions);
        }
    }

    /// Aborts what is due in `vb` (a writer reached its deadline).
    pub fn expire(&self, bucket: &BucketHandle, vb: VbId, now: Instant) {
        let mut vbs = self.vbs.lock();
        if let Some(entry) = vbs.get_mut(&vb) {
            let resolutions = entry.monitor.tick(now);
            apply(bucket, vb, entry, resolutions);
        }
    }

    /// The periodic pass ([`super::ticker`]): drops the monitors of vbuckets no longer
    /// active here (their writers hear "unknown"), follows chain changes and local
    /// persistence, aborts what is due; and starts the monitors of active vbuckets that
    /// inherited prepares (a promotion, warmup), which adopt them.
    pub fn tick(&self, bucket: &BucketHandle, now: Instant) {
        let mut vbs = self.vbs.lock();
        let vb_ids: Vec<VbId> = vbs.keys().copied().collect();
        for vb in vb_ids {
            let Some(entry) = vbs.get_mut(&vb) else {
                continue;
            };
            let current = still_active(bucket, vb, entry.vb_uuid).then(|| chain_of(bucket, vb));
            let Some(Some(chain)) = current else {
                let entry = vbs.remove(&vb).expect("present");
                drop_entry(vb, entry);
                continue;
            };
            let mut resolutions = Vec::new();
            if &chain != entry.monitor.chain() {
                resolutions.extend(entry.monitor.set_chain(chain));
            }
            if let Ok(p) = bucket.engine.persisted_seqno(vb) {
                resolutions.extend(entry.monitor.persisted(p));
            }
            resolutions.extend(entry.monitor.tick(now));
            apply(bucket, vb, entry, resolutions);
        }
        let mut to_adopt = self.to_adopt.lock();
        to_adopt.extend(bucket.engine.take_inherited_prepares());
        // Kept only while the vbucket is active here and the map does not say so yet.
        to_adopt.retain(|&vb| matches!(entry(&mut vbs, bucket, vb), Ok(None)));
    }

    /// How many durable writes are tracked (stats).
    pub fn tracked(&self) -> usize {
        self.vbs.lock().values().map(|e| e.monitor.tracked()).sum()
    }
}

/// The vbucket's entry, created if it is active here under a chain the map gives. A new
/// entry adopts the prepares the engine holds (with no deadline: nobody waits for them).
fn entry<'a>(
    vbs: &'a mut HashMap<VbId, VbEntry>,
    bucket: &BucketHandle,
    vb: VbId,
) -> Result<Option<&'a mut VbEntry>, EngineError> {
    let vb_uuid = bucket.engine.vb_uuid(vb)?;
    if let Some(e) = vbs.get(&vb) {
        if !still_active(bucket, vb, e.vb_uuid) || e.vb_uuid != vb_uuid {
            let e = vbs.remove(&vb).expect("present");
            drop_entry(vb, e);
        }
    }
    match vbs.entry(vb) {
        Entry::Occupied(o) => Ok(Some(o.into_mut())),
        Entry::Vacant(v) => Ok(new_entry(bucket, vb, vb_uuid)?.map(|e| v.insert(e))),
    }
}

/// A monitor for `vb`, active here under `vb_uuid`, if the map gives its chain.
fn new_entry(
    bucket: &BucketHandle,
    vb: VbId,
    vb_uuid: VbUuid,
) -> Result<Option<VbEntry>, EngineError> {
    if bucket.engine.vb_state(vb)? != VbState::Active {
        return Err(EngineError::NotMyVbucket);
    }
    let Some(chain) = chain_of(bucket, vb) else {
        return Ok(None);
    };
    let possible = chain.check_possible();
    let mut monitor = ActiveMonitor::new(chain, bucket.engine.persisted_seqno(vb)?);
    let mut adopted = Vec::new();
    for p in bucket.engine.pending_writes(vb)? {
        match &possible {
            // Prepares this active did not make (or lost the writer of) may have been
            // acknowledged: they are re-committed, never aborted, once the chain holds them.
            Ok(()) => match monitor.add(p.seqno, p.level, None) {
                Ok(r) => adopted.extend(r),
                Err(e) => tracing::error!(%vb, seqno = %p.seqno, error = %e,
                    "a pending prepare cannot be tracked"),
            },
            // The chain cannot reach a majority (a failover left a slot empty): this copy is
            // all there is, and waiting for a rebalance would keep the keys unreadable. It
            // commits them at once (Couchbase Server waits; see the README).
            Err(_) => adopted.push(Resolution {
                seqno: p.seqno,
                outcome: Outcome::Commit,
            }),
        }
    }
    if !adopted.is_empty() && possible.is_err() {
        tracing::warn!(%vb, prepares = adopted.len(),
            "inherited prepares re-committed at once: the new chain cannot reach a majority");
    }
    let mut e = VbEntry {
        vb_uuid,
        monitor,
        waiters: HashMap::new(),
        ack_conns: HashMap::new(),
    };
    apply(bucket, vb, &mut e, adopted);
    Ok(Some(e))
}

fn still_active(bucket: &BucketHandle, vb: VbId, vb_uuid: VbUuid) -> bool {
    bucket.engine.vb_state(vb).ok() == Some(VbState::Active)
        && bucket.engine.vb_uuid(vb).ok() == Some(vb_uuid)
}

/// The vbucket's chain, if the map places its active here.
fn chain_of(bucket: &BucketHandle, vb: VbId) -> Option<Chain<NodeId>> {
    let view = bucket.cluster_map();
    let chain = view.map.vbmap().chain(vb)?;
    (chain.active == Some(view.this)).then(|| Chain {
        active: view.this,
        replicas: chain.replicas.clone(),
    })
}

/// Carries out the monitor's decisions, in order, and tells the writers.
fn apply(bucket: &BucketHandle, vb: VbId, entry: &mut VbEntry, resolutions: Vec<Resolution>) {
    for r in resolutions {
        let outcome = match r.outcome {
            Outcome::Commit => match bucket.engine.commit(vb, r.seqno) {
                Ok(_) => WriteOutcome::Committed,
                Err(e) => {
                    tracing::warn!(%vb, seqno = %r.seqno, error = %e, "commit refused");
                    WriteOutcome::Unknown
                }
            },
            Outcome::Abort => match bucket.engine.abort(vb, r.seqno) {
                Ok(_) => WriteOutcome::Aborted,
                Err(e) => {
                    tracing::warn!(%vb, seqno = %r.seqno, error = %e, "abort refused");
                    WriteOutcome::Unknown
                }
            },
        };
        notify(entry, r.seqno, outcome);
    }
}

fn notify(entry: &mut VbEntry, seqno: Seqno, outcome: WriteOutcome) {
    if let Some(tx) = entry.waiters.remove(&seqno) {
        // The writer may have gone (its connection closed): nothing to tell.
        let _ = tx.send(outcome);
    }
}

/// A monitor whose vbucket is no longer active here: its writers hear "unknown" (dropping
/// their senders says so).
fn drop_entry(vb: VbId, mut entry: VbEntry) {
    let pending = entry.monitor.clear();
    if !pending.is_empty() {
        tracing::info!(%vb, pending = pending.len(),
            "vbucket no longer active here: durable writes in flight end as unknown");
    }
    entry.waiters.clear();
}
