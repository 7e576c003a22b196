//! `sluice bench replication` options: seeds 000 and 001's replication measurements (items
//! remaining, replication bytes per second, replication latency) under stepped open-loop set
//! rates, on a local 2-node cluster with 1 replica, optionally beside Redis primary + replica.

use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};

use crate::harness::login_args::BenchLogin;
use std::path::PathBuf;
use std::time::Duration;

use crate::harness::local_cluster::ClusterSpec;
use crate::harness::redis_peer::RedisPersistence;
use crate::scenarios::kv::args::{parse_rate, parse_value_bytes, BucketTypeArg};
use crate::scenarios::replication::column::Column;
use crate::scenarios::replication::values::bytes_for_fields;
use crate::scenarios::replication::xdcr::XDCR_PORT_OFFSET;

/// Results written before `--bucket-type` existed ran on a couchbase bucket.
fn couchbase() -> BucketTypeArg {
    BucketTypeArg::Couchbase
}

/// Settings saved before views were real indexes had no query loop; the default.
fn views_query_every_ms() -> u64 {
    100
}

/// Settings saved before the XDCR column was real had no target cluster; the default.
fn one_node() -> u16 {
    1
}

/// Settings saved before `--durable-hz` existed ran no durable probes.
fn durable_hz() -> f64 {
    0.0
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplPeer {
    /// Redis primary + 1 replica (redis-server from PATH), with the same load and the same
    /// latency method.
    Redis,
}

/// Options that cannot run together, found before anything starts.
#[derive(Debug, thiserror::Error)]
pub enum ReplArgsError {
    #[error("--columns needs at least one column")]
    NoColumns,
    #[error("--columns names a column twice")]
    ColumnTwice,
    #[error("--warmup-s ({warmup_s}) must be shorter than --step-s ({step_s})")]
    WarmupTooLong { warmup_s: u64, step_s: u64 },
    #[error("every --rates value must be above 0")]
    RateNotPositive,
    #[error("--sample-hz must be above 0")]
    SampleHzNotPositive,
    #[error(
        "--columns views:{views} indexes {views} fields of the documents: --value-bytes \
         must be at least {needed} to hold them"
    )]
    ValueTooSmall { views: u8, needed: usize },
    #[error("--base-port {base_port} leaves no room for the XDCR target's ports")]
    NoRoomForXdcr { base_port: u16 },
}

