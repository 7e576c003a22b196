//! The Redis peer of `bench replication`: a primary and one replica (`replicaof`), each its
//! own `redis-server` process on a free loopback port with its own directory, configured as in
//! peer-baselines.md (`save ""`; AOF mode adds `appendonly yes`, `appendfsync everysec` on
//! both). Redis comes from Debian: `apt install redis-server`.

use clap::ValueEnum;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::error::BenchError;
use crate::harness::process::{free_port, ChildProcess};
use crate::harness::resp::{info_u64, RespConn, RespError};

const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Why the Redis pair did not start, answer or stop.
#[derive(Debug, thiserror::Error)]
pub enum RedisError {
    /// A free port, the `redis-server` processes, or stopping them.
    #[error(transparent)]
    Process(#[from] BenchError),
    #[error(transparent)]
    Resp(#[from] RespError),
    #[error(
        "the Redis replica did not link to its primary within {waited:?}; see {}",
        log.display()
    )]
    NotLinked { waited: Duration, log: PathBuf },
    #[error("INFO replication lacks master_repl_offset")]
    NoPrimaryOffset,
    #[error("the replica's INFO replication lacks slave_repl_offset")]
    NoReplicaOffset,
    #[error("creating {}", dir.display())]
    CreateDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("making {} absolute", dir.display())]
    Absolute {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("writing {}", path.display())]
    Config {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "--vs redis needs redis-server on PATH (Debian: `sudo apt install redis-server`; \
         peer-baselines.md used 7.0.15)"
    )]
    NotInstalled,
}

/// How the Redis peer persists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RedisPersistence {
    /// `appendonly no`, no snapshots: memory only.
    None,
    /// `appendonly yes`, `appendfsync everysec` on primary and replica.
    Aof,
}

pub struct RedisPair {
    /// Both servers' directories (config, log, AOF) are under this one.
    pub dir: PathBuf,
    pub primary: SocketAddr,
    pub replica: SocketAddr,
    primary_proc: ChildProcess,
    replica_proc: ChildProcess,
}

impl RedisPair {
    /// Starts both servers under `dir` and waits until the replica's link is up.
    pub async fn start(
        binary: &Path,
        dir: &Path,
        persistence: RedisPersistence,
    ) -> Result<RedisPair, RedisError> {
        let primary = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let replica = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let mut primary_proc = spawn(binary, &dir.join("primary"), primary, None, persistence)?;
        primary_proc.wait_for_port(primary, START_TIMEOUT).await?;
        let mut replica_proc = spawn(
            binary,
            &dir.join("replica"),
            replica,
            Some(primary),
            persistence,
        )?;
        replica_proc.wait_for_port(replica, START_TIMEOUT).await?;
        let pair = RedisPair {
            dir: dir.to_path_buf(),
            primary,
            replica,
            primary_proc,
            replica_proc,
        };
        pair.wait_linked().await?;
        Ok(pair)
    }

    async fn wait_linked(&self) -> Result<(), RedisError> {
        let deadline = Instant::now() + START_TIMEOUT;
        let mut conn = RespConn::connect(self.replica).await?;
        loop {
            let info = conn.info("replication").await?;
            if info
                .iter()
                .any(|(k, v)| k == "master_link_status" && v == "up")
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(RedisError::NotLinked {
                    waited: START_TIMEOUT,
                    log: self.replica_proc.log().to_path_buf(),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `master_repl_offset` on the primary.
    pub async fn primary_offset(conn: &mut RespConn) -> Result<u64, RedisError> {
        let info = conn.info("replication").await?;
        info_u64(&info, "master_repl_offset").ok_or(RedisError::NoPrimaryOffset)
    }

    /// The offset the replica has applied, from its own INFO.
    pub async fn replica_offset(conn: &mut RespConn) -> Result<u64, RedisError> {
        let info = conn.info("replication").await?;
        info_u64(&info, "slave_repl_offset").ok_or(RedisError::NoReplicaOffset)
    }

    /// SET calls the primary has executed (INFO commandstats).
    pub async fn set_calls(conn: &mut RespConn) -> Result<u64, RedisError> {
        let info = conn.info("commandstats").await?;
        let line = info
            .iter()
            .find(|(k, _)| k == "cmdstat_set")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        Ok(line
            .split(',')
            .find_map(|kv| kv.strip_prefix("calls="))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0))
    }

    pub fn pids(&self) -> Vec<u32> {
        [self.primary_proc.pid(), self.replica_proc.pid()]
            .into_iter()
            .flatten()
            .collect()
    }

    pub async fn stop(self) -> Result<(), RedisError> {
        self.replica_proc.stop().await?;
        self.primary_proc.stop().await?;
        Ok(())
    }
}

fn spawn(
    binary: &Path,
    dir: &Path,
    addr: SocketAddr,
    primary: Option<SocketAddr>,
    persistence: RedisPersistence,
) -> Result<ChildProcess, RedisError> {
    std::fs::create_dir_all(dir).map_err(|source| RedisError::CreateDir {
        dir: dir.to_path_buf(),
        source,
    })?;
    // Redis changes into `dir` before opening its log: every path it is given is absolute.
    let dir = &std::fs::canonicalize(dir).map_err(|source| RedisError::Absolute {
        dir: dir.to_path_buf(),
        source,
    })?;
    let conf = dir.join("redis.conf");
    std::fs::write(&conf, config(dir, addr, primary, persistence)).map_err(|source| {
        RedisError::Config {
            path: conf.clone(),
            source,
        }
    })?;
    let mut cmd = Command::new(binary);
    cmd.arg(&conf);
    let what = if primary.is_some() {
        "redis replica"
    } else {
        "redis primary"
    };
    Ok(ChildProcess::spawn(what, cmd, &dir.join("stdout.log"))?)
}

fn config(
    dir: &Path,
    addr: SocketAddr,
    primary: Option<SocketAddr>,
    persistence: RedisPersistence,
) -> String {
    let mut c = format!(
        "bind {ip}\nport {port}\nprotected-mode yes\ndaemonize no\ndir {dir}\n\
         logfile {log}\nsave \"\"\nmaxmemory 0\n",
        ip = addr.ip(),
        port = addr.port(),
        dir = dir.display(),
        log = dir.join("redis.log").display(),
    );
    c.push_str(match persistence {
        RedisPersistence::None => "appendonly no\n",
        RedisPersistence::Aof => "appendonly yes\nappendfsync everysec\n",
    });
    if let Some(p) = primary {
        c.push_str(&format!("replicaof {} {}\n", p.ip(), p.port()));
    }
    c
}

/// `redis-server` from PATH, or a clear error saying how to install it.
pub fn find_redis_server() -> Result<PathBuf, RedisError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("redis-server"))
        .find(|p| p.is_file())
        .ok_or(RedisError::NotInstalled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_config_points_at_the_primary_and_aof_is_everysec() {
        let p = SocketAddr::from(([127, 0, 0, 1], 6400));
        let r = SocketAddr::from(([127, 0, 0, 1], 6401));
        let c = config(Path::new("/tmp/x"), r, Some(p), RedisPersistence::Aof);
        assert!(c.contains("port 6401\n"));
        assert!(c.contains("replicaof 127.0.0.1 6400\n"));
        assert!(c.contains("appendonly yes\nappendfsync everysec\n"));
        assert!(c.contains("save \"\"\n"));
        let c = config(Path::new("/tmp/x"), p, None, RedisPersistence::None);
        assert!(c.contains("appendonly no\n") && !c.contains("replicaof"));
    }
}
