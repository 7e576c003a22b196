//! The rebalance orchestrator: carries out `plan_rebalance`'s moves one vbucket at a time,
//! with data, while clients keep working.
//!
//! ```text
//!  StartRebalance(target) ─► SetMap: the map lists the new nodes too (same chains)
//!     │
//!     ▼  for each move, in the plan's order:
//!  builds: each node entering the chain streams the vbucket from its active
//!     │    (POST /internal/rebalance/build), until it holds what the active held
//!     ▼
//!  takeover (the active moves): the new active's replication asks for a takeover stream;
//!     │    the old active sends the rest, turns dead, the new one active (new branch)
//!     ▼
//!  SetChains(vb → new chain): every node's agent applies it (builds end, feeds follow)
//!     ▼
//!  SetMap: the map lists the target nodes only ─► FinishRebalance: nodes outside the
//!     target are ejected (and leave the Raft group)
//! ```
//!
//! A client writing to the old active between the takeover and the new map gets
//! NOT_MY_VBUCKET with the map it must retry with; nothing else changes for it. On an error
//! the rebalance is aborted where it stands: every map published so far is consistent, and
//! a new rebalance plans again from it. Its metadata commands are compare-and-set on the
//! map revision.
//!
//! The orchestrator runs on the metadata leader (`routes` forwards a request made to
//! another node). It checks that it still leads before each step and while it waits, and
//! stops without aborting when it does not: the rebalance stays recorded, and the new
//! leader's janitor first repairs what the stop left (a takeover whose chain was never
//! published) and then resumes it (`resume`: the moves still needed, planned from the
//! map as it stands, onto the recorded target).
//!
//! Fault injection for the tests: with `SLUICE_FAILPOINT=rebalance-after-takeover` in its
//! environment, the orchestrator aborts its process right after the first takeover between
//! two other nodes, before the chain that records it (`failpoint`).

mod error;
mod failpoint;
pub(crate) mod routes;

pub use error::RebalanceError;

use crate::peer;
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::json;
use sluice_cluster::metadata::{MetaCommand, NodeStatus};
use sluice_cluster::{plan_rebalance, ClusterMap, NodeId, NodeInfo, RebalancePlan, VbMap, VbMove};
use sluice_meta::MetaNode;
use sluice_types::VbId;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long one build may take to catch up, and a takeover to complete.
const MOVE_TIMEOUT: Duration = Duration::from_secs(300);
const POLL: Duration = Duration::from_millis(20);
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// The route that deletes a moved-out copy (also the janitor's).
pub(crate) const DROP_PATH: &str = "/internal/rebalance/drop";

/// What `GET /api/v1/cluster/rebalance` reports.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RebalanceStatus {
    pub running: bool,
    pub target: Vec<u32>,
    pub moves_total: usize,
    pub moves_done: usize,
    /// Why the last rebalance stopped, if it failed.
    pub error: Option<String>,
    /// Resumed here after the leader that started it stopped.
    pub resumed: bool,
    pub elapsed_ms: u64,
}

pub type SharedStatus = Arc<Mutex<RebalanceStatus>>;

/// Where a run starts from.
enum Origin {
    /// A new rebalance onto every active or joining node but these.
    Fresh { eject: Vec<NodeId> },
    /// The rebalance the metadata records, whose orchestrator stopped.
    Resume,
}

/// Starts a rebalance onto every active or joining node except `eject`, in the background.
/// Refused if one runs already (here, or recorded in the cluster state), or if this node
/// does not lead the metadata.
pub fn start(
    meta: MetaNode,
    status: SharedStatus,
    eject: Vec<NodeId>,
) -> Result<(), RebalanceError> {
    if meta.state().borrow().rebalance().is_some() {
        return Err(RebalanceError::RecordedInProgress);
    }
    spawn(meta, status, Origin::Fresh { eject })
}

/// Resumes the rebalance the metadata records, in the background (the janitor's call, on
/// the leader, once the map and the copies agree).
pub fn resume(meta: MetaNode, status: SharedStatus) -> Result<(), RebalanceError> {
    if meta.state().borrow().rebalance().is_none() {
        return Err(RebalanceError::NothingToResume);
    }
    spawn(meta, status, Origin::Resume)
}

