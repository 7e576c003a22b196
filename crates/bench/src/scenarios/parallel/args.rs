//! `sluice bench parallel` options: seed 004's parallel-build test. Every client does the same
//! fixed work, shaped like building a source tree (unpack, compile, link, clean: creates,
//! reads, updates and deletes of many small documents); the matrix is clients × nodes.

use clap::Args;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

use crate::harness::cluster_args::ClusterArgs;
use crate::harness::local_cluster::ClusterSpec;
use crate::harness::login_args::BenchLogin;

/// Options that cannot run together, found before anything starts.
#[derive(Debug, thiserror::Error)]
pub enum ParallelArgsError {
    #[error("--clients lists no count")]
    NoClients,
    #[error("--nodes lists no count")]
    NoNodes,
}

#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub struct ParallelArgs {
    /// Client counts of the matrix (each client one smart client, one request at a time).
    #[arg(long, value_delimiter = ',', default_value = "8,16",
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub clients: Vec<u32>,

    /// Node counts of the matrix; a fresh cluster per count.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3",
          value_parser = clap::value_parser!(u16).range(1..=16))]
    pub nodes: Vec<u16>,

    /// Source files of each client's tree (16 per directory).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub files: u32,

    /// Size of every document (inode-like JSON metadata, padded).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(96..=65536))]
    pub doc_bytes: u32,

    #[command(flatten)]
    #[serde(flatten)]
    pub cluster: ClusterArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub login: BenchLogin,

    /// Runs of each cell; each figure is the median over runs.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub runs: u32,

    /// A short run for smoke tests: 4 and 8 clients × 1 and 2 nodes, 500 files, 64
    /// vbuckets, 1 run (these replace the options of the same names).
    #[arg(long)]
    pub quick: bool,

    /// Directory for report.md and results.json (default bench-out/parallel).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl ParallelArgs {
    /// The options after `--quick`.
    pub fn effective(&self) -> ParallelArgs {
        let mut a = self.clone();
        if a.quick {
            a.clients = vec![4, 8];
            a.nodes = vec![1, 2];
            a.files = 500;
            a.cluster.vbuckets = 64;
            a.runs = 1;
        }
        if !a.cluster.connect.is_empty() {
            // One existing cluster: one column of the matrix, labelled by its map.
            a.nodes = vec![0];
        }
        a
    }

    pub fn validate(&self) -> Result<(), ParallelArgsError> {
        if self.clients.is_empty() {
            return Err(ParallelArgsError::NoClients);
        }
        if self.nodes.is_empty() {
            return Err(ParallelArgsError::NoNodes);
        }
        Ok(())
    }

    /// The cluster started for `nodes` nodes.
    pub fn cluster_spec(&self, nodes: u16) -> ClusterSpec<'_> {
        let subdir = format!("{nodes}-nodes");
        self.cluster.spec(nodes, &subdir, &self.login, "parallel")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: ParallelArgs,
    }

    fn parse(args: &[&str]) -> Result<ParallelArgs, clap::Error> {
        let mut all = vec!["bench"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).map(|c| c.args)
    }

    #[test]
    fn defaults_are_the_seeds_matrix() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.clients, vec![8, 16]);
        assert_eq!(a.nodes, vec![1, 2, 3]);
        a.validate().unwrap();
        assert_eq!(a.cluster_spec(1).replicas, 0);
        assert_eq!(a.cluster_spec(3).replicas, 1);
    }

    #[test]
    fn bad_values_are_refused_and_quick_shrinks() {
        for bad in [
            &["--clients", "0"][..],
            &["--nodes", "17"],
            &["--doc-bytes", "10"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should be refused");
        }
        let q = parse(&["--quick"]).unwrap().effective();
        assert_eq!((q.clients.len(), q.nodes.len(), q.files), (2, 2, 500));
        let c = parse(&["--connect", "127.0.0.1:11210"])
            .unwrap()
            .effective();
        assert_eq!(c.nodes, vec![0]);
    }
}
