//! The clusters `bench clients` and `bench parallel` start (one per case or node count), or
//! the existing one they use instead.

use clap::Args;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

use crate::harness::local_cluster::ClusterSpec;
use crate::harness::login_args::BenchLogin;
use crate::scenarios::kv::args::BucketTypeArg;

#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub struct ClusterArgs {
    /// Run against an existing Sluice cluster (KV ports, loopback only) instead of starting
    /// one per case or node count; the scenario's node counts are then only labels.
    #[arg(long, value_name = "HOST:PORT", value_delimiter = ',')]
    pub connect: Vec<String>,

    /// Replicas of the bucket of each started cluster (capped at nodes − 1).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=3))]
    pub replicas: u8,

    /// First port of the started clusters (each node takes 10 from here on).
    #[arg(long, default_value_t = 13300)]
    pub base_port: u16,

    /// Where the started clusters keep their data, one subdirectory per cluster (default: a
    /// temporary directory each, removed afterwards).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,

    /// Bucket memory quota per node of the started clusters.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    pub memory_quota_mb: u64,

    /// vbuckets of the started clusters.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub vbuckets: u16,
}

impl ClusterArgs {
    /// The cluster of `nodes` nodes, its data (with --data-dir) under `subdir`.
    pub fn spec<'a>(
        &'a self,
        nodes: u16,
        subdir: &str,
        login: &'a BenchLogin,
        scenario: &'static str,
    ) -> ClusterSpec<'a> {
        assert!(nodes >= 1, "a cluster has a node");
        ClusterSpec {
            nodes,
            replicas: self
                .replicas
                .min(u8::try_from(nodes - 1).unwrap_or(u8::MAX)),
            base_port: self.base_port,
            data_dir: self.data_dir.as_ref().map(|d| d.join(subdir)),
            memory_quota_mb: self.memory_quota_mb,
            vbuckets: self.vbuckets,
            bucket_type: BucketTypeArg::Couchbase,
            login,
            scenario,
        }
    }
}
