//! `sluice bench footprint` options: seed 003's single-node figures. Update and GET throughput
//! and memory per item, for the engine called in-process and over local sockets, for
//! ephemeral (in-memory) and couchbase (durable) buckets, under a small and a large quota;
//! memcached beside the socket rows with `--vs memcached`.

use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

use crate::harness::login_args::BenchLogin;
use crate::scenarios::kv::args::{parse_value_bytes, BucketTypeArg, Peer};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// The engine called from threads of the bench's own process: no sockets, no protocol.
    InProcess,
    /// A `sluice server` on loopback, over the binary protocol.
    Sockets,
}

/// Options that leave nothing to run, found before anything starts: each variant names the
/// option that lists nothing.
#[derive(Debug, thiserror::Error)]
pub enum FootprintArgsError {
    #[error("--modes lists nothing")]
    Modes,
    #[error("--bucket-types lists nothing")]
    BucketTypes,
    #[error("--quotas-mb lists nothing")]
    QuotasMb,
}

#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub struct FootprintArgs {
    /// Ways of reaching the engine, each a row group.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "in-process,sockets"
    )]
    pub modes: Vec<Mode>,

    /// Bucket types, each a row group.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "ephemeral,couchbase"
    )]
    pub bucket_types: Vec<BucketTypeArg>,

    /// Bucket quotas in MiB; the seed constrained its heap to 64 MB and 2 GB.
    #[arg(long, value_delimiter = ',', default_value = "64,2048",
          value_parser = clap::value_parser!(u64).range(16..=65536))]
    pub quotas_mb: Vec<u64>,

    /// Documents stored before the timed phases (and then updated and read). The default
    /// fits the 64 MiB quota with room to spare.
    #[arg(long, default_value_t = 50_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub items: u64,

    /// Value size; the seed's payload serialized to 524 bytes.
    #[arg(long, default_value_t = 524, value_parser = parse_value_bytes)]
    pub value_bytes: usize,

    /// Threads for the in-process rows (default: the machine's cores).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub threads: Option<u32>,

    /// Connections for the socket rows, one request in flight each (closed loop).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub connections: u32,

    /// vbuckets of every bucket.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub vbuckets: u16,

    /// Measured seconds of each phase (updates, then GETs).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub duration_s: u64,

    /// Unmeasured seconds before each phase: the warm-up, the same load as the phase.
    #[arg(long, default_value_t = 2)]
    pub warmup_s: u64,

    /// Runs of each phase; each figure is the median over runs.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub runs: u32,

    /// Also run the socket rows against memcached (`-m` set to each quota), in the same run.
    #[arg(long, value_enum)]
    pub vs: Option<Peer>,

    /// memcached binary for --vs memcached.
    #[arg(long, default_value = "memcached")]
    pub memcached_bin: PathBuf,

    #[command(flatten)]
    #[serde(flatten)]
    pub login: BenchLogin,

    /// A short run for smoke tests: 10,000 items, 64 vbuckets, 1 s phases after 1 s warm-ups,
    /// 1 run (these replace the options of the same names).
    #[arg(long)]
    pub quick: bool,

    /// Directory for report.md and results.json (default bench-out/footprint).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl FootprintArgs {
    /// The options after `--quick`.
    pub fn effective(&self) -> FootprintArgs {
        let mut a = self.clone();
        if a.quick {
            a.items = 10_000;
            a.vbuckets = 64;
            a.duration_s = 1;
            a.warmup_s = 1;
            a.runs = 1;
        }
        a
    }

    pub fn validate(&self) -> Result<(), FootprintArgsError> {
        if self.modes.is_empty() {
            return Err(FootprintArgsError::Modes);
        }
        if self.bucket_types.is_empty() {
            return Err(FootprintArgsError::BucketTypes);
        }
        if self.quotas_mb.is_empty() {
            return Err(FootprintArgsError::QuotasMb);
        }
        Ok(())
    }

    pub fn threads(&self) -> usize {
        match self.threads {
            Some(t) => t as usize,
            None => std::thread::available_parallelism().map_or(2, |n| n.get()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: FootprintArgs,
    }

    fn parse(args: &[&str]) -> Result<FootprintArgs, clap::Error> {
        let mut all = vec!["bench"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).map(|c| c.args)
    }

    #[test]
    fn defaults_follow_the_seed() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.modes, vec![Mode::InProcess, Mode::Sockets]);
        assert_eq!(a.quotas_mb, vec![64, 2048]);
        assert_eq!(a.value_bytes, 524);
        a.validate().unwrap();
    }

    #[test]
    fn bad_values_are_refused_and_quick_shrinks() {
        for bad in [
            &["--quotas-mb", "8"][..],
            &["--modes", "rdma"],
            &["--items", "0"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should be refused");
        }
        let q = parse(&["--quick"]).unwrap().effective();
        assert_eq!((q.items, q.duration_s, q.runs), (10_000, 1, 1));
    }
}
