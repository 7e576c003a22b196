//! What the cluster scenarios read from the nodes themselves around a phase: STAT figures
//! summed over every node of the map (one plain connection each, opened once so the probe's
//! own connections do not show in `total_connections`), and, when the bench started the
//! nodes, each node's CPU time from /proc.

use anyhow::Context;
use sluice_client::{Client, ClusterClient, ClusterOptions, ConnectOptions};
use std::time::Duration;

use crate::harness::login_args::BenchLogin;
use crate::harness::proc_stats::cpu_time;
use crate::harness::process::loopback_addr;

pub struct NodeProbe {
    conns: Vec<(String, Client)>,
    /// The nodes' processes, in node order; empty for a cluster the bench did not start.
    pids: Vec<u32>,
}

/// A reading of every node, to subtract from a later one.
#[derive(Debug, Clone, Default)]
pub struct NodeReading {
    /// The STAT values asked for, summed over the nodes.
    pub stats: Vec<u64>,
    /// CPU time of each node process; empty when the pids are unknown.
    pub cpu: Vec<Duration>,
}

impl NodeProbe {
    /// Connects to every node the cluster map of `seeds` lists.
    pub async fn connect(
        seeds: &[String],
        login: &BenchLogin,
        pids: Vec<u32>,
    ) -> anyhow::Result<NodeProbe> {
        for s in seeds {
            loopback_addr(s)?;
        }
        let options = ConnectOptions::sluice(&login.username, &login.password, &login.bucket);
        let map = ClusterClient::connect(seeds, ClusterOptions::new(options.clone()))
            .await
            .context("reading the cluster map")?
            .map();
        let mut conns = Vec::new();
        for node in map.nodes() {
            let c = Client::connect(node.addr.as_str(), options.clone())
                .await
                .with_context(|| format!("connecting to node {} for STAT", node.addr))?;
            conns.push((node.addr.clone(), c));
        }
        Ok(NodeProbe { conns, pids })
    }

    pub fn nodes(&self) -> usize {
        self.conns.len()
    }

    /// Reads `keys` (each `(group, key)`, a number) from every node, and the nodes' CPU.
    pub async fn read(&mut self, keys: &[(&str, &str)]) -> anyhow::Result<NodeReading> {
        let mut stats = vec![0u64; keys.len()];
        for (addr, c) in &mut self.conns {
            let mut groups: Vec<&str> = keys.iter().map(|(g, _)| *g).collect();
            groups.sort_unstable();
            groups.dedup();
            for group in groups {
                let pairs = c
                    .stats(group)
                    .await
                    .with_context(|| format!("STAT {group} on {addr}"))?;
                for (i, (_, key)) in keys.iter().enumerate().filter(|(_, (g, _))| *g == group) {
                    let v = pairs
                        .iter()
                        .find(|(k, _)| k == key)
                        .and_then(|(_, v)| v.parse::<u64>().ok())
                        .with_context(|| format!("{addr}: STAT {group} has no number {key}"))?;
                    stats[i] += v;
                }
            }
        }
        let cpu = self
            .pids
            .iter()
            .map(|&p| cpu_time(p).with_context(|| format!("reading CPU of node pid {p}")))
            .collect::<anyhow::Result<_>>()?;
        Ok(NodeReading { stats, cpu })
    }
}

impl NodeReading {
    /// What changed from `before` to `self`.
    pub fn since(&self, before: &NodeReading) -> NodeReading {
        NodeReading {
            stats: self
                .stats
                .iter()
                .zip(&before.stats)
                .map(|(a, b)| a.saturating_sub(*b))
                .collect(),
            cpu: self
                .cpu
                .iter()
                .zip(&before.cpu)
                .map(|(a, b)| a.saturating_sub(*b))
                .collect(),
        }
    }

    /// CPU seconds of all nodes together (None when the pids are unknown).
    pub fn cpu_total_s(&self) -> Option<f64> {
        (!self.cpu.is_empty()).then(|| self.cpu.iter().map(Duration::as_secs_f64).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_difference_of_readings_never_goes_negative() {
        let before = NodeReading {
            stats: vec![10, 5],
            cpu: vec![Duration::from_secs(1), Duration::from_secs(3)],
        };
        let after = NodeReading {
            stats: vec![25, 4],
            cpu: vec![Duration::from_secs(2), Duration::from_secs(3)],
        };
        let d = after.since(&before);
        assert_eq!(d.stats, vec![15, 0]);
        assert_eq!(d.cpu_total_s(), Some(1.0));
        assert_eq!(NodeReading::default().cpu_total_s(), None);
    }
}
