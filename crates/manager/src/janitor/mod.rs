//! The janitor, run by the metadata leader: every [`PERIOD`], it asks every node the map
//! lists for its copies (`routes`), feeds the answers to `sluice_cluster::janitor`, and
//! carries out the repairs it returns:
//!
//! - a takeover the map missed: one compare-and-set `SetChains` naming the copy that took
//!   over (every node's agent then applies it: feeds follow the new active);
//! - a takeover cut short with no copy active: `POST /internal/janitor/activate` on the map's
//!   active;
//! - a moved-out copy never dropped: the rebalance's own drop route on its node;
//! - a build no recorded rebalance will finish: `POST /internal/janitor/stop_build`.
//!
//! Then, when the copies and the map agree and the metadata records a rebalance that no
//! orchestrator runs here (its orchestrator was on a leader that died or stepped down), it
//! resumes it from the map as it stands (`rebalance::resume`) once this node has led for
//! [`RESUME_GRACE`]: a deposed orchestrator checks its leadership before each step and
//! between polls, and stops within that time.
//!
//! Passes skip while this node orchestrates a rebalance itself: a running orchestrator's
//! copies disagree with the map on purpose, between a takeover and the chain it publishes.
//! Couchbase's janitor likewise runs on its orchestrator node only; the issue asked for one
//! on every node, but a node alone cannot tell a finished takeover from a stale map, and
//! each node's agent already makes it what every new map says.

pub mod routes;

use crate::control::Control;
use crate::peer;
use routes::{ActivateRequest, CopiesAnswer, ACTIVATE_PATH, COPIES_PATH, STOP_BUILD_PATH};
use serde_json::json;
use sluice_cluster::janitor::{CopyReport, Janitor, NodeReport, Repair};
use sluice_cluster::metadata::MetaCommand;
use sluice_cluster::{ClusterMap, NodeId, NodeInfo, Rev};
use sluice_meta::MetaNode;
use sluice_types::{Seqno, VbId, VbState};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Between passes. A repair needs two passes that agree, so it lands within two periods.
const PERIOD: Duration = Duration::from_secs(1);

/// How long one node may take to list its copies.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

/// How long this node must have led before it resumes a rebalance another leader started.
const RESUME_GRACE: Duration = Duration::from_secs(5);

/// Runs on every node; acts only while it leads. Never returns (aborted on shutdown).
pub async fn run(meta: MetaNode, control: Arc<Control>) {
    // One core per bucket: each bucket's copies and map are checked on their own.
    let mut cores: BTreeMap<String, Janitor> = BTreeMap::new();
    let mut leading_since: Option<Instant> = None;
    let mut ticks = tokio::time::interval(PERIOD);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_silent = Vec::new();
    loop {
        ticks.tick().await;
        if !peer::leading(&meta) {
            cores.clear();
            leading_since = None;
            continue;
        }
        let since = *leading_since.get_or_insert_with(Instant::now);
        if control.rebalance.lock().running {
            cores.clear();
            continue;
        }
        let state = meta.state().borrow().clone();
        cores.retain(|name, _| state.map(name).is_some());
        let mut settled = true;
        let mut repaired = false;
        let mut silent = Vec::new();
        for (bucket, map) in state.maps() {
            let core = cores.entry(bucket.to_string()).or_default();
            let reports = ask_copies(&meta, bucket, map).await;
            let pass = core.pass(map, &reports, state.rebalance().is_some());
            settled &= pass.settled;
            silent.extend(pass.silent.iter().copied());
            if !pass.repairs.is_empty() {
                carry_out(&meta, bucket, map, &pass.repairs).await;
                repaired = true;
            }
        }
        silent.sort();
        silent.dedup();
        if silent != last_silent {
            if !silent.is_empty() {
                tracing::info!(silent = ?silent, "janitor: nodes that did not list their copies");
            }
            last_silent = silent;
        }
        if repaired {
            continue;
        }
        if settled && state.rebalance().is_some() && since.elapsed() >= RESUME_GRACE {
            tracing::warn!(target = ?state.rebalance().map(|r| &r.target),
                "janitor: a rebalance is recorded that no orchestrator runs; resuming it here");
            if let Err(e) = crate::rebalance::resume(meta.clone(), control.rebalance.clone()) {
                tracing::warn!(error = %e, "janitor: the recorded rebalance could not be resumed");
            }
        }
    }
}

