//! Sluice as a `bench durability` target: the local cluster (`sluice cluster up`), one smart
//! client per loop ([`ClusterClient`], routed by the map) whose sets carry the row's
//! durability level, and the wait for a persisted, quiet cluster between rows.

use sluice_client::{
    Client, ClientError, ClusterClient, ClusterError, ClusterOptions, ConnectOptions, StoreOptions,
};
use std::path::Path;
use std::time::Duration;

use crate::error::BenchError;
use crate::harness::local_cluster::{ClusterUpError, LocalCluster};
use crate::harness::process::loopback_addr;
use crate::harness::settle;
use crate::scenarios::durability::args::DurabilityArgs;
use crate::scenarios::durability::closed_loop::Writer;
use crate::scenarios::durability::row::Level;

/// Waiting for persistence fails if nothing more is persisted for this long.
const PERSIST_STALL: Duration = Duration::from_secs(60);
/// The client's own deadline for a write, past the durability timeout (the server answers
/// SYNC_WRITE_AMBIGUOUS at that timeout; this only covers a node that answers nothing).
const CLIENT_SLACK: Duration = Duration::from_secs(2);

/// Why the Sluice side did not start, connect, settle or stop.
#[derive(Debug, thiserror::Error)]
pub enum SluiceSideError {
    /// Starting or stopping the cluster.
    #[error(transparent)]
    Cluster(#[from] ClusterUpError),
    /// A seed that is not a loopback address.
    #[error(transparent)]
    Seed(BenchError),
    #[error("connecting to {seed}")]
    Connect {
        seed: String,
        #[source]
        source: ClientError,
    },
    #[error("the started bucket has no replica: durable writes cannot be measured")]
    NoReplica,
    #[error("connecting loop {i}'s smart client")]
    ConnectLoop {
        i: usize,
        #[source]
        source: ClusterError,
    },
    /// Waiting for persistence or for quiet nodes.
    #[error(transparent)]
    Settle(BenchError),
}

pub struct SluiceSide {
    cluster: LocalCluster,
    /// One plain connection per node, for the persistence wait.
    stats: Vec<Client>,
}

impl SluiceSide {
    /// Starts the cluster of run `run` (its log is `log`) and checks that its bucket has a
    /// replica.
    pub async fn start(
        args: &DurabilityArgs,
        run: u32,
        log: &Path,
    ) -> Result<SluiceSide, SluiceSideError> {
        eprintln!(
            "starting a {}-node cluster ({} replica(s))",
            args.nodes, args.replicas
        );
        let cluster = LocalCluster::start(args.cluster_spec(run), log).await?;
        let mut stats = Vec::new();
        for seed in &cluster.seeds {
            let l = &args.login;
            let c = Client::connect(
                loopback_addr(seed).map_err(SluiceSideError::Seed)?,
                ConnectOptions::sluice(&l.username, &l.password, &l.bucket),
            )
            .await
            .map_err(|source| SluiceSideError::Connect {
                seed: seed.clone(),
                source,
            })?;
            stats.push(c);
        }
        let side = SluiceSide { cluster, stats };
        let probe = side.writer(args, Level::None, 0).await?;
        let replicas = probe.client.map().num_replicas();
        if replicas < 1 {
            return Err(SluiceSideError::NoReplica);
        }
        Ok(side)
    }

    /// Loop `i`'s writer: its own smart client (started at seed `i mod nodes`), writing at
    /// `level`.
    pub async fn writer(
        &self,
        args: &DurabilityArgs,
        level: Level,
        i: usize,
    ) -> Result<SluiceWriter, SluiceSideError> {
        let l = &args.login;
        let mut options = ClusterOptions::sluice(&l.username, &l.password, &l.bucket);
        options.operation_timeout =
            Duration::from_millis(u64::from(args.timeout_ms)) + CLIENT_SLACK;
        let seeds = crate::harness::local_cluster::seeds_from(&self.cluster.seeds, i);
        let client = ClusterClient::connect(&seeds, options)
            .await
            .map_err(|source| SluiceSideError::ConnectLoop { i, source })?;
        Ok(SluiceWriter {
            client,
            options: level.store_options(args.timeout_ms),
        })
    }

    /// `n` writers at `level`.
    pub async fn writers(
        &self,
        args: &DurabilityArgs,
        level: Level,
        n: u32,
    ) -> Result<Vec<SluiceWriter>, SluiceSideError> {
        let mut out = Vec::new();
        for i in 0..n as usize {
            out.push(self.writer(args, level, i).await?);
        }
        Ok(out)
    }

    /// Waits until every node has persisted everything, then until the nodes are quiet, for
    /// at most `quiet_max` (a box that never quiets down is not an error).
    pub async fn settle(&mut self, quiet_max: Duration) -> Result<(), SluiceSideError> {
        for c in &mut self.stats {
            settle::wait_persisted(c, PERSIST_STALL)
                .await
                .map_err(SluiceSideError::Settle)?;
        }
        for &pid in &self.cluster.pids {
            settle::wait_quiet(pid, quiet_max)
                .await
                .map_err(SluiceSideError::Settle)?;
        }
        Ok(())
    }

    pub async fn stop(self) -> Result<(), SluiceSideError> {
        drop(self.stats);
        Ok(self.cluster.stop().await?)
    }
}

pub struct SluiceWriter {
    client: ClusterClient,
    options: StoreOptions,
}

impl Writer for SluiceWriter {
    type Error = ClusterError;

    async fn write(&mut self, key: &[u8], value: &[u8]) -> Result<(), ClusterError> {
        self.client.set(key, value, self.options).await.map(|_| ())
    }
}
