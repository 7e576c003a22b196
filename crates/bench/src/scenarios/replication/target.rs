//! The targets of `bench replication`, dispatched by kind: Sluice (a cluster) or Redis
//! (primary + replica). Each offers the same four things: a paced writer, a sample set, a
//! replica read, and a lag reading.

use bytes::Bytes;
use sluice_client::{ClientError, ClusterError};
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use crate::error::BenchError;
use crate::harness::redis_peer::RedisError;
use crate::harness::resp::{Reply, RespError};
use crate::scenarios::replication::durable::DurableLevel;
use crate::scenarios::replication::measure::{LagReading, WriteOutcome};
use crate::scenarios::replication::redis::RedisTarget;
use crate::scenarios::replication::sluice::SluiceTarget;
use crate::scenarios::replication::stages::{StageError, StageSnapshot};
use crate::scenarios::replication::step::WritePlan;
use crate::scenarios::replication::values::Docs;
use crate::scenarios::replication::xdcr::XdcrStatError;

/// What a target's operations fail with, Sluice's and Redis's.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// A seed or a node of the map that is not a loopback address.
    #[error(transparent)]
    Address(BenchError),
    /// `whose` says which of the target's clients: the load's, the sampler's, a durable
    /// probe's.
    #[error("connecting {whose} cluster client")]
    Connect {
        whose: &'static str,
        #[source]
        source: ClusterError,
    },
    #[error("the bucket has no replicas: nothing to measure")]
    NoReplicas,
    #[error("connecting to {addr} for STAT")]
    ConnectStat {
        addr: String,
        #[source]
        source: ClientError,
    },
    #[error("the map lists no node")]
    NoNode,
    #[error("no admin port")]
    NoAdminPort,
    /// A STAT request to a node.
    #[error(transparent)]
    Stat(#[from] ClientError),
    #[error("a STAT reading task")]
    StatTask(#[source] tokio::task::JoinError),
    #[error("the server's STAT has no numeric {name}")]
    NoStat { name: &'static str },
    #[error(transparent)]
    XdcrStat(#[from] XdcrStatError),
    #[error(transparent)]
    Stages(#[from] StageError),
    /// Waiting for persistence or for quiet processes.
    #[error(transparent)]
    Settle(BenchError),
    #[error("prefill: a set failed (is the quota big enough?)")]
    PrefillSet(#[source] ClusterError),
    /// Reading a sample from the replica.
    #[error(transparent)]
    ReplicaRead(ClusterError),
    /// A RESP connection to Redis.
    #[error(transparent)]
    Resp(#[from] RespError),
    #[error("writing to the Redis primary")]
    RedisWrite(#[source] std::io::Error),
    #[error("prefill: Redis answered {answer:?} to a SET")]
    RedisPrefill { answer: Reply },
    /// Reading the pair's offsets and counters.
    #[error(transparent)]
    Redis(#[from] RedisError),
}

pub enum Target {
    // Both boxed: each holds several clients or connections inline.
    Sluice(Box<SluiceTarget>),
    Redis(Box<RedisTarget>),
}

impl Target {
    pub async fn prefill(
        &self,
        items: u64,
        docs: &Docs,
        done: &AtomicU64,
    ) -> Result<(), TargetError> {
        match self {
            Target::Sluice(t) => t.prefill(items, docs, done).await,
            Target::Redis(t) => t.prefill(items, docs, done).await,
        }
    }

    pub async fn write(&self, plan: WritePlan, first: u64) -> Result<WriteOutcome, TargetError> {
        match self {
            Target::Sluice(t) => Ok(t.write(plan, first).await),
            Target::Redis(t) => t.write(plan, first).await,
        }
    }

    /// Sends a set without waiting for its answer.
    pub async fn send_sample(&self, key: Bytes, value: Bytes) -> Result<(), TargetError> {
        match self {
            Target::Sluice(t) => {
                t.send_sample(key, value);
                Ok(())
            }
            Target::Redis(t) => t.send_sample(&key, &value).await,
        }
    }

    /// A durable set at `level` (Redis: SET + WAIT 1, whatever the level); true once
    /// acknowledged in time. Only the connection failing is an error.
    pub async fn durable_set(
        &self,
        key: Bytes,
        value: Bytes,
        level: DurableLevel,
    ) -> Result<bool, TargetError> {
        match self {
            Target::Sluice(t) => Ok(t.durable_set(&key, &value, level).await),
            Target::Redis(t) => t.durable_set(&key, &value).await,
        }
    }

    /// Whether the (first) replica serves exactly `value` under `key`.
    pub async fn visible(&self, key: &[u8], value: &[u8]) -> Result<bool, TargetError> {
        match self {
            Target::Sluice(t) => t.visible(key, value).await,
            Target::Redis(t) => t.visible(key, value).await,
        }
    }

    pub fn sample_errors(&self) -> u64 {
        match self {
            Target::Sluice(t) => t.sample_errors(),
            Target::Redis(t) => t.sample_errors(),
        }
    }

    /// Waits until the target is idle: persisted (Sluice), and its processes quiet for at
    /// most `quiet_max` (the box is shared; a target that never quiets is not an error).
    pub async fn settle(&self, quiet_max: Duration) -> Result<(), TargetError> {
        match self {
            Target::Sluice(t) => t.settle(quiet_max).await,
            Target::Redis(t) => {
                for pid in t.pair.pids() {
                    crate::harness::settle::wait_quiet(pid, quiet_max)
                        .await
                        .map_err(TargetError::Settle)?;
                }
                Ok(())
            }
        }
    }

    /// The lowest active resident ratio over the nodes, in % (Redis keeps everything in
    /// memory: `None`).
    pub async fn resident_pct(&self) -> Result<Option<u64>, TargetError> {
        match self {
            Target::Sluice(t) => Ok(Some(t.resident_pct().await?)),
            Target::Redis(_) => Ok(None),
        }
    }

    /// The nodes' stage histograms merged (Sluice); Redis has none.
    pub async fn stage_snapshot(&self) -> Result<Option<StageSnapshot>, TargetError> {
        match self {
            Target::Sluice(t) => Ok(Some(t.stage_snapshot().await?)),
            Target::Redis(_) => Ok(None),
        }
    }

    pub async fn probe(&self) -> Result<LagReading, TargetError> {
        match self {
            Target::Sluice(t) => t.probe().await,
            Target::Redis(t) => t.probe().await,
        }
    }
}
