//! The local cluster of the cluster scenarios (`replication`, `clients`, `parallel`):
//! `sluice cluster up` run as a child process (the product's own first command), ready once it
//! has written `DIR/cluster.json`. Stopping it (SIGTERM) stops every node cleanly.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::error::BenchError;
use crate::harness::login_args::BenchLogin;
use crate::harness::process::ChildProcess;
use crate::scenarios::kv::args::BucketTypeArg;

/// Forming a cluster includes one Raft election and one placement per node.
const UP_TIMEOUT: Duration = Duration::from_secs(120);

/// Why the local cluster did not start.
#[derive(Debug, thiserror::Error)]
pub enum ClusterUpError {
    #[error("{} is not empty; give the bench a fresh --data-dir", dir.display())]
    DirNotEmpty { dir: PathBuf },
    #[error("making the cluster's temporary directory")]
    TempDir(#[source] std::io::Error),
    #[error("locating sluice")]
    LocateExe(#[source] std::io::Error),
    /// Starting, watching or stopping the `sluice cluster up` process.
    #[error(transparent)]
    Process(#[from] BenchError),
    #[error("the cluster did not come up within {waited:?}; see {}", log.display())]
    NotUp { waited: Duration, log: PathBuf },
    #[error("cluster.json lists no nodes")]
    NoNodes,
    #[error("a node of cluster.json has no {field}")]
    NoPort { field: &'static str },
}

/// What to start.
#[derive(Debug, Clone)]
pub struct ClusterSpec<'a> {
    pub nodes: u16,
    pub replicas: u8,
    /// Each node takes 10 ports from here on.
    pub base_port: u16,
    /// None: a temporary directory, removed when the cluster is dropped. A given directory
    /// must be empty or missing: a cluster found there would be restarted, not started.
    pub data_dir: Option<PathBuf>,
    /// Bucket quota per node.
    pub memory_quota_mb: u64,
    pub vbuckets: u16,
    /// The bucket the cluster creates: couchbase (persisted) or ephemeral (memory only).
    pub bucket_type: BucketTypeArg,
    pub login: &'a BenchLogin,
    /// Names the temporary directory (`sluice-bench-{scenario}-…`).
    pub scenario: &'static str,
}

pub struct LocalCluster {
    proc: ChildProcess,
    /// KV `host:port` of every node.
    pub seeds: Vec<String>,
    /// Admin (REST) `host:port` of every node.
    pub admins: Vec<String>,
    /// Every node's process id.
    pub pids: Vec<u32>,
    /// Data directory; removed on drop when the bench made it.
    _temp: Option<tempfile::TempDir>,
}

impl LocalCluster {
    /// Starts the cluster; its log goes to `log`.
    pub async fn start(spec: ClusterSpec<'_>, log: &Path) -> Result<LocalCluster, ClusterUpError> {
        let (dir, temp) = match &spec.data_dir {
            Some(d) => {
                let used = std::fs::read_dir(d).is_ok_and(|mut e| e.next().is_some());
                if used {
                    return Err(ClusterUpError::DirNotEmpty { dir: d.clone() });
                }
                (d.clone(), None)
            }
            None => {
                let t = tempfile::Builder::new()
                    .prefix(&format!("sluice-bench-{}-", spec.scenario))
                    .tempdir()
                    .map_err(ClusterUpError::TempDir)?;
                (t.path().to_path_buf(), Some(t))
            }
        };
        let json = dir.join("cluster.json");
        // A stale file from an earlier run would look ready at once.
        let _ = std::fs::remove_file(&json);
        let mut cmd = Command::new(std::env::current_exe().map_err(ClusterUpError::LocateExe)?);
        cmd.args(["cluster", "up"])
            .args(["--nodes", &spec.nodes.to_string()])
            .args(["--replicas", &spec.replicas.to_string()])
            .arg("--data-dir")
            .arg(&dir)
            .args(["--base-port", &spec.base_port.to_string()])
            .args(["--memory-quota-mb", &spec.memory_quota_mb.to_string()])
            .args(["--vbuckets", &spec.vbuckets.to_string()])
            .args(["--bucket-type", spec.bucket_type.as_str()])
            // A benchmark must not fail a busy node over.
            .args(["--auto-failover-timeout", "0"])
            // The nodes create this user and bucket; the bench logs in to them.
            .env("SLUICE_USERNAME", &spec.login.username)
            .env("SLUICE_PASSWORD", &spec.login.password)
            .env("SLUICE_BUCKET", &spec.login.bucket);
        let mut proc = ChildProcess::spawn("sluice cluster up", cmd, log)?;
        let doc = wait_for_cluster_json(&mut proc, &json).await?;
        let seeds = ports_of(&doc, "kv_port")?;
        let admins = ports_of(&doc, "admin_port")?;
        let pids = doc["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| n["pid"].as_u64().and_then(|p| u32::try_from(p).ok()))
            .collect();
        Ok(LocalCluster {
            proc,
            seeds,
            admins,
            pids,
            _temp: temp,
        })
    }

    pub async fn stop(self) -> Result<(), ClusterUpError> {
        self.proc.stop().await?;
        Ok(())
    }
}

async fn wait_for_cluster_json(
    proc: &mut ChildProcess,
    json: &PathBuf,
) -> Result<serde_json::Value, ClusterUpError> {
    let deadline = Instant::now() + UP_TIMEOUT;
    loop {
        proc.check_running()?;
        if let Ok(text) = std::fs::read(json) {
            if let Ok(doc) = serde_json::from_slice::<serde_json::Value>(&text) {
                return Ok(doc);
            }
        }
        if Instant::now() >= deadline {
            return Err(ClusterUpError::NotUp {
                waited: UP_TIMEOUT,
                log: proc.log().to_path_buf(),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The seeds in the order client `i` tries them: starting at seed `i mod n`, so that many
/// clients bootstrapping at once spread their handshakes over the nodes.
pub fn seeds_from(seeds: &[String], i: usize) -> Vec<String> {
    let n = seeds.len();
    (0..n).map(|k| seeds[(i + k) % n].clone()).collect()
}

/// Every node's loopback address on the port named `field` (`kv_port`, `admin_port`) of a
/// cluster.json.
fn ports_of(doc: &serde_json::Value, field: &'static str) -> Result<Vec<String>, ClusterUpError> {
    let nodes = doc["nodes"].as_array().ok_or(ClusterUpError::NoNodes)?;
    nodes
        .iter()
        .map(|n| {
            n[field]
                .as_u64()
                .map(|p| format!("127.0.0.1:{p}"))
                .ok_or(ClusterUpError::NoPort { field })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_start_from_the_seeds_in_turn() {
        let seeds: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        assert_eq!(seeds_from(&seeds, 0), vec!["a", "b", "c"]);
        assert_eq!(seeds_from(&seeds, 1), vec!["b", "c", "a"]);
        assert_eq!(seeds_from(&seeds, 5), vec!["c", "a", "b"]);
    }

    #[test]
    fn seeds_come_from_the_kv_ports() {
        let doc = serde_json::json!({"nodes": [
            {"kv_port": 13100, "admin_port": 13101},
            {"kv_port": 13110, "admin_port": 13111}
        ]});
        assert_eq!(
            ports_of(&doc, "kv_port").unwrap(),
            vec!["127.0.0.1:13100", "127.0.0.1:13110"]
        );
        assert_eq!(
            ports_of(&doc, "admin_port").unwrap(),
            vec!["127.0.0.1:13101", "127.0.0.1:13111"]
        );
        assert!(ports_of(&serde_json::json!({"nodes": [{}]}), "kv_port").is_err());
        assert!(ports_of(&serde_json::json!({}), "kv_port").is_err());
    }
}
