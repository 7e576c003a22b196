//! A node that restarted without all its data holds back its active vbuckets until each is
//! decided (`sluice_cluster::after_restart`): kept, or handed to a replica that is ahead.
//!
//! Why: after a crash the flusher's unwritten tail is gone (and an ephemeral bucket comes
//! back empty), while the replicas still hold durable writes the old copy acknowledged. A
//! node that served its copies as they are would roll its replicas back to them, and those
//! writes would be lost although the client was told they were safe. This happened in the
//! nemesis: kill -9 of an active's node, restarted within the auto-failover timeout.
//!
//! How:
//! - at start (`hold_at_start`, before the KV port serves), a restart that warmup reports
//!   not whole holds every vbucket: those the disk left active become dead, so clients get
//!   NOT_MY_VBUCKET and the replicas' streams are refused (neither reads the copy, nor is
//!   rolled back to it);
//! - the cluster agent keeps a held vbucket dead while the map makes it active here; every
//!   other state the map gives it applies as usual;
//! - this task reads the map, asks the replicas' nodes how far their copies are (the
//!   failover's `/internal/vbuckets/positions`), and decides each held vbucket: a kept one
//!   becomes active (a new failover-log branch, its prepares adopted); handed ones are
//!   published as one compare-and-set `SetChains` (the new active takes over with its own
//!   branch, this node follows it as a replica, rolling back); an undecided one is asked
//!   about again on the next map or after [`RETRY`];
//! - a held vbucket the map no longer makes active here is released to the map's state.
//!
//! A replica that never answers keeps its vbucket held: serving without it could lose the
//! writes only it holds. The auto-failover (or an operator's failover) of that replica's
//! node changes the chain and decides it.

use crate::control::BucketControl;
use crate::failover::ask_positions;
use sluice_cluster::metadata::MetaCommand;
use sluice_cluster::{after_restart, CopyPosition, NodeId, RestartVerdict, WaitReason};
use sluice_meta::MetaNode;
use sluice_server::BucketHandle;
use sluice_types::{VbId, VbState};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// How long before undecided vbuckets are asked about again without a new map.
const RETRY: Duration = Duration::from_millis(500);

/// The vbuckets held back, shared by this task and the cluster agent.
#[derive(Default)]
pub struct Held {
    vbs: parking_lot::Mutex<BTreeSet<VbId>>,
}

impl Held {
    /// The held set, locked. The agent applies a map's states under this lock, so a release
    /// never races a state being set from an older map.
    pub fn lock(&self) -> parking_lot::MutexGuard<'_, BTreeSet<VbId>> {
        self.vbs.lock()
    }

    fn snapshot(&self) -> Vec<VbId> {
        self.vbs.lock().iter().copied().collect()
    }
}

/// At start, before the KV port serves: if this node restarted into its cluster with less
/// than it had (`Bucket::warmed_up_whole`), holds every vbucket and makes the active ones
/// dead. Returns whether anything is held (then [`run`] must be started).
pub fn hold_at_start(control: &BucketControl, restarted: bool) -> bool {
    let bucket = &control.bucket.engine;
    if !restarted || bucket.warmed_up_whole() {
        return false;
    }
    let mut held = control.held.lock();
    for vb in (0..bucket.num_vbuckets()).map(VbId) {
        held.insert(vb);
        if bucket.vb_state(vb).ok() == Some(VbState::Active) {
            if let Err(e) = bucket.set_vbucket_state(vb, VbState::Dead) {
                tracing::error!(%vb, error = %e, "cannot hold the vbucket back");
            }
        }
    }
    tracing::warn!(
        vbuckets = held.len(),
        "restarted without all its data (unclean stop, or an ephemeral bucket): every active \
         vbucket is held until its replicas say whether they are ahead"
    );
    true
}

/// Decides every held vbucket, then returns.
pub async fn run(control: Arc<BucketControl>, meta: MetaNode) {
    let me = meta.id();
    let mut maps = control.bucket.watch_cluster_map();
    let mut told: BTreeMap<VbId, WaitReason> = BTreeMap::new();
    loop {
        let view = maps.borrow_and_update().clone();
        let held = control.held.snapshot();
        if held.is_empty() {
            tracing::info!("every held vbucket is decided");
            return;
        }
        let map = &view.map;
        let mut mine = Vec::new();
        for vb in held {
            match map.vbmap().chain(vb) {
                Some(chain) if chain.active == Some(me) => mine.push((vb, chain.clone())),
                // Not active here (or no map entry): the map's state is this copy's.
                _ => release(&control, vb, me),
            }
        }
        if !mine.is_empty() {
            let positions = ask_positions(&meta, &control.bucket.name, map, me).await;
            let mut hand = Vec::new();
            let mut kept = 0usize;
            for (vb, chain) in &mine {
                let Some(own) = own_position(&control.bucket, *vb) else {
                    continue;
                };
                match after_restart(chain, me, own, |n| positions.get(&(*vb, n)).copied()) {
                    RestartVerdict::Keep => {
                        release(&control, *vb, me);
                        kept += 1;
                    }
                    RestartVerdict::HandOver { to, chain } => {
                        tracing::warn!(%vb, %to, "a replica is ahead of this copy: handing it the vbucket");
                        hand.push((vb.0, chain));
                    }
                    RestartVerdict::Wait(why) => {
                        if told.insert(*vb, why) != Some(why) {
                            tracing::warn!(%vb, %why, "vbucket held");
                        }
                    }
                }
            }
            if kept > 0 {
                tracing::info!(kept, "vbuckets no replica is ahead of serve again");
            }
            if !hand.is_empty() {
                let count = hand.len();
                let cmd = MetaCommand::SetChains {
                    bucket: control.bucket.name.clone(),
                    expected_rev: map.rev(),
                    chains: hand,
                };
                match meta.propose(cmd).await {
                    Ok(Ok(_)) => {
                        tracing::warn!(vbuckets = count, "handed to replicas that were ahead")
                    }
                    // A newer map came first: decide again from it.
                    Ok(Err(rejection)) => tracing::info!(%rejection, "hand-over not published"),
                    Err(e) => tracing::warn!(error = %e, "hand-over not published"),
                }
            }
        }
        tokio::select! {
            changed = maps.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(RETRY) => {}
        }
    }
}

/// Stops holding `vb`; if the map (the node's latest) makes it active here, it becomes
/// active now.
fn release(control: &BucketControl, vb: VbId, me: NodeId) {
    let mut held = control.held.lock();
    if !held.remove(&vb) {
        return;
    }
    let view = control.bucket.cluster_map();
    let active_here = view
        .map
        .vbmap()
        .chain(vb)
        .is_some_and(|c| c.active == Some(me));
    if active_here {
        if let Err(e) = control.bucket.engine.set_vbucket_state(vb, VbState::Active) {
            tracing::error!(%vb, error = %e, "cannot make the kept vbucket active");
        }
    }
}

/// This node's copy of `vb` as warmup left it (it is held, so nothing has changed it since).
fn own_position(bucket: &BucketHandle, vb: VbId) -> Option<CopyPosition> {
    let high_seqno = bucket.engine.replica_position(vb).ok()?.high_seqno;
    let (high_prepared, _) = bucket.engine.sync_write_seqnos(vb).ok()?;
    Some(CopyPosition {
        high_prepared,
        high_seqno,
        complete: true,
    })
}
