//! The targets of `bench replication`, dispatched by kind: Sluice (a cluster) or Redis
//! (primary + replica). Each offers the same four things: a paced writer, a sample set, a
//! replica read, and a lag reading.

use bytes::Bytes;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use crate::scenarios::replication::durable::DurableLevel;
use crate::scenarios::replication::measure::{LagReading, WriteOutcome};
use crate::scenarios::replication::redis::RedisTarget;
use crate::scenarios::replication::sluice::SluiceTarget;
use crate::scenarios::replication::stages::StageSnapshot;
use crate::scenarios::replication::step::WritePlan;
use crate::scenarios::replication::values::Docs;

pub enum Target {
    // Both boxed: each holds several clients or connections inline.
    Sluice(Box<SluiceTarget>),
    Redis(Box<RedisTarget>),
}

impl Target {
    pub async fn prefill(&self, items: u64, docs: &Docs, done: &AtomicU64) -> anyhow::Result<()> {
        match self {
            Target::Sluice(t) => t.prefill(items, docs, done).await,
            Target::Redis(t) => t.prefill(items, docs, done).await,
        }
    }

    pub async fn write(&self, plan: WritePlan, first: u64) -> anyhow::Result<WriteOutcome> {
        match self {
            Target::Sluice(t) => Ok(t.write(plan, first).await),
            Target::Redis(t) => t.write(plan, first).await,
        }
    }

    /// Sends a set without waiting for its answer.
    pub async fn send_sample(&self, key: Bytes, value: Bytes) -> anyhow::Result<()> {
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
    ) -> anyhow::Result<bool> {
        match self {
            Target::Sluice(t) => Ok(t.durable_set(&key, &value, level).await),
            Target::Redis(t) => t.durable_set(&key, &value).await,
        }
    }

    /// Whether the (first) replica serves exactly `value` under `key`.
    pub async fn visible(&self, key: &[u8], value: &[u8]) -> anyhow::Result<bool> {
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
    pub async fn settle(&self, quiet_max: Duration) -> anyhow::Result<()> {
        match self {
            Target::Sluice(t) => t.settle(quiet_max).await,
            Target::Redis(t) => {
                for pid in t.pair.pids() {
                    crate::harness::settle::wait_quiet(pid, quiet_max).await?;
                }
                Ok(())
            }
        }
    }

    /// The lowest active resident ratio over the nodes, in % (Redis keeps everything in
    /// memory: `None`).
    pub async fn resident_pct(&self) -> anyhow::Result<Option<u64>> {
        match self {
            Target::Sluice(t) => Ok(Some(t.resident_pct().await?)),
            Target::Redis(_) => Ok(None),
        }
    }

    /// The nodes' stage histograms merged (Sluice); Redis has none.
    pub async fn stage_snapshot(&self) -> anyhow::Result<Option<StageSnapshot>> {
        match self {
            Target::Sluice(t) => Ok(Some(t.stage_snapshot().await?)),
            Target::Redis(_) => Ok(None),
        }
    }

    pub async fn probe(&self) -> anyhow::Result<LagReading> {
        match self {
            Target::Sluice(t) => t.probe().await,
            Target::Redis(t) => t.probe().await,
        }
    }
}
