//! Sluice as a `bench replication` target: the load goes through the smart client
//! ([`ClusterClient`]: routed by the map, pipelined per node), the latency samples poll
//! GET_REPLICA, and the lag comes from each node's STAT groups:
//! - `replication`: summed high seqnos of active and replica vbuckets; replicas × Σ active −
//!   Σ replica over the nodes is what the replicas have yet to apply;
//! - `dcpagg`: `ep_dcpq:replication:total_bytes` (bytes the replication producers sent) and
//!   `ep_dcpq:replication:items_remaining` (the producers' own not-yet-sent count).

use bytes::Bytes;
use sluice_client::{
    Client, ClusterClient, ClusterOptions, ConnectOptions, Durability, DurabilityLevel,
    StoreOptions,
};
use sluice_types::VbId;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;
use tokio::task::JoinSet;

use crate::harness::process::loopback_addr;
use crate::harness::settle;
use crate::load::pacer::Pacer;
use crate::load::workload::key;
use crate::scenarios::replication::background::NodeShare;
use crate::scenarios::replication::durable::{DurableLevel, DURABLE_TIMEOUT};
use crate::scenarios::replication::indexes::IndexNode;
use crate::scenarios::replication::measure::{LagReading, WriteOutcome};
use crate::scenarios::replication::stages::StageSnapshot;
use crate::scenarios::replication::step::WritePlan;
use crate::scenarios::replication::target::TargetError;
use crate::scenarios::replication::values::Docs;
use crate::scenarios::replication::xdcr::XdcrSnapshot;
use std::net::SocketAddr;

/// Waiting for persistence fails if nothing more is persisted for this long.
const PERSIST_STALL: Duration = Duration::from_secs(60);
/// Documents per prefill batch (each batch pipelines over every node).
const PREFILL_BATCH: usize = 2048;

pub struct SluiceTarget {
    writer: ClusterClient,
    sampler: ClusterClient,
    /// One client per durability level's probe: a durable write holds its connection's
    /// later answers, which must not delay the sampler's or the other level's.
    durable: [ClusterClient; 2],
    /// One plain connection per node for STAT.
    stats: Vec<Arc<Mutex<Client>>>,
    replicas: u8,
    sample_errors: Arc<AtomicU64>,
    /// The nodes' processes when the bench started them (for the quiet wait).
    pids: Vec<u32>,
    /// How the column readers log in.
    login: ConnectOptions,
}