fn spawn(meta: MetaNode, status: SharedStatus, origin: Origin) -> Result<(), RebalanceError> {
    if !peer::leading(&meta) {
        return Err(RebalanceError::NotLeader);
    }
    {
        let mut s = status.lock();
        if s.running {
            return Err(RebalanceError::Running);
        }
        *s = RebalanceStatus {
            running: true,
            resumed: matches!(origin, Origin::Resume),
            ..Default::default()
        };
    }
    tokio::spawn(async move {
        let began = Instant::now();
        let outcome = run(&meta, &status, origin).await;
        match &outcome {
            Ok(()) => {}
            // Leadership moved (the step may have failed because of it: a proposal refused
            // by the new term, say). Still recorded: the new leader's janitor resumes it.
            Err(e) if !peer::leading(&meta) => {
                tracing::warn!(error = %e, "rebalance: this node no longer leads; stopped, left to the new leader")
            }
            Err(e) => {
                tracing::error!(error = %e, "rebalance failed; aborting it where it stands");
                let _ = meta.propose(MetaCommand::AbortRebalance).await;
            }
        }
        let mut s = status.lock();
        s.running = false;
        s.error = outcome.err().map(|e| e.to_string());
        s.elapsed_ms = began.elapsed().as_millis() as u64;
    });
    Ok(())
}

/// Stops the run when this node no longer leads.
fn still_leading(meta: &MetaNode) -> Result<(), RebalanceError> {
    if peer::leading(meta) {
        Ok(())
    } else {
        Err(RebalanceError::NotLeader)
    }
}

async fn run(meta: &MetaNode, status: &SharedStatus, origin: Origin) -> Result<(), RebalanceError> {
    let state = meta.state().borrow().clone();
    if state.maps().next().is_none() {
        return Err(RebalanceError::NoBucket);
    }
    let target: Vec<NodeId> = match &origin {
        Origin::Fresh { eject } => {
            let mut target: Vec<NodeId> = state
                .nodes()
                .values()
                .filter(|n| matches!(n.status, NodeStatus::Active | NodeStatus::Joining))
                .map(|n| n.info.id)
                .filter(|id| !eject.contains(id))
                .collect();
            target.sort();
            target
        }
        Origin::Resume => state
            .rebalance()
            .ok_or(RebalanceError::NothingToResume)?
            .target
            .clone(),
    };
    // Every bucket is planned before anything moves: one that cannot be placed on the
    // target stops the rebalance while nothing has changed.
    let mut plans = Vec::new();
    for (name, entry) in state.buckets() {
        let Some(map) = &entry.map else { continue };
        // A changed replica count: the map is published resized first (empty slots added,
        // the last replicas cut), and the moves fill or keep what it holds.
        let from = map.vbmap().with_replicas(entry.def.replicas)?;
        // Vbuckets go on the target's data nodes; the others are listed only.
        let data = state.running(&target, sluice_cluster::Service::Kv);
        let plan = plan_rebalance(&from, &data, entry.def.replicas)?;
        tracing::info!(bucket = %name, target = ?target, moves = plan.moves().len(),
            copies = plan.copies_built(), takeovers = plan.takeovers(), method = ?plan.method(),
            "rebalance planned");
        plans.push((name.clone(), map.clone(), from, plan));
    }
    {
        let mut s = status.lock();
        s.target = target.iter().map(|n| n.0).collect();
        s.moves_total = plans.iter().map(|(_, _, _, p)| p.moves().len()).sum();
    }
    if let Origin::Fresh { .. } = origin {
        let start = MetaCommand::StartRebalance {
            target: target.clone(),
        };
        propose(meta, "", start).await?;
    }
    for (bucket, map, from, plan) in &plans {
        rebalance_bucket(meta, status, bucket, map, from, plan, &target).await?;
    }
    still_leading(meta)?;
    let applied = meta
        .propose(MetaCommand::FinishRebalance {})
        .await?
        .map_err(RebalanceError::Refused)?;
    if let sluice_cluster::Applied::RebalanceFinished { ejected } = applied {
        for id in ejected {
            // The ejected node leaves the Raft group too (it keeps running, serving nothing).
            if let Err(e) = meta.remove_node(id).await {
                tracing::warn!(node = %id, error = %e, "removing an ejected node from the Raft group");
            }
        }
    }
    tracing::info!(target = ?target, "rebalance finished");
    Ok(())
}

