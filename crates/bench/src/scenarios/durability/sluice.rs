//! Sluice as a `bench durability` target: the local cluster (`sluice cluster up`), one smart
//! client per loop ([`ClusterClient`], routed by the map) whose sets carry the row's
//! durability level, and the wait for a persisted, quiet cluster between rows.

use anyhow::Context;
use sluice_client::{Client, ClusterClient, ClusterOptions, ConnectOptions, StoreOptions};
use std::path::Path;
use std::time::Duration;

use crate::harness::local_cluster::LocalCluster;
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

pub struct SluiceSide {
    cluster: LocalCluster,
    /// One plain connection per node, for the persistence wait.
    stats: Vec<Client>,
}

impl SluiceSide {
    /// Starts the cluster of run `run` (its log is `log`) and checks that its bucket has a
    /// replica.
    pub async fn start(args: &DurabilityArgs, run: u32, log: &Path) -> anyhow::Result<SluiceSide> {
        eprintln!(
            "starting a {}-node cluster ({} replica(s))",
            args.nodes, args.replicas
        );
        let cluster = LocalCluster::start(args.cluster_spec(run), log).await?;
        let mut stats = Vec::new();
        for seed in &cluster.seeds {
            let l = &args.login;
            let c = Client::connect(
                loopback_addr(seed)?,
                ConnectOptions::sluice(&l.username, &l.password, &l.bucket),
            )
            .await
            .with_context(|| format!("connecting to {seed}"))?;
            stats.push(c);
        }
        let side = SluiceSide { cluster, stats };
        let probe = side.writer(args, Level::None, 0).await?;
        let replicas = probe.client.map().num_replicas();
        anyhow::ensure!(
            replicas >= 1,
            "the started bucket has no replica: durable writes cannot be measured"
        );
        Ok(side)
    }

    /// Loop `i`'s writer: its own smart client (started at seed `i mod nodes`), writing at
    /// `level`.
    pub async fn writer(
        &self,
        args: &DurabilityArgs,
        level: Level,
        i: usize,
    ) -> anyhow::Result<SluiceWriter> {
        let l = &args.login;
        let mut options = ClusterOptions::sluice(&l.username, &l.password, &l.bucket);
        options.operation_timeout =
            Duration::from_millis(u64::from(args.timeout_ms)) + CLIENT_SLACK;
        let seeds = crate::harness::local_cluster::seeds_from(&self.cluster.seeds, i);
        let client = ClusterClient::connect(&seeds, options)
            .await
            .with_context(|| format!("connecting loop {i}'s smart client"))?;
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
    ) -> anyhow::Result<Vec<SluiceWriter>> {
        let mut out = Vec::new();
        for i in 0..n as usize {
            out.push(self.writer(args, level, i).await?);
        }
        Ok(out)
    }

    /// Waits until every node has persisted everything, then until the nodes are quiet, for
    /// at most `quiet_max` (a box that never quiets down is not an error).
    pub async fn settle(&mut self, quiet_max: Duration) -> anyhow::Result<()> {
        for c in &mut self.stats {
            settle::wait_persisted(c, PERSIST_STALL).await?;
        }
        for &pid in &self.cluster.pids {
            settle::wait_quiet(pid, quiet_max).await?;
        }
        Ok(())
    }

    pub async fn stop(self) -> anyhow::Result<()> {
        drop(self.stats);
        Ok(self.cluster.stop().await?)
    }
}

pub struct SluiceWriter {
    client: ClusterClient,
    options: StoreOptions,
}

impl Writer for SluiceWriter {
    async fn write(&mut self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.client
            .set(key, value, self.options)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}
