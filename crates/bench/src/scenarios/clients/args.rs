//! `sluice bench clients` options: seed 002's JMeter plan. N users, each a fresh client that
//! connects and makes one request, started evenly over a ramp-up time, against a local cluster
//! of M nodes; a write phase, then a read phase over the same keys.

use clap::Args;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::str::FromStr;

use crate::harness::cluster_args::ClusterArgs;
use crate::harness::local_cluster::ClusterSpec;
use crate::harness::login_args::BenchLogin;
use crate::scenarios::kv::args::parse_value_bytes;

/// One cell of the matrix: users × servers × ramp-up.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClientCase {
    pub users: u32,
    pub servers: u16,
    pub ramp_s: f64,
}

impl ClientCase {
    pub fn label(&self) -> String {
        format!(
            "{} users, {} server{}, {} s ramp-up",
            self.users,
            self.servers,
            if self.servers == 1 { "" } else { "s" },
            self.ramp_s
        )
    }
}

impl FromStr for ClientCase {
    type Err = String;

    /// `USERSxSERVERSxRAMP_S`, e.g. `500x5x10`.
    fn from_str(s: &str) -> Result<ClientCase, String> {
        let bad = || format!("`{s}` is not USERSxSERVERSxRAMP_S (for example 500x5x10)");
        let parts: Vec<&str> = s.split('x').collect();
        let [users, servers, ramp] = parts.as_slice() else {
            return Err(bad());
        };
        let users: u32 = users.parse().map_err(|_| bad())?;
        let servers: u16 = servers.parse().map_err(|_| bad())?;
        let ramp_s: f64 = ramp.parse().map_err(|_| bad())?;
        if !(1..=10_000).contains(&users) {
            return Err(format!("{s}: users must be 1 to 10000"));
        }
        if !(1..=16).contains(&servers) {
            return Err(format!("{s}: servers must be 1 to 16"));
        }
        if !(0.0..=3600.0).contains(&ramp_s) {
            return Err(format!("{s}: the ramp-up must be 0 to 3600 s"));
        }
        Ok(ClientCase {
            users,
            servers,
            ramp_s,
        })
    }
}

/// Options that cannot run together, found before anything starts.
#[derive(Debug, thiserror::Error)]
pub enum ClientsArgsError {
    #[error("--cases lists no case")]
    NoCases,
}

#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub struct ClientsArgs {
    /// The matrix, one case per entry: USERSxSERVERSxRAMP_S. The defaults are seed 002's
    /// three test cases.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "100x1x4,500x5x10,1000x10x20"
    )]
    pub cases: Vec<ClientCase>,

    #[command(flatten)]
    #[serde(flatten)]
    pub cluster: ClusterArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub login: BenchLogin,

    /// Value size of every write.
    #[arg(long, default_value_t = 1024, value_parser = parse_value_bytes)]
    pub value_bytes: usize,

    /// Runs of each case (write and read phase each); each figure is the median over runs.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub runs: u32,

    /// A short run for smoke tests: cases 50x1x1 and 100x3x2 on 64 vbuckets (these replace
    /// the options of the same names).
    #[arg(long)]
    pub quick: bool,

    /// Directory for report.md and results.json (default bench-out/clients).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl ClientsArgs {
    /// The options after `--quick`.
    pub fn effective(&self) -> ClientsArgs {
        let mut a = self.clone();
        if a.quick {
            a.cases = vec!["50x1x1".parse().unwrap(), "100x3x2".parse().unwrap()];
            a.cluster.vbuckets = 64;
            a.runs = 1;
        }
        a
    }

    pub fn validate(&self) -> Result<(), ClientsArgsError> {
        if self.cases.is_empty() {
            return Err(ClientsArgsError::NoCases);
        }
        Ok(())
    }

    /// The cluster started for case number `index` (0-based).
    pub fn cluster_spec(&self, index: usize, case: &ClientCase) -> ClusterSpec<'_> {
        let subdir = format!("case{}", index + 1);
        self.cluster
            .spec(case.servers, &subdir, &self.login, "clients")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: ClientsArgs,
    }

    fn parse(args: &[&str]) -> Result<ClientsArgs, clap::Error> {
        let mut all = vec!["bench"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).map(|c| c.args)
    }

    #[test]
    fn defaults_are_the_seeds_three_cases() {
        let a = parse(&[]).unwrap();
        let cases: Vec<(u32, u16, f64)> = a
            .cases
            .iter()
            .map(|c| (c.users, c.servers, c.ramp_s))
            .collect();
        assert_eq!(cases, vec![(100, 1, 4.0), (500, 5, 10.0), (1000, 10, 20.0)]);
        a.validate().unwrap();
    }

    #[test]
    fn cases_parse_and_bad_ones_are_refused() {
        let a = parse(&["--cases", "10x2x0.5"]).unwrap();
        assert_eq!(
            a.cases,
            vec![ClientCase {
                users: 10,
                servers: 2,
                ramp_s: 0.5
            }]
        );
        for bad in [
            "10x2", "0x1x1", "10x0x1", "10x17x1", "10x1x-1", "axbxc", "1x1x1x1",
        ] {
            assert!(parse(&["--cases", bad]).is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn replicas_never_exceed_the_other_servers() {
        let a = parse(&["--replicas", "2"]).unwrap();
        let one = "5x1x1".parse().unwrap();
        let three = "5x3x1".parse().unwrap();
        let five = "5x5x1".parse().unwrap();
        assert_eq!(a.cluster_spec(0, &one).replicas, 0);
        assert_eq!(a.cluster_spec(1, &three).replicas, 2);
        assert_eq!(a.cluster_spec(2, &five).replicas, 2);
    }

    #[test]
    fn quick_replaces_the_matrix() {
        let a = parse(&["--quick", "--runs", "5"]).unwrap().effective();
        assert_eq!(a.cases.len(), 2);
        assert_eq!((a.cluster.vbuckets, a.runs), (64, 1));
    }
}
