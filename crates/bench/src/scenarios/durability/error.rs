//! What `sluice bench durability` fails with: [`RunDurabilityError`] at the top,
//! [`TargetError`] for the step of one target's rows in one run.

use crate::harness::redis_peer::RedisError;
use crate::report::scenario_out::OutputError;
use crate::scenarios::durability::args::DurabilityArgsError;
use crate::scenarios::durability::closed_loop::PrefillError;
use crate::scenarios::durability::redis::RedisSideError;
use crate::scenarios::durability::sluice::SluiceSideError;

#[derive(Debug, thiserror::Error)]
pub enum RunDurabilityError {
    #[error(transparent)]
    Args(#[from] DurabilityArgsError),
    /// The output directory, the saved options or the report.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// `--vs redis` without a redis-server.
    #[error(transparent)]
    Redis(#[from] RedisError),
    /// Run `run` (counted from 1) of the target labelled `target`.
    #[error("{target} (run {run})")]
    Target {
        target: &'static str,
        run: u32,
        #[source]
        source: TargetError,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error(transparent)]
    Sluice(#[from] SluiceSideError),
    #[error(transparent)]
    Redis(#[from] RedisSideError),
    #[error(transparent)]
    Prefill(#[from] PrefillError),
    #[error("no redis-server")]
    NoRedisServer,
}
