//! `sluice bench query` options (issue 26's performance section): Sluice's index + query
//! service beside PostgreSQL 15 on the same data, the same machine and in the same run.

use clap::Args;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

use crate::harness::login_args::BenchLogin;

/// Options that cannot run together, found before anything starts.
#[derive(Debug, thiserror::Error)]
pub enum QueryArgsError {
    #[error("--freshness-rates must be positive")]
    FreshnessRateZero,
}

#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub struct QueryArgs {
    /// Documents loaded into both systems (about 1 KiB of JSON each).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(200..))]
    pub docs: u64,

    /// Seed of the documents and of the clients' picks.
    #[arg(long, default_value_t = 26)]
    pub seed: u64,

    /// Concurrent query clients, each a closed loop with one query outstanding (Sluice: its
    /// own kept-alive HTTP connection; PostgreSQL: its own connection).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub clients: u32,

    /// Measured length of each query phase.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub duration_s: u64,

    /// Unmeasured seconds before each phase's measurement.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(0..=600))]
    pub warmup_s: u64,

    /// Runs; each figure is the median over runs (the systems alternate run by run).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub runs: u32,

    /// The background write rate of the request_plus phase (updates of existing documents).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub write_rate: u64,

    /// The write rates of the index-freshness phase (Sluice only).
    #[arg(long, value_delimiter = ',', default_value = "10000,50000")]
    pub freshness_rates: Vec<u64>,

    /// Fewest ack-to-visible samples per freshness rate (the phase runs past --duration-s,
    /// for at most a minute more, until it has them).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub freshness_samples: u64,

    /// Documents the freshness writers rewrite (keys `w…`, each write a new email).
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub churn_docs: u64,

    /// Connections of each background writer (the rate is shared among them).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub writer_connections: u32,

    /// Bucket memory quota of the started Sluice.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(256..))]
    pub memory_quota_mb: u64,

    /// Index memory quota (block cache) of the started Sluice; by default what PostgreSQL
    /// gets as `shared_buffers`, so that both cache the same amount.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(16..))]
    pub index_memory_quota_mb: u64,

    /// vbuckets of the started Sluice.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub vbuckets: u16,

    /// PostgreSQL's `shared_buffers` (MiB).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(16..))]
    pub pg_shared_buffers_mb: u64,

    /// Directory of PostgreSQL's server binaries (initdb, postgres).
    #[arg(long, default_value = "/usr/local/bin")]
    pub pg_bin: PathBuf,

    /// Send Sluice's queries as text every time. By default its clients prepare their
    /// statements, as an SDK does with `adhoc = false` and as PostgreSQL's clients do:
    /// `PREPARE … auto_execute` once, then the statement's name.
    #[arg(long)]
    pub adhoc: bool,

    /// Run only Sluice (no PostgreSQL, no ratios).
    #[arg(long)]
    pub no_pg: bool,

    #[command(flatten)]
    #[serde(flatten)]
    pub login: BenchLogin,

    /// A short run for smoke tests: 20 000 docs, 3 s phases after 1 s of warm-up, 1 run,
    /// 1 000 writes/s (freshness: 1 000 and 5 000), 50 freshness samples, 64 vbuckets.
    #[arg(long)]
    pub quick: bool,

    /// Directory for report.md, results.json, config.json and the logs (default
    /// bench-out/query).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl QueryArgs {
    /// The options after `--quick`.
    pub fn effective(&self) -> QueryArgs {
        let mut a = self.clone();
        if a.quick {
            a.docs = 20_000;
            a.duration_s = 3;
            a.warmup_s = 1;
            a.runs = 1;
            a.write_rate = 1_000;
            a.freshness_rates = vec![1_000, 5_000];
            a.freshness_samples = 50;
            a.churn_docs = 2_000;
            a.vbuckets = 64;
            a.memory_quota_mb = 512;
        }
        a
    }

    pub fn validate(&self) -> Result<(), QueryArgsError> {
        if !self.freshness_rates.iter().all(|&r| r > 0) {
            return Err(QueryArgsError::FreshnessRateZero);
        }
        Ok(())
    }

    pub fn duration(&self) -> Duration {
        Duration::from_secs(self.duration_s)
    }

    pub fn warmup(&self) -> Duration {
        Duration::from_secs(self.warmup_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: QueryArgs,
    }

    fn parse(args: &[&str]) -> Result<QueryArgs, clap::Error> {
        let mut all = vec!["bench"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).map(|c| c.args)
    }

    #[test]
    fn defaults_are_the_issues_setup() {
        let a = parse(&[]).unwrap();
        assert_eq!((a.docs, a.clients, a.runs), (1_000_000, 16, 3));
        assert_eq!((a.duration_s, a.warmup_s, a.write_rate), (10, 2, 10_000));
        assert_eq!(a.freshness_rates, vec![10_000, 50_000]);
        a.validate().unwrap();
    }

    #[test]
    fn quick_shrinks_and_bad_values_are_refused() {
        let q = parse(&["--quick"]).unwrap().effective();
        assert_eq!((q.docs, q.runs), (20_000, 1));
        for bad in [&["--docs", "10"][..], &["--clients", "0"], &["--runs", "0"]] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        assert!(parse(&["--freshness-rates", "0"])
            .unwrap()
            .validate()
            .is_err());
    }

    #[test]
    fn the_options_survive_config_json_without_the_password() {
        let a = parse(&["--password", "hunter2", "--docs", "5000"]).unwrap();
        let json = serde_json::to_value(&a).unwrap();
        assert!(!json.to_string().contains("hunter2"));
        assert!(json.get("out").is_some());
        let back: QueryArgs = serde_json::from_value(json).unwrap();
        assert_eq!(back.docs, 5000);
    }
}
