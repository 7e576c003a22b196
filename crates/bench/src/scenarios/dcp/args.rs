//! `sluice bench dcp` options. The defaults make a full `--scenario all` run take a few
//! minutes on a 2-core box: 1,000,000 × 256 B in memory, 500,000 × 1 KiB in a 64 MiB
//! couchbase bucket (about 8× its quota), 25 consumers for the catch-up.

use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};

use crate::harness::login_args::BenchLogin;
use std::path::PathBuf;

use crate::scenarios::kv::args::{parse_rate, parse_value_bytes, BucketTypeArg};

#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub struct DcpArgs {
    /// What to measure: the drain rate of one consumer against the node's write rate
    /// (both bucket setups), the catch-up of many consumers at once, or both.
    #[arg(long, value_enum, default_value_t = Scenario::All)]
    pub scenario: Scenario,

    /// Documents in the in-memory setup (keys are 32 bytes).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub items: u64,

    /// Value size of the in-memory setup's documents.
    #[arg(long, default_value_t = 256, value_parser = parse_value_bytes)]
    pub value_bytes: usize,

    /// Bucket type of the in-memory setup (its quota must hold the data).
    #[arg(long, value_enum, default_value_t = BucketTypeArg::Ephemeral)]
    pub memory_bucket_type: BucketTypeArg,

    /// Memory quota of the in-memory setup: larger than the data.
    #[arg(long, default_value_t = 2048, value_parser = clap::value_parser!(u64).range(1..))]
    pub memory_quota_mb: u64,

    /// Documents in the larger-than-memory setup (a couchbase bucket).
    #[arg(long, default_value_t = 500_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub ltm_items: u64,

    /// Value size of the larger-than-memory setup's documents.
    #[arg(long, default_value_t = 1024, value_parser = parse_value_bytes)]
    pub ltm_value_bytes: usize,

    /// Memory quota of the larger-than-memory setup: well below the data, so streams from
    /// seqno 0 read most values from disk.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    pub ltm_quota_mb: u64,

    /// Which setup the catch-up scenario runs on.
    #[arg(long, value_enum, default_value_t = Setup::LargerThanMemory)]
    pub catch_up_setup: Setup,

    /// Consumers in the catch-up scenario, all started together, each its own connection.
    #[arg(long, default_value_t = 25, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub consumers: u32,

    /// Open-loop write load during the catch-up, in sets/s over the loaded keys (0 = none).
    /// It stops when the last consumer has caught up.
    #[arg(long = "write-rate", value_name = "OPS_PER_S", default_value_t = 0.0, value_parser = parse_rate)]
    pub write_rate_ops_per_s: f64,

    /// Connections of the prefill and of the write loads (closed loop: one set in flight
    /// each, like `sluice bench kv`).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub connections: u32,

    /// Length of each timed write-throughput run (set-only, closed loop).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3_600))]
    pub write_duration_s: u64,

    /// Unmeasured set load before each write-throughput run.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(0..=3_600))]
    pub write_warmup_s: u64,

    /// Repeat every measurement this many times (a fresh stream each time, same data) and
    /// report medians.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: u32,

    /// vbuckets of the started servers.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u16).range(1..))]
    pub vbuckets: u16,

    /// Flow-control window of each consumer (DCP connection_buffer_size).
    #[arg(long, default_value_t = sluice_client::dcp::DEFAULT_WINDOW_BYTES,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub window_bytes: u32,

    /// A consumer that receives nothing for this long fails the run (a stalled stream), as
    /// does a persistence wait that makes no progress for this long.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3_600))]
    pub stall_timeout_s: u64,

    #[command(flatten)]
    #[serde(flatten)]
    pub login: BenchLogin,

    /// Write results.json, report.md and each server's log here (the table is printed
    /// either way).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    Drain,
    CatchUp,
    All,
}

/// The two bucket setups of the drain scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Setup {
    /// Every document resident: `--memory-bucket-type` with `--memory-quota-mb`.
    InMemory,
    /// A couchbase bucket with `--ltm-quota-mb`, well below the data.
    LargerThanMemory,
}

impl Setup {
    pub fn as_str(self) -> &'static str {
        match self {
            Setup::InMemory => "in-memory",
            Setup::LargerThanMemory => "larger-than-memory",
        }
    }
}

impl DcpArgs {
    pub fn drains(&self) -> bool {
        matches!(self.scenario, Scenario::Drain | Scenario::All)
    }

    pub fn catches_up(&self) -> bool {
        matches!(self.scenario, Scenario::CatchUp | Scenario::All)
    }

    /// The setups to start, in order: each is one fresh server.
    pub fn setups(&self) -> Vec<Setup> {
        [Setup::InMemory, Setup::LargerThanMemory]
            .into_iter()
            .filter(|s| self.drains() || (self.catches_up() && *s == self.catch_up_setup))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        dcp: DcpArgs,
    }

    fn parse(args: &[&str]) -> Result<DcpArgs, clap::Error> {
        let argv = std::iter::once("dcp").chain(args.iter().copied());
        Cli::try_parse_from(argv).map(|c| c.dcp)
    }

    #[test]
    fn defaults() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.scenario, Scenario::All);
        assert_eq!((a.items, a.value_bytes), (1_000_000, 256));
        assert_eq!(
            (a.ltm_items, a.ltm_value_bytes, a.ltm_quota_mb),
            (500_000, 1024, 64)
        );
        assert_eq!((a.consumers, a.runs), (25, 1));
        assert_eq!(a.memory_bucket_type, BucketTypeArg::Ephemeral);
        assert_eq!(a.catch_up_setup, Setup::LargerThanMemory);
        assert_eq!(a.write_rate_ops_per_s, 0.0);
        assert_eq!(a.setups(), [Setup::InMemory, Setup::LargerThanMemory]);
    }

    #[test]
    fn setups_follow_the_scenario() {
        let a = parse(&["--scenario", "catch-up"]).unwrap();
        assert_eq!(a.setups(), [Setup::LargerThanMemory]);
        let a = parse(&["--scenario", "catch-up", "--catch-up-setup", "in-memory"]).unwrap();
        assert_eq!(a.setups(), [Setup::InMemory]);
        let a = parse(&["--scenario", "drain"]).unwrap();
        assert!(a.drains() && !a.catches_up());
        assert_eq!(a.setups().len(), 2);
    }

    #[test]
    fn rejects_bad_values_and_hides_the_password() {
        for bad in [
            &["--items", "0"][..],
            &["--consumers", "0"],
            &["--write-rate", "-5"],
            &["--value-bytes", "0"],
            &["--scenario", "everything"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should be rejected");
        }
        let a = parse(&["--password", "hunter2", "--write-rate", "20000"]).unwrap();
        assert_eq!(a.write_rate_ops_per_s, 20_000.0);
        assert!(!serde_json::to_string(&a).unwrap().contains("hunter2"));
    }
}
