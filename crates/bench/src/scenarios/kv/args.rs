//! `sluice bench kv` options. Units are in the option names; every default matches the
//! memcached baseline in peer-baselines.md (memaslap: 50 connections, 32 B keys, 1 KiB values,
//! 90 % get), so a bare run is comparable with it.

use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};

use crate::harness::login_args::BenchLogin;
use std::path::PathBuf;

/// Largest value the bench sends: the server's default maximum document size.
pub const VALUE_BYTES_MAX: usize = 20 * 1024 * 1024;

#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub struct KvArgs {
    /// Benchmark an existing Sluice KV port (loopback only) instead of starting a server.
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "target_memcached")]
    pub connect: Option<String>,

    /// Benchmark an existing memcached (binary protocol, no auth, loopback only) instead of
    /// Sluice.
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "vs")]
    pub target_memcached: Option<String>,

    #[command(flatten)]
    #[serde(flatten)]
    pub login: BenchLogin,

    /// Bucket type for the server the bench starts (ignored with --connect).
    #[arg(long, value_enum, default_value_t = BucketTypeArg::Couchbase)]
    pub bucket_type: BucketTypeArg,

    /// Bucket memory quota for the started server and for --in-process buckets.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
    pub memory_quota_mb: u64,

    /// vbuckets of the started server and of --in-process buckets.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u16).range(1..))]
    pub vbuckets: u16,

    /// TCP connections, each its own task.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub connections: u32,

    /// Value size of every set.
    #[arg(long, default_value_t = 1024, value_parser = parse_value_bytes)]
    pub value_bytes: usize,

    /// Size of the key space; keys are 32 bytes, like memaslap's. Prefilled before timing.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub keys: u64,

    /// What reads and writes are: `binary` (GET/SET of an opaque value, memaslap's load),
    /// `json` (GET/SET of a JSON document of --value-bytes), `subdoc` (the same document
    /// through sub-document commands: a lookup of one field, a counter increment of
    /// another). Compare `subdoc` with `json` for what sub-document saves.
    #[arg(long, value_enum, default_value_t = MixArg::Binary)]
    #[serde(default)]
    pub mix: MixArg,

    /// Spread the keys over this many collections (`bench.c0`…, made before the prefill;
    /// key i goes to collection i mod N), with collections negotiated and every key carrying
    /// its collection's prefix. 0: the default collection, without collections negotiated.
    /// Only on a Sluice the bench starts.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1000))]
    #[serde(default)]
    pub collections: u32,

    /// Share of operations that are gets (the rest are sets), 0.0 to 1.0.
    #[arg(long, default_value_t = 0.9, value_parser = parse_ratio)]
    pub get_ratio: f64,

    /// Target total rate. 0 = as fast as possible (closed loop: a connection sends its next
    /// request when an answer arrives). Above 0 = open loop: requests follow a fixed
    /// schedule and latency counts from the scheduled send time, so a stalled server is not
    /// hidden by the generator slowing down (no coordinated omission).
    #[arg(long = "rate", value_name = "OPS_PER_S", default_value_t = 0.0, value_parser = parse_rate)]
    pub rate_ops_per_s: f64,

    /// Requests in flight per connection.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub pipeline: u32,

    /// Length of each timed run.
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub duration_s: u64,

    /// Load before each timed run that is not measured (connections warm, caches hot).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(0..=3_600))]
    pub warmup_s: u64,

    /// Repeat each run this many times and report the median (targets alternate per run).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: u32,

    /// Also run the identical load against a peer started by the bench, and report
    /// Sluice/peer ratios for throughput and p99.
    #[arg(long, value_enum, value_name = "PEER")]
    pub vs: Option<Peer>,

    /// The memcached binary for --vs memcached.
    #[arg(long, default_value = "memcached", value_name = "PATH")]
    pub memcached_bin: PathBuf,

    /// Every connection over TLS: the bench makes a CA and a certificate for 127.0.0.1,
    /// starts Sluice with its TLS KV port (and memcached with `-Z`) and connects there.
    /// Only with servers the bench starts.
    #[arg(long, conflicts_with_all = ["connect", "target_memcached", "in_process"])]
    #[serde(default)]
    pub tls: bool,

    /// No sockets: call the engine directly from --threads threads, on an ephemeral and a
    /// couchbase bucket (FjallStore in a temporary directory); reports ops/s.
    #[arg(long, conflicts_with_all = ["connect", "target_memcached", "vs"])]
    pub in_process: bool,

    /// Threads for --in-process (default: one per CPU).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,

    /// Write results.json and report.md here (the table is printed either way).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BucketTypeArg {
    Couchbase,
    Ephemeral,
}