/// One bucket's moves, from `map` (its map when planned; `from`, its vbucket map at the
/// bucket's replica count, is what the plan starts from) onto `target`.
async fn rebalance_bucket(
    meta: &MetaNode,
    status: &SharedStatus,
    bucket: &str,
    map: &ClusterMap,
    from: &VbMap,
    plan: &RebalancePlan,
    target: &[NodeId],
) -> Result<(), RebalanceError> {
    // The map lists the new nodes before any chain names them, and has the bucket's
    // replica count before any move.
    let mut listed: Vec<NodeId> = map.nodes().iter().map(|n| n.id).collect();
    let joining: Vec<NodeId> = target
        .iter()
        .copied()
        .filter(|id| !listed.contains(id))
        .collect();
    if !joining.is_empty() || from != map.vbmap() {
        listed.extend(joining);
        let set = MetaCommand::SetMap {
            bucket: bucket.to_string(),
            expected_rev: Some(map.rev()),
            nodes: listed,
            vbmap: from.clone(),
        };
        propose(meta, bucket, set).await?;
    }
    for mv in plan.moves() {
        still_leading(meta)?;
        carry_out(meta, bucket, mv).await?;
        status.lock().moves_done += 1;
    }
    // The map lists the target only, in the order it had them.
    let now = current_map(meta, bucket)?;
    let kept: Vec<NodeId> = now
        .nodes()
        .iter()
        .map(|n| n.id)
        .filter(|id| target.contains(id))
        .collect();
    if kept.len() != now.nodes().len() {
        let set = MetaCommand::SetMap {
            bucket: bucket.to_string(),
            expected_rev: Some(now.rev()),
            nodes: kept,
            vbmap: now.vbmap().clone(),
        };
        propose(meta, bucket, set).await?;
    }
    Ok(())
}

/// One vbucket: builds, then the takeover, then the chain in the map, then the drops.
async fn carry_out(meta: &MetaNode, bucket: &str, mv: &VbMove) -> Result<(), RebalanceError> {
    let vb = mv.vb();
    let map = current_map(meta, bucket)?;
    let held = map
        .vbmap()
        .chain(vb)
        .ok_or(RebalanceError::VbOutsideMap(vb))?;
    if held != mv.old_chain() {
        return Err(RebalanceError::ChangedUnder {
            vb,
            now: held.clone(),
            planned: mv.old_chain().clone(),
        });
    }
    let info = |id: NodeId| -> Result<NodeInfo, RebalanceError> {
        map.nodes()
            .iter()
            .find(|n| n.id == id)
            .cloned()
            .ok_or(RebalanceError::NodeNotInMap(id))
    };
    if let Some(source) = mv.source() {
        let src = info(source)?;
        let builds = mv.builds();
        for &b in &builds {
            // The source's cleartext KV address names it; the destination dials it as its
            // own encryption says (see `builds`).
            let body = json!({ "vb": vb.0, "source": src.kv_addr(false) });
            let path = peer::for_bucket("/internal/rebalance/build", bucket);
            call(meta, &info(b)?, &path, Some(&body)).await?;
        }
        // Caught up once each copy holds what the active held when the builds started.
        let wanted = vb_status(meta, bucket, &src, vb).await?.high_seqno;
        for &b in &builds {
            let node = info(b)?;
            wait_for(meta, &format!("{vb} built on node {b}"), || async {
                Ok(vb_status(meta, bucket, &node, vb).await?.high_seqno >= wanted)
            })
            .await?;
        }
        if let Some(t) = mv.takeover() {
            // The one step that cannot be left half done by two orchestrators at once.
            still_leading(meta)?;
            let to = info(t.to)?;
            let path = peer::for_bucket("/internal/rebalance/takeover", bucket);
            call(meta, &to, &path, Some(&json!({ "vb": vb.0 }))).await?;
            wait_for(
                meta,
                &format!("{vb} taken over by node {}", t.to),
                || async { Ok(vb_status(meta, bucket, &to, vb).await?.state == "active") },
            )
            .await?;
            failpoint::after_takeover(meta.id(), source, t.to, vb);
        }
    }
    let chains = MetaCommand::SetChains {
        bucket: bucket.to_string(),
        expected_rev: map.rev(),
        chains: vec![(vb.0, mv.new_chain().clone())],
    };
    propose(meta, bucket, chains).await?;
    // Every node serves the new chain now (`propose` waited): the copies it leaves out are
    // dead and nothing streams from them. A drop that fails leaves debris, not a wrong
    // map: it is logged and the rebalance goes on.
    for id in mv.drops() {
        let body = json!({ "vb": vb.0 });
        let path = peer::for_bucket(DROP_PATH, bucket);
        if let Err(e) = call(meta, &info(id)?, &path, Some(&body)).await {
            tracing::warn!(%vb, node = %id, error = %e, "dropping a moved-out copy failed");
        }
    }
    Ok(())
}

