//! What the cluster scenarios read from the nodes themselves around a phase: STAT figures
//! summed over every node of the map (one plain connection each, opened once so the probe's
//! own connections do not show in `total_connections`), and, when the bench started the
//! nodes, each node's CPU time from /proc.

use sluice_client::{
    Client, ClientError, ClusterClient, ClusterError, ClusterOptions, ConnectOptions,
};
use std::time::Duration;

use crate::error::BenchError;
use crate::harness::login_args::BenchLogin;
use crate::harness::proc_stats::cpu_time;
use crate::harness::process::loopback_addr;

/// Why the nodes could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// A seed that is not a loopback address.
    #[error(transparent)]
    Seed(#[from] BenchError),
    #[error("reading the cluster map")]
    Map(#[source] ClusterError),
    #[error("connecting to node {addr} for STAT")]
    Connect {
        addr: String,
        #[source]
        source: ClientError,
    },
    #[error("STAT {group} on {addr}")]
    Stat {
        group: String,
        addr: String,
        #[source]
        source: ClientError,
    },
    #[error("{addr}: STAT {group} has no number {key}")]
    NoNumber {
        addr: String,
        group: String,
        key: String,
    },
    #[error("reading CPU of node pid {pid}")]
    Cpu {
        pid: u32,
        #[source]
        source: std::io::Error,
    },
}

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
    ) -> Result<NodeProbe, ProbeError> {
        for s in seeds {
            loopback_addr(s)?;
        }
        let options = ConnectOptions::sluice(&login.username, &login.password, &login.bucket);
        let map = ClusterClient::connect(seeds, ClusterOptions::new(options.clone()))
            .await
            .map_err(ProbeError::Map)?
            .map();
        let mut conns = Vec::new();
        for node in map.nodes() {
            let c = Client::connect(node.addr.as_str(), options.clone())
                .await
                .map_err(|source| ProbeError::Connect {
                    addr: node.addr.clone(),
                    source,
                })?;
            conns.push((node.addr.clone(), c));
        }
        Ok(NodeProbe { conns, pids })
    }

    pub fn nodes(&self) -> usize {
        self.conns.len()
    }

    /// Reads `keys` (each `(group, key)`, a number) from every node, and the nodes' CPU.
    pub async fn read(&mut self, keys: &[(&str, &str)]) -> Result<NodeReading, ProbeError> {
        let mut stats = vec![0u64; keys.len()];
        for (addr, c) in &mut self.conns {
            let mut groups: Vec<&str> = keys.iter().map(|(g, _)| *g).collect();
            groups.sort_unstable();
            groups.dedup();
            for group in groups {
                let pairs = c.stats(group).await.map_err(|source| ProbeError::Stat {
                    group: group.to_string(),
                    addr: addr.clone(),
                    source,
                })?;
                for (i, (_, key)) in keys.iter().enumerate().filter(|(_, (g, _))| *g == group) {
                    let v = pairs
                        .iter()
                        .find(|(k, _)| k == key)
                        .and_then(|(_, v)| v.parse::<u64>().ok())
                        .ok_or_else(|| ProbeError::NoNumber {
                            addr: addr.clone(),
                            group: group.to_string(),
                            key: key.to_string(),
                        })?;
                    stats[i] += v;
                }
            }
        }
        let cpu = self
            .pids
            .iter()
            .map(|&pid| cpu_time(pid).map_err(|source| ProbeError::Cpu { pid, source }))
            .collect::<Result<_, _>>()?;
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
