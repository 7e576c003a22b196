//! `sluice bench durability` options (issue 23): durable-write latency per level on a local
//! cluster (3 nodes, 1 replica by default), optionally beside Redis primary + replica with
//! `SET` and `SET` + `WAIT 1 0`.

use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

use crate::harness::local_cluster::ClusterSpec;
use crate::harness::login_args::BenchLogin;
use crate::harness::redis_peer::RedisPersistence;
use crate::scenarios::durability::row::Level;
use crate::scenarios::kv::args::{parse_value_bytes, BucketTypeArg};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DurabilityPeer {
    /// Redis primary + 1 replica (redis-server from PATH): plain SET, and SET followed by
    /// `WAIT 1 0` on the same connection.
    Redis,
}

/// Options that cannot run together, found before anything starts.
#[derive(Debug, thiserror::Error)]
pub enum DurabilityArgsError {
    #[error("--levels lists no level")]
    NoLevels,
    #[error("--levels names a level twice")]
    LevelTwice,
    #[error("--warmup-s ({warmup_s}) must be shorter than --row-s ({row_s})")]
    WarmupTooLong { warmup_s: u64, row_s: u64 },
    #[error("--keys ({keys}) must give every connection a key (--connections {connections})")]
    TooFewKeys { keys: u64, connections: u32 },
}

#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub struct DurabilityArgs {
    /// Nodes of the cluster the bench starts.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(2..=8))]
    pub nodes: u16,

    /// Replicas of its bucket (durability needs at least one; Couchbase allows up to two).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub replicas: u8,

    /// First port of the started cluster (each node takes 10 from here on).
    #[arg(long, default_value_t = 13700)]
    pub base_port: u16,

    /// Where the started clusters keep their data, one subdirectory per run (default: a
    /// temporary directory each, removed afterwards).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,

    /// Bucket memory quota per node of the started cluster.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
    pub memory_quota_mb: u64,

    /// vbuckets of the started cluster.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub vbuckets: u16,

    #[command(flatten)]
    #[serde(flatten)]
    pub login: BenchLogin,

    /// The Sluice rows, in order: `none` (a plain set), `majority`,
    /// `majority-and-persist-active`, `persist-to-majority`.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "none,majority,majority-and-persist-active,persist-to-majority"
    )]
    pub levels: Vec<Level>,

    /// The durability timeout sent with every durable set (the server aborts the write and
    /// answers SYNC_WRITE_AMBIGUOUS after it).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u16).range(1..=65534))]
    pub timeout_ms: u16,

    /// Connections per row, each a closed loop with one write outstanding (on Sluice, each
    /// its own smart client).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub connections: u32,

    /// Length of each row, warm-up included.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub row_s: u64,

    /// The first seconds of each row, not measured.
    #[arg(long, default_value_t = 2)]
    pub warmup_s: u64,

    /// Also stop each connection's loop after this many writes (warm-up included).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_writes: Option<u64>,

    /// Keys written over (prefilled first, so that every measured write is an update); each
    /// connection has its own share.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub keys: u64,

    /// Value size of every write.
    #[arg(long, default_value_t = 1024, value_parser = parse_value_bytes)]
    pub value_bytes: usize,

    /// Runs; each figure is the median over runs (targets alternate run by run).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub runs: u32,

    /// Also run the same loops against a peer, in the same run.
    #[arg(long, value_enum)]
    pub vs: Option<DurabilityPeer>,

    /// How the Redis peer persists; give both (`none,aof`) to run it in both modes.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "aof")]
    pub redis_persistence: Vec<RedisPersistence>,

    /// A short run for smoke tests: 64 vbuckets, 256 MiB quota, 2 000 keys, 3 s rows (1 s
    /// warm-up), 1 run (these replace the options of the same names).
    #[arg(long)]
    pub quick: bool,

    /// Directory for report.md, results.json and the logs (default bench-out/durability).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// A write with no answer for this long past the durability timeout ends its loop as
/// failed (a Redis `WAIT 1 0` has no timeout of its own).
pub const STUCK_AFTER_TIMEOUT: Duration = Duration::from_secs(5);

impl DurabilityArgs {
    /// The options after `--quick`.
    pub fn effective(&self) -> DurabilityArgs {
        let mut a = self.clone();
        if a.quick {
            a.vbuckets = 64;
            a.memory_quota_mb = 256;
            a.keys = 2_000;
            a.row_s = 3;
            a.warmup_s = 1;
            a.runs = 1;
        }
        a
    }