/// Bucket `bucket`'s map in force.
fn current_map(meta: &MetaNode, bucket: &str) -> Result<ClusterMap, RebalanceError> {
    meta.state()
        .borrow()
        .map(bucket)
        .cloned()
        .ok_or(RebalanceError::NoMap)
}

/// Proposes a step; once a map of bucket `bucket` it publishes is applied here too, so that
/// the next step, planned from this node's state, starts from it (a follower applies after
/// the leader).
async fn propose(meta: &MetaNode, bucket: &str, cmd: MetaCommand) -> Result<(), RebalanceError> {
    let applied = meta.propose(cmd).await?.map_err(RebalanceError::Refused)?;
    if let sluice_cluster::Applied::MapSet { rev } = applied {
        let mut states = meta.state();
        // (`seen` is a bool: the watch guard must not live across the awaits below.)
        let seen = matches!(
            tokio::time::timeout(
                HTTP_TIMEOUT,
                states.wait_for(|s| s.map(bucket).is_some_and(|m| m.rev() >= rev)),
            )
            .await,
            Ok(Ok(_))
        );
        if !seen {
            return Err(RebalanceError::MapNotApplied { rev: rev.0 });
        }
        // Every node must serve it before the next takeover: a node applying this revision
        // after that takeover would set the vbucket active again on the old active (the
        // revision still names it), and both copies would take writes.
        for node in current_map(meta, bucket)?.nodes() {
            wait_for(
                meta,
                &format!("node {} serving map rev {}", node.id, rev.0),
                || async {
                    let path = peer::for_bucket("/internal/rebalance/map_rev", bucket);
                    let answer = call(meta, node, &path, None).await?;
                    Ok(answer["map_rev"].as_u64().unwrap_or(0) >= rev.0)
                },
            )
            .await?;
        }
    }
    Ok(())
}

#[derive(Debug, serde::Deserialize)]
struct VbStatus {
    state: String,
    high_seqno: u64,
}

async fn vb_status(
    meta: &MetaNode,
    bucket: &str,
    node: &NodeInfo,
    vb: VbId,
) -> Result<VbStatus, RebalanceError> {
    let path = peer::for_bucket(&format!("/internal/rebalance/vb/{}", vb.0), bucket);
    let answer = call(meta, node, &path, None).await?;
    serde_json::from_value(answer).map_err(|source| RebalanceError::BadAnswer {
        node: node.id,
        source,
    })
}

/// An internal admin call that must succeed.
async fn call(
    meta: &MetaNode,
    node: &NodeInfo,
    path: &str,
    body: Option<&serde_json::Value>,
) -> Result<serde_json::Value, RebalanceError> {
    let answer = peer::call(meta, node, path, body, HTTP_TIMEOUT)
        .await
        .map_err(|source| RebalanceError::Http {
            node: node.id,
            source,
        })?;
    if !answer.ok() {
        return Err(RebalanceError::Answered {
            node: node.id,
            status: answer.status,
            path: path.to_string(),
            body: answer.body,
        });
    }
    Ok(answer.body)
}

async fn wait_for<F, Fut>(meta: &MetaNode, what: &str, mut done: F) -> Result<(), RebalanceError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool, RebalanceError>>,
{
    let deadline = Instant::now() + MOVE_TIMEOUT;
    loop {
        still_leading(meta)?;
        if done().await? {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(RebalanceError::Timeout {
                what: what.to_string(),
                after: MOVE_TIMEOUT,
            });
        }
        tokio::time::sleep(POLL).await;
    }
}
