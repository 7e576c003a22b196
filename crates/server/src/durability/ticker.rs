//! The durability monitors' clock: a periodic pass that aborts due writes nobody waits on,
//! feeds local persistence to persist-level writes, follows map changes, and drops the
//! monitors of vbuckets that left this node. Writers that wait trigger their own abort at
//! their deadline (`wait`), so this pass bounds the lateness of the rest only.

use crate::node::Node;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the pass runs.
pub const TICK_EVERY: Duration = Duration::from_millis(25);

/// Every how many passes the active vbuckets are scanned for prepares nobody tracks.
const ADOPT_EVERY_TICKS: u32 = 40;

/// Runs until the task is aborted.
pub async fn run(node: Arc<Node>) {
    let mut interval = tokio::time::interval(TICK_EVERY);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut n: u32 = 0;
    loop {
        interval.tick().await;
        n = n.wrapping_add(1);
        let adopt = n % ADOPT_EVERY_TICKS == 1;
        let node2 = node.clone();
        // Engine calls take vbucket locks and may commit: off the async workers.
        let pass = tokio::task::spawn_blocking(move || {
            node2.durability.tick(&node2, Instant::now(), adopt)
        });
        if pass.await.is_err() {
            tracing::error!("the durability pass panicked");
        }
    }
}