impl SluiceTarget {
    pub async fn connect(
        seeds: &[String],
        username: &str,
        password: &str,
        bucket: &str,
        pids: Vec<u32>,
    ) -> Result<SluiceTarget, TargetError> {
        for s in seeds {
            loopback_addr(s).map_err(TargetError::Address)?;
        }
        let options = ClusterOptions::sluice(username, password, bucket);
        let connect = |whose: &'static str| {
            let options = options.clone();
            async move {
                ClusterClient::connect(seeds, options)
                    .await
                    .map_err(|source| TargetError::Connect { whose, source })
            }
        };
        let writer = connect("the load's").await?;
        let sampler = connect("the sampler's").await?;
        let probe_client = || connect("a durable probe's");
        let durable = [probe_client().await?, probe_client().await?];
        let map = writer.map();
        let replicas = map.num_replicas();
        if replicas < 1 {
            return Err(TargetError::NoReplicas);
        }
        let mut stats = Vec::new();
        for node in map.nodes() {
            let addr = loopback_addr(&node.addr).map_err(TargetError::Address)?;
            let c = Client::connect(addr, ConnectOptions::sluice(username, password, bucket))
                .await
                .map_err(|source| TargetError::ConnectStat {
                    addr: node.addr.clone(),
                    source,
                })?;
            stats.push(Arc::new(Mutex::new(c)));
        }
        Ok(SluiceTarget {
            writer,
            sampler,
            durable,
            stats,
            replicas,
            sample_errors: Arc::default(),
            pids,
            login: ConnectOptions::sluice(username, password, bucket),
        })
    }

    pub fn login(&self) -> &ConnectOptions {
        &self.login
    }

    /// Where a views column defines its indexes: the map's first node (the one whose query
    /// service the map lists).
    pub fn index_node(&self, username: &str, password: &str) -> Result<IndexNode, TargetError> {
        let (kv, admin) = self.first_node()?;
        Ok(IndexNode {
            admin,
            kv,
            login: self.login.clone(),
            username: username.to_string(),
            password: password.to_string(),
            replicas: self.writer.map().nodes().len().saturating_sub(1),
        })
    }

    /// The map's first node: its KV address and its admin port's (`mgmt` in the map; else
    /// the KV port + 1, as `sluice cluster up` lays them out).
    pub fn first_node(&self) -> Result<(SocketAddr, SocketAddr), TargetError> {
        let map = self.writer.map();
        let node = map.nodes().first().ok_or(TargetError::NoNode)?;
        let kv = loopback_addr(&node.addr).map_err(TargetError::Address)?;
        let admin_port = match node.mgmt_port {
            Some(p) => p,
            None => node
                .kv_port
                .checked_add(1)
                .ok_or(TargetError::NoAdminPort)?,
        };
        Ok((kv, SocketAddr::new(kv.ip(), admin_port)))
    }

    /// Nodes of the cluster (one STAT connection each).
    pub fn node_count(&self) -> usize {
        self.stats.len()
    }

    /// Every node's figures of XDCR replication `id` (STAT `xdcr`), summed.
    pub async fn xdcr_snapshot(&self, id: &str) -> Result<XdcrSnapshot, TargetError> {
        let mut snapshot = XdcrSnapshot::default();
        for c in &self.stats {
            let figures = c.lock().await.stats("xdcr").await?;
            snapshot.add_node(&figures, id)?;
        }
        Ok(snapshot)
    }

    /// Each node of the map with the vbuckets active on it.
    pub fn shares(&self) -> Result<Vec<NodeShare>, TargetError> {
        let map = self.writer.map();
        let mut out = Vec::new();
        for node in map.nodes() {
            let vbuckets = (0..map.num_vbuckets())
                .map(VbId)
                .filter(|vb| map.active_node(*vb).is_some_and(|n| n.addr == node.addr))
                .collect();
            out.push(NodeShare {
                addr: loopback_addr(&node.addr)
                    .map_err(TargetError::Address)?
                    .to_string(),
                vbuckets,
            });
        }
        Ok(out)
    }

    /// The lowest resident ratio of active items over the nodes, in % (STAT
    /// `vb_active_perc_mem_resident`).
    pub async fn resident_pct(&self) -> Result<u64, TargetError> {
        let mut lowest = 100;
        for c in &self.stats {
            let all = c.lock().await.stats("").await?;
            lowest = lowest.min(stat(&all, "vb_active_perc_mem_resident")?);
        }
        Ok(lowest)
    }

    /// Waits until every node has persisted everything, then until the nodes are quiet
    /// (storage compaction after the prefill), for at most `quiet_max`.
    pub async fn settle(&self, quiet_max: Duration) -> Result<(), TargetError> {
        for c in &self.stats {
            settle::wait_persisted(&mut *c.lock().await, PERSIST_STALL)
                .await
                .map_err(TargetError::Settle)?;
        }
        for &pid in &self.pids {
            settle::wait_quiet(pid, quiet_max)
                .await
                .map_err(TargetError::Settle)?;
        }
        Ok(())
    }

    /// Writes keys `0..items` once, key `i` with document `i` of `docs`.
    pub async fn prefill(
        &self,
        items: u64,
        docs: &Docs,
        done: &AtomicU64,
    ) -> Result<(), TargetError> {
        let mut next = 0u64;
        while next < items {
            let end = (next + PREFILL_BATCH as u64).min(items);
            let batch: Vec<([u8; 32], Bytes)> =
                (next..end).map(|i| (key(i), docs.doc(i))).collect();
            let answers = self.writer.set_many(&batch, StoreOptions::default()).await;
            if let Some(e) = answers.into_iter().find_map(Result::err) {
                return Err(TargetError::PrefillSet(e));
            }
            done.fetch_add(end - next, Ordering::Relaxed);
            next = end;
        }
        Ok(())
    }

    /// One writer task's share of a step.
    pub async fn write(&self, plan: WritePlan, first: u64) -> WriteOutcome {
        let mut pacer = Pacer::new(plan.start, plan.rate, plan.writers, first);
        let mut out = WriteOutcome::default();
        let mut running = JoinSet::new();
        let mut k = 0u64;
        let account = |out: &mut WriteOutcome, (due, ok, at): (Instant, bool, Instant)| {
            plan.done.fetch_add(u64::from(ok), Ordering::Relaxed);
            out.account(ok, due, at, plan.measure_from);
        };
        loop {
            let now = Instant::now();
            if now >= plan.until {
                break;
            }
            while running.len() < plan.in_flight_max {
                let Some(due) = pacer.take_due(now) else {
                    break;
                };
                let slot = first + k * plan.writers;
                k += 1;
                let (c, v) = (self.writer.clone(), plan.docs.doc(slot));
                let key = key(slot % plan.items);
                running.spawn(async move {
                    let ok = c.set(&key, &v, StoreOptions::default()).await.is_ok();
                    (due, ok, Instant::now())
                });
            }
            let wake = if running.len() < plan.in_flight_max {
                pacer.next_due().min(plan.until)
            } else {
                plan.until
            };
            tokio::select! {
                Some(r) = running.join_next(), if !running.is_empty() => {
                    if let Ok(r) = r { account(&mut out, r) }
                }
                _ = tokio::time::sleep_until(wake.into()) => {}
            }
        }
        out.behind = pacer.behind(plan.until);
        while let Some(r) = running.join_next().await {
            if let Ok(r) = r {
                account(&mut out, r);
            }
        }
        out
    }

    /// Sends a sample's set without waiting for its answer.
    pub fn send_sample(&self, key: Bytes, value: Bytes) {
        let (c, errors) = (self.sampler.clone(), self.sample_errors.clone());
        tokio::spawn(async move {
            if c.set(&key, &value, StoreOptions::default()).await.is_err() {
                errors.fetch_add(1, Ordering::Relaxed);
            }
        });
    }

    /// A set at `level` through that level's own client: true once answered with success;
    /// refused, timed out or ambiguous is false.
    pub async fn durable_set(&self, key: &[u8], value: &[u8], level: DurableLevel) -> bool {
        let (client, level) = match level {
            DurableLevel::Majority => (&self.durable[0], DurabilityLevel::Majority),
            DurableLevel::PersistToMajority => {
                (&self.durable[1], DurabilityLevel::PersistToMajority)
            }
        };
        let timeout_ms = u16::try_from(DURABLE_TIMEOUT.as_millis()).unwrap_or(u16::MAX - 1);
        let options = StoreOptions {
            durability: Some(Durability {
                level,
                timeout_ms: Some(timeout_ms),
            }),
            ..StoreOptions::default()
        };
        client.set(key, value, options).await.is_ok()
    }

    /// Whether replica 0 holds exactly `value` under `key`.
    pub async fn visible(&self, key: &[u8], value: &[u8]) -> Result<bool, TargetError> {
        match self.sampler.get_replica(key, 0).await {
            Ok(doc) => Ok(doc.value == value),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(TargetError::ReplicaRead(e)),
        }
    }

    /// Sample sets that failed so far.
    pub fn sample_errors(&self) -> u64 {
        self.sample_errors.load(Ordering::Relaxed)
    }

    /// Every node's stage histograms (STAT `replication`), merged.
    pub async fn stage_snapshot(&self) -> Result<StageSnapshot, TargetError> {
        let mut snapshot = StageSnapshot::default();
        for c in &self.stats {
            let repl = c.lock().await.stats("replication").await?;
            snapshot.add_node(&repl)?;
        }
        Ok(snapshot)
    }

    pub async fn probe(&self) -> Result<LagReading, TargetError> {
        let mut reads = JoinSet::new();
        for c in &self.stats {
            let c = c.clone();
            reads.spawn(async move {
                let mut c = c.lock().await;
                let repl = c.stats("replication").await?;
                let agg = c.stats("dcpagg").await?;
                Ok::<_, sluice_client::ClientError>((repl, agg))
            });
        }
        let (mut active, mut replica, mut bytes, mut remaining) = (0u64, 0u64, 0u64, 0u64);
        while let Some(r) = reads.join_next().await {
            let (repl, agg) = r.map_err(TargetError::StatTask)??;
            active += stat(&repl, "vb_active_high_seqno_total")?;
            replica += stat(&repl, "vb_replica_high_seqno_total")?;
            // A node with no replication connection yet has no such keys.
            bytes += stat(&agg, "ep_dcpq:replication:total_bytes").unwrap_or(0);
            remaining += stat(&agg, "ep_dcpq:replication:items_remaining").unwrap_or(0);
        }
        let behind = (u64::from(self.replicas) * active) as f64 - replica as f64;
        Ok(LagReading {
            behind,
            bytes_total: bytes,
            producer_remaining: Some(remaining),
        })
    }
}

fn stat(stats: &[(String, String)], name: &'static str) -> Result<u64, TargetError> {
    stats
        .iter()
        .find(|(k, _)| k == name)
        .and_then(|(_, v)| v.parse().ok())
        .ok_or(TargetError::NoStat { name })
}