/// Every listed node's copies, asked all at once (`None`: no usable answer).
async fn ask_copies(
    meta: &MetaNode,
    bucket: &str,
    map: &ClusterMap,
) -> BTreeMap<NodeId, Option<NodeReport>> {
    let path = peer::for_bucket(COPIES_PATH, bucket);
    let mut calls = tokio::task::JoinSet::new();
    for info in map.nodes().iter().cloned() {
        let meta = meta.clone();
        let path = path.clone();
        calls.spawn(async move {
            let answer = peer::call(&meta, &info, &path, None, ASK_TIMEOUT).await;
            let report = match answer {
                Ok(a) if a.ok() => serde_json::from_value::<CopiesAnswer>(a.body)
                    .ok()
                    .map(report_of),
                _ => None,
            };
            (info.id, report)
        });
    }
    let mut reports = BTreeMap::new();
    while let Some(done) = calls.join_next().await {
        if let Ok((id, report)) = done {
            reports.insert(id, report);
        }
    }
    reports
}

fn report_of(answer: CopiesAnswer) -> NodeReport {
    let copies = answer
        .vbuckets
        .iter()
        .filter_map(|c| {
            let state = VbState::from_name(&c.state)?;
            let report = CopyReport {
                state,
                high_seqno: Seqno(c.high_seqno),
                held: c.held,
                building: c.building,
            };
            Some((VbId(c.vb), report))
        })
        .collect();
    NodeReport {
        map_rev: Rev(answer.map_rev),
        copies,
    }
}

async fn carry_out(meta: &MetaNode, bucket: &str, map: &ClusterMap, repairs: &[Repair]) {
    let info =
        |id: NodeId| -> Option<NodeInfo> { map.nodes().iter().find(|n| n.id == id).cloned() };
    let chains: Vec<(u16, sluice_cluster::Chain)> = repairs
        .iter()
        .filter_map(|r| match r {
            Repair::FollowTakeover { vb, chain } => Some((vb.0, chain.clone())),
            _ => None,
        })
        .collect();
    if !chains.is_empty() {
        let named: Vec<String> = chains
            .iter()
            .map(|(vb, c)| format!("vb:{vb} → {c}"))
            .collect();
        let cmd = MetaCommand::SetChains {
            bucket: bucket.to_string(),
            expected_rev: map.rev(),
            chains,
        };
        match meta.propose(cmd).await {
            Ok(Ok(_)) => tracing::warn!(chains = ?named,
                "janitor: the map now follows takeovers it had missed (an orchestrator stopped between a takeover and its chain)"),
            Ok(Err(why)) => tracing::info!(%why, "janitor: the map changed first; looking again"),
            Err(e) => tracing::warn!(error = %e, "janitor: could not publish the repaired chains"),
        }
    }
    for repair in repairs {
        let (node, path, body) = match repair {
            Repair::FollowTakeover { .. } => continue,
            Repair::Reactivate { vb, node } => {
                let req = ActivateRequest {
                    vb: vb.0,
                    rev: map.rev().0,
                };
                (*node, ACTIVATE_PATH, json!(req))
            }
            Repair::Drop { vb, node } => {
                (*node, crate::rebalance::DROP_PATH, json!({ "vb": vb.0 }))
            }
            Repair::StopBuild { vb, node } => (*node, STOP_BUILD_PATH, json!({ "vb": vb.0 })),
        };
        let Some(target) = info(node) else { continue };
        let path = peer::for_bucket(path, bucket);
        match peer::call(meta, &target, &path, Some(&body), ASK_TIMEOUT).await {
            Ok(a) if a.ok() => tracing::info!(?repair, "janitor: repaired"),
            Ok(a) => {
                tracing::info!(?repair, status = a.status, answer = %a.body, "janitor: repair refused")
            }
            Err(e) => tracing::info!(?repair, error = %e, "janitor: repair not delivered"),
        }
    }
}
