//! What a node tells the leader's janitor, and the one repair it carries out itself:
//!
//! - `GET /internal/janitor/copies` — the map revision the agent has applied, and every
//!   vbucket copy here: state, high seqno, and whether a restart holds it back. Read between
//!   two looks at the applied revision; 503 if the agent applied a map meanwhile;
//! - `POST /internal/janitor/activate` — body `{"vb": N, "rev": R}`: makes the dead copy of
//!   `vb` active again, only if this node serves and has applied revision R, that map makes
//!   this node the vbucket's active, the copy is dead, no restart holds it and no rebalance
//!   builds it (409 otherwise). The check and the change happen under the lock the agent
//!   applies maps under, so neither races a map being applied;
//! - `POST /internal/janitor/stop_build` — body `{"vb": N}`: stops the rebalance build of
//!   `vb` here (no rebalance is recorded to finish it), and makes the copy dead unless the
//!   map this node serves puts it in the vbucket's chain.
//!
//! Each takes `?bucket=NAME` (without it, the node's own bucket); a bucket this node does
//! not serve answers 404. All are internal (`/internal/`): the cluster identity only.

use crate::control::{Control, Named};

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sluice_types::{VbId, VbState};
use std::sync::Arc;

pub const COPIES_PATH: &str = "/internal/janitor/copies";
pub const ACTIVATE_PATH: &str = "/internal/janitor/activate";
pub const STOP_BUILD_PATH: &str = "/internal/janitor/stop_build";

/// `GET /internal/janitor/copies`'s answer.
#[derive(Debug, Serialize, Deserialize)]
pub struct CopiesAnswer {
    pub map_rev: u64,
    pub vbuckets: Vec<CopyEntry>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct CopyEntry {
    pub vb: u16,
    pub state: String,
    pub high_seqno: u64,
    pub held: bool,
    /// A rebalance build streams it here.
    #[serde(default)]
    pub building: bool,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct StopBuildRequest {
    pub vb: u16,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ActivateRequest {
    pub vb: u16,
    pub rev: u64,
}

pub fn router(control: Arc<Control>) -> Router {
    Router::new()
        .route(COPIES_PATH, get(copies))
        .route(ACTIVATE_PATH, post(activate))
        .route(STOP_BUILD_PATH, post(stop_build))
        .with_state(control)
}

async fn copies(Named(control): Named) -> Response {
    let read = tokio::task::spawn_blocking(move || {
        let before = control.applied_rev();
        let bucket = &control.bucket.engine;
        let held = control.held.lock().clone();
        let vbuckets: Vec<CopyEntry> = (0..bucket.num_vbuckets())
            .filter_map(|vb| {
                let (state, high) = bucket.vb_state_and_high(VbId(vb)).ok()?;
                Some(CopyEntry {
                    vb,
                    state: state.as_str().to_string(),
                    high_seqno: high.0,
                    held: held.contains(&VbId(vb)),
                    building: control.builds.contains(VbId(vb)),
                })
            })
            .collect();
        (before, control.applied_rev(), vbuckets)
    });
    match read.await {
        Ok((Some(before), Some(after), vbuckets)) if before == after => Json(CopiesAnswer {
            map_rev: before.0,
            vbuckets,
        })
        .into_response(),
        Ok(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "error": "the cluster agent is applying a map; ask again" })),
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

async fn activate(Named(control): Named, Json(req): Json<ActivateRequest>) -> Response {
    let vb = VbId(req.vb);
    let done = tokio::task::spawn_blocking(move || -> Result<(), String> {
        let held = control.held.lock();
        let view = control.bucket.cluster_map();
        if view.rev().0 != req.rev || control.applied_rev().map(|r| r.0) != Some(req.rev) {
            return Err(format!(
                "this node serves map revision {} (applied {:?}), not {}",
                view.rev().0,
                control.applied_rev().map(|r| r.0),
                req.rev
            ));
        }
        let chain = view.map.vbmap().chain(vb).ok_or("no such vbucket")?;
        if chain.active != Some(view.this) {
            return Err(format!("the map does not make this node {vb}'s active"));
        }
        if held.contains(&vb) {
            return Err(format!("{vb} is held back by a restart"));
        }
        if control.builds.contains(vb) {
            return Err(format!("{vb} is being built here"));
        }
        let bucket = &control.bucket.engine;
        match bucket.vb_state(vb) {
            Ok(VbState::Dead) => {}
            Ok(other) => return Err(format!("{vb} is {}, not dead", other.as_str())),
            Err(e) => return Err(e.to_string()),
        }
        bucket
            .set_vbucket_state(vb, VbState::Active)
            .map_err(|e| e.to_string())?;
        tracing::warn!(%vb, rev = req.rev,
            "janitor: a takeover left no copy active; this node's copy, the map's active, serves again");
        Ok(())
    });
    match done.await {
        Ok(Ok(())) => Json(json!({ "activated": req.vb })).into_response(),
        Ok(Err(why)) => (StatusCode::CONFLICT, Json(json!({ "error": why }))).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

async fn stop_build(Named(control): Named, Json(req): Json<StopBuildRequest>) -> Response {
    let vb = VbId(req.vb);
    control.builds.stop(|v| v == vb).await;
    // Under the agent's lock: a map applied meanwhile decides the state, not this.
    let held = control.held.lock();
    let view = control.bucket.cluster_map();
    let chained = view
        .map
        .vbmap()
        .chain(vb)
        .is_some_and(|c| c.holds(view.this));
    if !chained {
        if let Err(e) = control.bucket.engine.set_vbucket_state(vb, VbState::Dead) {
            return (
                StatusCode::CONFLICT,
                Json(json!({ "error": e.to_string() })),
            )
                .into_response();
        }
    }
    drop(held);
    tracing::warn!(%vb, chained,
        "janitor: a rebalance build no recorded rebalance will finish was stopped");
    Json(json!({ "stopped": req.vb })).into_response()
}
