//! The durability monitors' clock: a periodic pass that aborts due writes nobody waits on,
//! feeds local persistence to persist-level writes, follows map changes, and drops the
//! monitors of vbuckets that left this node. Writers that wait trigger their own abort at
//! their deadline (`wait`), so this pass bounds the lateness of the rest only.

use crate::node::Node;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the pass runs.
pub const TICK_EVERY: Duration = Duration::from_millis(25);

/// Runs until the task is aborted.
pub async fn run(node: Arc<Node>) {
    let mut interval = tokio::time::interval(TICK_EVERY);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        let buckets = node.buckets.all();
        // Engine calls take vbucket locks and may commit: off the async workers.
        let pass = tokio::task::spawn_blocking(move || {
            for bucket in buckets {
                bucket.durability.tick(&bucket, Instant::now());
            }
        });
        if pass.await.is_err() {
            tracing::error!("the durability pass panicked");
        }
    }
}