impl BucketTypeArg {
    pub fn as_str(self) -> &'static str {
        match self {
            BucketTypeArg::Couchbase => "couchbase",
            BucketTypeArg::Ephemeral => "ephemeral",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MixArg {
    #[default]
    Binary,
    Json,
    Subdoc,
}

impl MixArg {
    pub fn mix(self) -> crate::load::workload::Mix {
        use crate::load::workload::Mix;
        match self {
            MixArg::Binary => Mix::Binary,
            MixArg::Json => Mix::Json,
            MixArg::Subdoc => Mix::Subdoc,
        }
    }

    /// How the report names the reads and writes.
    pub fn label(self) -> &'static str {
        match self {
            MixArg::Binary => "binary get/set",
            MixArg::Json => "JSON get/set",
            MixArg::Subdoc => "sub-document lookup/counter",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Peer {
    Memcached,
}

impl KvArgs {
    /// Open loop when a rate is set.
    pub fn is_open_loop(&self) -> bool {
        self.rate_ops_per_s > 0.0
    }
}

fn parse_ratio(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{v} is not between 0.0 and 1.0"))
    }
}

pub(crate) fn parse_rate(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(format!("{v} is not a rate ≥ 0"))
    }
}

pub(crate) fn parse_value_bytes(s: &str) -> Result<usize, String> {
    let v: usize = s.parse().map_err(|e| format!("{e}"))?;
    if (1..=VALUE_BYTES_MAX).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{v} is not between 1 and {VALUE_BYTES_MAX}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        kv: KvArgs,
    }

    fn parse(args: &[&str]) -> Result<KvArgs, clap::Error> {
        let argv = std::iter::once("bench").chain(args.iter().copied());
        Cli::try_parse_from(argv).map(|c| c.kv)
    }

    #[test]
    fn defaults_match_the_memcached_baseline() {
        let a = parse(&[]).unwrap();
        assert_eq!((a.connections, a.value_bytes, a.keys), (50, 1024, 100_000));
        assert_eq!((a.get_ratio, a.pipeline, a.runs), (0.9, 1, 1));
        assert_eq!(
            (a.login.username.as_str(), a.login.password.as_str()),
            ("Administrator", "password")
        );
        assert_eq!(a.bucket_type, BucketTypeArg::Couchbase);
        assert!(!a.is_open_loop() && a.vs.is_none() && !a.in_process);
    }

    #[test]
    fn parses_every_option() {
        let a = parse(&[
            "--connect",
            "127.0.0.1:11210",
            "--bucket-type",
            "ephemeral",
            "--connections",
            "8",
            "--value-bytes",
            "4096",
            "--keys",
            "1000",
            "--get-ratio",
            "0.5",
            "--rate",
            "20000",
            "--pipeline",
            "4",
            "--duration-s",
            "3",
            "--warmup-s",
            "0",
            "--runs",
            "5",
            "--vs",
            "memcached",
            "--out",
            "/tmp/x",
        ])
        .unwrap();
        assert_eq!(a.connect.as_deref(), Some("127.0.0.1:11210"));
        assert_eq!(a.bucket_type, BucketTypeArg::Ephemeral);
        assert_eq!((a.connections, a.value_bytes, a.keys), (8, 4096, 1000));
        assert_eq!(
            (a.get_ratio, a.rate_ops_per_s, a.pipeline),
            (0.5, 20000.0, 4)
        );
        assert_eq!((a.duration_s, a.warmup_s, a.runs), (3, 0, 5));
        assert_eq!(a.vs, Some(Peer::Memcached));
        assert!(a.is_open_loop());
    }

    #[test]
    fn rejects_out_of_range_values() {
        for bad in [
            &["--get-ratio", "1.5"][..],
            &["--get-ratio", "-0.1"],
            &["--rate", "-1"],
            &["--connections", "0"],
            &["--pipeline", "0"],
            &["--value-bytes", "0"],
            &["--keys", "0"],
            &["--duration-s", "0"],
            &["--bucket-type", "memcached"],
            &["--vs", "redis"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn rejects_conflicting_modes() {
        assert!(parse(&["--in-process", "--vs", "memcached"]).is_err());
        assert!(parse(&["--in-process", "--connect", "127.0.0.1:1"]).is_err());
        assert!(parse(&["--target-memcached", "127.0.0.1:1", "--vs", "memcached"]).is_err());
        assert!(parse(&[
            "--target-memcached",
            "127.0.0.1:1",
            "--connect",
            "127.0.0.1:2"
        ])
        .is_err());
    }

    #[test]
    fn password_never_reaches_the_json() {
        let a = parse(&["--password", "hunter2"]).unwrap();
        let json = serde_json::to_string(&a).unwrap();
        assert!(!json.contains("hunter2"), "{json}");
    }

    #[test]
    fn mixes() {
        assert_eq!(parse(&[]).unwrap().mix, MixArg::Binary);
        assert_eq!(parse(&["--mix", "subdoc"]).unwrap().mix, MixArg::Subdoc);
        assert_eq!(parse(&["--mix", "json"]).unwrap().mix, MixArg::Json);
        assert!(parse(&["--mix", "xml"]).is_err());
        assert_eq!(parse(&[]).unwrap().collections, 0);
        assert_eq!(parse(&["--collections", "10"]).unwrap().collections, 10);
        assert!(parse(&["--collections", "1001"]).is_err());
    }
}