    pub fn validate(&self) -> Result<(), DurabilityArgsError> {
        if self.levels.is_empty() {
            return Err(DurabilityArgsError::NoLevels);
        }
        let mut seen = std::collections::HashSet::new();
        if !self.levels.iter().all(|l| seen.insert(*l)) {
            return Err(DurabilityArgsError::LevelTwice);
        }
        if self.warmup_s >= self.row_s {
            return Err(DurabilityArgsError::WarmupTooLong {
                warmup_s: self.warmup_s,
                row_s: self.row_s,
            });
        }
        if self.keys < u64::from(self.connections) {
            return Err(DurabilityArgsError::TooFewKeys {
                keys: self.keys,
                connections: self.connections,
            });
        }
        Ok(())
    }

    /// The cluster the bench starts for run `run` (0-based).
    pub fn cluster_spec(&self, run: u32) -> ClusterSpec<'_> {
        ClusterSpec {
            nodes: self.nodes,
            replicas: self.replicas,
            base_port: self.base_port,
            data_dir: self
                .data_dir
                .as_ref()
                .map(|d| d.join(format!("run{}", run + 1))),
            memory_quota_mb: self.memory_quota_mb,
            vbuckets: self.vbuckets,
            bucket_type: BucketTypeArg::Couchbase,
            login: &self.login,
            scenario: "durability",
        }
    }

    pub fn row_length(&self) -> Duration {
        Duration::from_secs(self.row_s)
    }

    pub fn warmup(&self) -> Duration {
        Duration::from_secs(self.warmup_s)
    }

    /// How long one write may take before its loop gives up on the connection.
    pub fn stuck_after(&self) -> Duration {
        Duration::from_millis(u64::from(self.timeout_ms)) + STUCK_AFTER_TIMEOUT
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: DurabilityArgs,
    }

    fn parse(args: &[&str]) -> Result<DurabilityArgs, clap::Error> {
        let mut all = vec!["bench"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).map(|c| c.args)
    }

    #[test]
    fn defaults_are_the_issues_setup() {
        let a = parse(&[]).unwrap();
        assert_eq!((a.nodes, a.replicas, a.runs), (3, 1, 3));
        assert_eq!(a.levels, Level::ALL.to_vec());
        assert_eq!(a.vs, None);
        assert_eq!(a.redis_persistence, vec![RedisPersistence::Aof]);
        a.validate().unwrap();
        assert_eq!(a.stuck_after(), Duration::from_secs(15));
    }

    #[test]
    fn levels_and_peers_parse() {
        let a = parse(&[
            "--levels",
            "persist-to-majority,none",
            "--vs",
            "redis",
            "--redis-persistence",
            "none,aof",
            "--max-writes",
            "500",
        ])
        .unwrap();
        assert_eq!(a.levels, vec![Level::PersistToMajority, Level::None]);
        assert_eq!(a.vs, Some(DurabilityPeer::Redis));
        assert_eq!(a.redis_persistence.len(), 2);
        assert_eq!(a.max_writes, Some(500));
    }

    #[test]
    fn bad_values_are_refused() {
        for bad in [
            &["--levels", "quorum"][..],
            &["--replicas", "0"],
            &["--replicas", "3"],
            &["--nodes", "1"],
            &["--timeout-ms", "0"],
            &["--connections", "0"],
            &["--max-writes", "0"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should be refused");
        }
        let twice = parse(&["--levels", "majority,majority"]).unwrap();
        assert!(twice.validate().is_err());
        let long_warmup = parse(&["--row-s", "2", "--warmup-s", "2"]).unwrap();
        assert!(long_warmup.validate().is_err());
        let few_keys = parse(&["--keys", "3", "--connections", "4"]).unwrap();
        assert!(few_keys.validate().is_err());
    }

    #[test]
    fn the_options_survive_config_json_without_the_password() {
        let a = parse(&[
            "--levels",
            "majority",
            "--password",
            "hunter2",
            "--runs",
            "5",
        ])
        .unwrap();
        let json = serde_json::to_value(&a).unwrap();
        assert!(!json.to_string().contains("hunter2"), "{json}");
        // `bench rerun` replaces these keys; they must be at the top level.
        for k in ["out", "data_dir", "username"] {
            assert!(json.get(k).is_some(), "{k} missing from {json}");
        }
        let back: DurabilityArgs = serde_json::from_value(json).unwrap();
        assert_eq!((back.levels, back.runs), (vec![Level::Majority], 5));
    }

    #[test]
    fn quick_shrinks_the_run() {
        let a = parse(&["--quick"]).unwrap().effective();
        assert_eq!((a.row_s, a.warmup_s, a.runs, a.keys), (3, 1, 1, 2_000));
        a.validate().unwrap();
    }
}