#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub struct ReplArgs {
    /// Run against an existing Sluice cluster (KV ports, loopback only) instead of starting
    /// one. Its bucket must have at least one replica.
    #[arg(long, value_name = "HOST:PORT", value_delimiter = ',')]
    pub connect: Vec<String>,

    /// Nodes of the cluster the bench starts.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(2..=8))]
    pub nodes: u16,

    /// Replicas of the bucket the bench starts.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=3))]
    pub replicas: u8,

    /// First port of the started cluster (each node takes 10 from here on).
    #[arg(long, default_value_t = 13100)]
    pub base_port: u16,

    /// Where the started clusters keep their data, one subdirectory per run (default: a
    /// temporary directory each, removed afterwards).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,

    /// Bucket memory quota per node of the started cluster. The default holds 1 M 1 KiB
    /// items (active and replica copies) fully resident on 2 nodes.
    #[arg(long, default_value_t = 3072, value_parser = clap::value_parser!(u64).range(1..))]
    pub memory_quota_mb: u64,

    /// vbuckets of the started cluster.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub vbuckets: u16,

    #[command(flatten)]
    #[serde(flatten)]
    pub login: BenchLogin,

    /// Documents written before the steps (and overwritten, in turn, by them); the seeds
    /// used 1 M.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub items: u64,

    /// Value size of every set.
    #[arg(long, default_value_t = 1024, value_parser = parse_value_bytes)]
    pub value_bytes: usize,

    /// The set rates, one step each, in order. Stepping stops after the first rate the
    /// target cannot sustain.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "5000,10000,20000,30000,40000,50000,60000,80000,100000",
        value_parser = parse_rate
    )]
    pub rates: Vec<f64>,

    /// Length of each step, warm-up included.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(2..=3600))]
    pub step_s: u64,

    /// The first seconds of each step, not measured.
    #[arg(long, default_value_t = 2)]
    pub warmup_s: u64,

    /// Writer tasks (each with its own share of the schedule; on Redis each its own
    /// connection).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub writers: u32,

    /// Sets awaiting an answer per writer; a writer at the limit waits, and falls behind
    /// schedule.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub in_flight_max: u32,

    /// Replication-latency samples per second (Poisson-timed).
    #[arg(long, default_value_t = 100.0, value_parser = parse_rate)]
    pub sample_hz: f64,

    /// Durable writes per second (Poisson-timed, one at a time) of each durability level's
    /// probe during every step, to keys of their own: Sluice `majority` and, on a couchbase
    /// bucket, `persistToMajority`; Redis SET + `WAIT 1`. Their p50 / p99 go in the report.
    /// 0: no probes.
    #[arg(long, default_value_t = 100.0, value_parser = parse_rate)]
    #[serde(default = "durable_hz")]
    pub durable_hz: f64,

    /// Runs of the whole step ladder; each figure is the median over runs (targets alternate
    /// run by run).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub runs: u32,

    /// The seeds' columns: what reads the change streams beside the replication, each with
    /// its own climb of the rate ladder on the same cluster. `replication` (nothing else),
    /// `views` or `views:N` (1 or N real indexes, 1 to 16, defined through the query service
    /// before the column's ladder, on fields f0 … of the JSON documents, with a light query
    /// loop beside the load, dropped after it), `xdcr` (a second local cluster, replicated
    /// to by XDCR over the column's ladder; see `--xdcr-nodes`), `clients:N` (N external DCP
    /// clients from seqno 0, then following), or several joined by `+`. Peers run
    /// replication only.
    #[arg(long, value_delimiter = ',', default_value = "replication")]
    pub columns: Vec<Column>,

    /// Pause between the views columns' point queries (one at a time, not_bounded, against
    /// the column's indexes in turn).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    #[serde(default = "views_query_every_ms")]
    pub views_query_every_ms: u64,

    /// Nodes of the target cluster an `xdcr` column starts (on this machine, beside the
    /// source: every node of it competes for the same cores).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=8))]
    #[serde(default = "one_node")]
    pub xdcr_nodes: u16,

    /// Replicas of the target cluster's bucket.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=3))]
    #[serde(default)]
    pub xdcr_replicas: u8,

    /// The bucket of the started cluster: `couchbase` persists every write, `ephemeral`
    /// keeps memory only (the same ladder without the disk, to tell persistence's share of
    /// the latency from the replication path's).
    #[arg(long, value_enum, default_value_t = BucketTypeArg::Couchbase)]
    #[serde(default = "couchbase")]
    pub bucket_type: BucketTypeArg,

    /// Also report where each step's replicated writes spent their time: the nodes' stage
    /// histograms (cursor read, sent, received, applied; time since the write), merged over
    /// the nodes, over the measured part of each step. Sluice only.
    #[arg(long)]
    #[serde(default)]
    pub breakdown: bool,

    /// Also run the same load against a peer, in the same run.
    #[arg(long, value_enum)]
    pub vs: Option<ReplPeer>,

    /// How the Redis peer persists; give both (`none,aof`) to run it in both modes.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "aof")]
    pub redis_persistence: Vec<RedisPersistence>,

    /// A short run for smoke tests: 20 k items, 64 vbuckets, 256 MiB quota, rates 2 k and
    /// 10 k, 4 s steps, 1 run (these replace the options of the same names).
    #[arg(long)]
    pub quick: bool,

    /// Directory for report.md and results.json.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl ReplArgs {
    /// The options after `--quick`.
    pub fn effective(&self) -> ReplArgs {
        let mut a = self.clone();
        if a.quick {
            a.items = 20_000;
            a.vbuckets = 64;
            a.memory_quota_mb = 256;
            a.rates = vec![2000.0, 10_000.0];
            a.step_s = 4;
            a.warmup_s = 1;
            a.runs = 1;
        }
        a
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
            bucket_type: self.bucket_type,
            login: &self.login,
            scenario: "repl",
        }
    }

    pub fn step(&self) -> Duration {
        Duration::from_secs(self.step_s)
    }

    pub fn warmup(&self) -> Duration {
        Duration::from_secs(self.warmup_s)
    }

    /// The first port of an `xdcr` column's target cluster.
    pub fn xdcr_base_port(&self) -> Result<u16, ReplArgsError> {
        let port = u32::from(self.base_port) + u32::from(XDCR_PORT_OFFSET);
        let last = port + 10 * u32::from(self.xdcr_nodes);
        if last > u32::from(u16::MAX) {
            return Err(ReplArgsError::NoRoomForXdcr {
                base_port: self.base_port,
            });
        }
        Ok(port as u16)
    }

    pub fn views_query_every(&self) -> Duration {
        Duration::from_millis(self.views_query_every_ms)
    }

    pub fn validate(&self) -> Result<(), ReplArgsError> {
        if self.columns.is_empty() {
            return Err(ReplArgsError::NoColumns);
        }
        let mut seen = std::collections::HashSet::new();
        if !self.columns.iter().all(|c| seen.insert(*c)) {
            return Err(ReplArgsError::ColumnTwice);
        }
        if self.warmup_s >= self.step_s {
            return Err(ReplArgsError::WarmupTooLong {
                warmup_s: self.warmup_s,
                step_s: self.step_s,
            });
        }
        if !self.rates.iter().all(|r| *r > 0.0) {
            return Err(ReplArgsError::RateNotPositive);
        }
        // Asked as "above 0", so that a NaN is refused too.
        let sampling = self.sample_hz > 0.0;
        if !sampling {
            return Err(ReplArgsError::SampleHzNotPositive);
        }
        if let Some(most) = self
            .columns
            .iter()
            .map(|c| c.views)
            .max()
            .filter(|v| *v > 0)
        {
            let needed = bytes_for_fields(usize::from(most));
            if self.value_bytes < needed {
                return Err(ReplArgsError::ValueTooSmall {
                    views: most,
                    needed,
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: ReplArgs,
    }

    fn parse(args: &[&str]) -> Result<ReplArgs, clap::Error> {
        let mut all = vec!["bench"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).map(|c| c.args)
    }

    #[test]
    fn defaults_follow_the_seeds() {
        let a = parse(&[]).unwrap();
        assert_eq!(
            (a.nodes, a.replicas, a.items, a.value_bytes),
            (2, 1, 1_000_000, 1024)
        );
        assert_eq!(a.rates.first(), Some(&5000.0));
        assert_eq!(a.redis_persistence, vec![RedisPersistence::Aof]);
        assert_eq!(a.columns, vec![Column::REPLICATION]);
        a.validate().unwrap();
    }

    #[test]
    fn lists_and_peers_parse() {
        let a = parse(&[
            "--rates",
            "1000,2500",
            "--vs",
            "redis",
            "--redis-persistence",
            "none,aof",
            "--connect",
            "127.0.0.1:1,127.0.0.1:2",
        ])
        .unwrap();
        assert_eq!(a.rates, vec![1000.0, 2500.0]);
        assert_eq!(a.vs, Some(ReplPeer::Redis));
        assert_eq!(a.redis_persistence.len(), 2);
        assert_eq!(a.connect.len(), 2);
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(parse(&["--rates", "1000,x"]).is_err());
        assert!(parse(&["--replicas", "0"]).is_err());
        assert!(parse(&["--nodes", "1"]).is_err());
        let a = parse(&["--step-s", "5", "--warmup-s", "5"]).unwrap();
        assert!(a.validate().is_err());
        assert!(parse(&["--rates", "0"]).unwrap().validate().is_err());
        assert!(parse(&["--columns", "views,bogus"]).is_err());
        let twice = parse(&["--columns", "views,replication,views"]).unwrap();
        assert!(twice.validate().is_err());
        let ok = parse(&["--columns", "replication,views+xdcr,clients:5"]).unwrap();
        assert_eq!(ok.columns.len(), 3);
        ok.validate().unwrap();
        let indexes = parse(&["--columns", "views,views:5,views:16+xdcr"]).unwrap();
        assert_eq!(
            indexes.columns.iter().map(|c| c.views).collect::<Vec<_>>(),
            vec![1, 5, 16]
        );
        indexes.validate().unwrap();
        assert!(parse(&["--columns", "views:17"]).is_err());
        // views and views:1 are the same column.
        let same = parse(&["--columns", "views,views:1"]).unwrap();
        assert!(same.validate().is_err());
        // Small values cannot hold 16 indexed fields.
        let small = parse(&["--columns", "views:16", "--value-bytes", "100"]).unwrap();
        assert!(small.validate().is_err());
        let plain = parse(&["--columns", "replication", "--value-bytes", "100"]).unwrap();
        plain.validate().unwrap();
    }

    #[test]
    fn quick_shrinks_the_run() {
        let a = parse(&["--quick"]).unwrap().effective();
        assert_eq!((a.items, a.step_s, a.rates.len()), (20_000, 4, 2));
        a.validate().unwrap();
    }
}
