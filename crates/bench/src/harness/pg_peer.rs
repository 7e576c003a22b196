//! The PostgreSQL peer of `bench query`: PostgreSQL 15's own `initdb` and `postgres` (not a
//! packaged cluster), in a temporary directory, on a free loopback port. PostgreSQL refuses
//! to run as root, so under root the bench runs both as the `postgres` user (or `nobody`
//! when there is none) and hands it the directory; otherwise as the bench's own user.
//!
//! Settings (everything else as initdb leaves it): `synchronous_commit = off`, so that a
//! write is acknowledged before its WAL is flushed, as a Sluice set is acknowledged before
//! it is persisted; `shared_buffers` as given; a WAL large enough that the load does not
//! checkpoint every few seconds.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tempfile::TempDir;

use crate::error::BenchError;
use crate::harness::process::{free_port, ChildProcess};

const START_TIMEOUT: Duration = Duration::from_secs(60);
/// The database user initdb makes (trust authentication, on loopback only).
pub const PG_USER: &str = "postgres";

/// Why the PostgreSQL peer did not start, answer or stop.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    #[error(
        "{} not found (--pg-bin names PostgreSQL 15's server binaries; Debian: \
         `apt install postgresql-15`, in /usr/lib/postgresql/15/bin)",
        path.display()
    )]
    NoBinary { path: PathBuf },
    #[error("making PostgreSQL's directory")]
    MakeDir(#[source] std::io::Error),
    #[error("handing PostgreSQL its directory")]
    Chown(#[source] std::io::Error),
    /// The port, the `postgres` process, or stopping it.
    #[error(transparent)]
    Process(#[from] BenchError),
    #[error("connecting to PostgreSQL at {addr}")]
    Connect {
        addr: SocketAddr,
        #[source]
        source: tokio_postgres::Error,
    },
    /// Still no session at the deadline: the last attempt's error, and where the log is.
    #[error("see {}", log.display())]
    NotReady {
        log: PathBuf,
        #[source]
        source: Box<PgError>,
    },
    #[error("the postgres pid does not fit a signal's pid")]
    Pid(#[source] std::num::TryFromIntError),
    #[error("creating initdb's log")]
    InitdbLog(#[source] std::io::Error),
    #[error("the initdb thread")]
    InitdbThread(#[source] tokio::task::JoinError),
    #[error("running initdb")]
    RunInitdb(#[source] std::io::Error),
    /// `stderr` is what initdb said on its way out.
    #[error("initdb failed ({status}): {stderr}")]
    InitdbFailed {
        status: std::process::ExitStatus,
        stderr: String,
    },
    #[error("reading /etc/passwd")]
    ReadPasswd(#[source] std::io::Error),
    #[error("running as root, and neither a `postgres` nor a `nobody` user to run PostgreSQL as")]
    NoUser,
}

/// Who the server runs as: uid and gid, or `None` for the bench's own user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunAs {
    pub uid: u32,
    pub gid: u32,
}

pub struct PgServer {
    pub addr: SocketAddr,
    process: ChildProcess,
    /// Data directory, socket and log; removed when the server is stopped.
    dir: TempDir,
}

impl PgServer {
    /// initdb, then `postgres` on a free port; returns once it takes connections.
    pub async fn start(bin: &Path, shared_buffers_mb: u64) -> Result<PgServer, PgError> {
        let initdb = bin.join("initdb");
        let postgres = bin.join("postgres");
        for b in [&initdb, &postgres] {
            if !b.is_file() {
                return Err(PgError::NoBinary { path: b.clone() });
            }
        }
        let run_as = run_as()?;
        let dir = tempfile::Builder::new()
            .prefix("sluice-bench-pg-")
            .tempdir()
            .map_err(PgError::MakeDir)?;
        if let Some(who) = run_as {
            std::os::unix::fs::chown(dir.path(), Some(who.uid), Some(who.gid))
                .map_err(PgError::Chown)?;
        }
        let data = dir.path().join("data");
        let log = dir.path().join("postgres.log");
        init(&initdb, &data, dir.path(), run_as).await?;
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let mut cmd = Command::new(&postgres);
        cmd.current_dir(dir.path())
            .arg("-D")
            .arg(&data)
            .args(settings(addr, dir.path(), shared_buffers_mb));
        as_user(&mut cmd, run_as);
        let mut process = ChildProcess::spawn("postgres", cmd, &log)?;
        process.wait_for_port(addr, START_TIMEOUT).await?;
        let server = PgServer { addr, process, dir };
        server.wait_ready().await?;
        Ok(server)
    }

    /// The connection string of the database initdb made.
    pub fn conn_string(&self) -> String {
        format!(
            "host={} port={} user={PG_USER} dbname=postgres connect_timeout=10",
            self.addr.ip(),
            self.addr.port()
        )
    }

    pub async fn connect(&self) -> Result<tokio_postgres::Client, PgError> {
        let (client, conn) = tokio_postgres::connect(&self.conn_string(), tokio_postgres::NoTls)
            .await
            .map_err(|source| PgError::Connect {
                addr: self.addr,
                source,
            })?;
        // The connection's driver ends when the client is dropped.
        tokio::spawn(conn);
        Ok(client)
    }

    /// The port opens before recovery ends: ready means a session starts.
    async fn wait_ready(&self) -> Result<(), PgError> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            match self.connect().await {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() >= deadline => {
                    return Err(PgError::NotReady {
                        log: self.process.log().to_path_buf(),
                        source: Box::new(e),
                    })
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    pub fn log(&self) -> PathBuf {
        self.process.log().to_path_buf()
    }

    /// Fast shutdown (SIGINT: open sessions are ended, not waited for), then the directory
    /// goes; its log is copied to `save_log` first when given.
    pub async fn stop(self, save_log: Option<&Path>) -> Result<(), PgError> {
        if let Some(pid) = self.process.pid() {
            // Our own child, not reaped before `stop`: the pid names it.
            let pid = i32::try_from(pid).map_err(PgError::Pid)?;
            let _ = kill(Pid::from_raw(pid), Signal::SIGINT);
        }
        let log = self.log();
        self.process.stop().await?;
        if let Some(dest) = save_log {
            let _ = std::fs::copy(&log, dest);
        }
        drop(self.dir);
        Ok(())
    }
}

/// The `postgres` command line's settings.
fn settings(addr: SocketAddr, socket_dir: &Path, shared_buffers_mb: u64) -> Vec<String> {
    let set = |k: &str, v: String| ["-c".to_string(), format!("{k}={v}")];
    [
        set("listen_addresses", addr.ip().to_string()),
        set("port", addr.port().to_string()),
        set("unix_socket_directories", socket_dir.display().to_string()),
        set("shared_buffers", format!("{shared_buffers_mb}MB")),
        set("synchronous_commit", "off".into()),
        set("max_connections", "300".into()),
        set("max_wal_size", "8GB".into()),
        set("checkpoint_timeout", "30min".into()),
        set("logging_collector", "off".into()),
    ]
    .into_iter()
    .flatten()
    .collect()
}

async fn init(
    initdb: &Path,
    data: &Path,
    dir: &Path,
    run_as: Option<RunAs>,
) -> Result<(), PgError> {
    let log = dir.join("initdb.log");
    let mut cmd = Command::new(initdb);
    cmd.current_dir(dir)
        .arg("-D")
        .arg(data)
        .args(["-U", PG_USER, "--auth=trust", "-E", "UTF8", "--locale=C"])
        // No fsync of the fresh cluster: it is thrown away after the run anyway.
        .arg("--no-sync")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).map_err(PgError::InitdbLog)?)
        .stderr(std::fs::File::create(dir.join("initdb.err")).map_err(PgError::InitdbLog)?);
    as_user(&mut cmd, run_as);
    let status = tokio::task::spawn_blocking(move || cmd.status())
        .await
        .map_err(PgError::InitdbThread)?
        .map_err(PgError::RunInitdb)?;
    if !status.success() {
        let err = std::fs::read_to_string(dir.join("initdb.err")).unwrap_or_default();
        return Err(PgError::InitdbFailed {
            status,
            stderr: err.trim().to_string(),
        });
    }
    Ok(())
}

fn as_user(cmd: &mut Command, run_as: Option<RunAs>) {
    if let Some(who) = run_as {
        cmd.uid(who.uid).gid(who.gid);
    }
}

/// `None` unless the bench runs as root; then the `postgres` user, else `nobody`.
fn run_as() -> Result<Option<RunAs>, PgError> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(None);
    }
    let passwd = std::fs::read_to_string("/etc/passwd").map_err(PgError::ReadPasswd)?;
    ["postgres", "nobody"]
        .iter()
        .find_map(|name| user_in(&passwd, name))
        .map(Some)
        .ok_or(PgError::NoUser)
}

/// `name`'s uid and gid in /etc/passwd's text.
fn user_in(passwd: &str, name: &str) -> Option<RunAs> {
    passwd.lines().find_map(|line| {
        let mut f = line.split(':');
        if f.next()? != name {
            return None;
        }
        let _password = f.next()?;
        Some(RunAs {
            uid: f.next()?.parse().ok()?,
            gid: f.next()?.parse().ok()?,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_are_read_from_passwd() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n\
                      postgres:x:101:104:PostgreSQL administrator,,,:/var/lib/postgresql:/bin/bash\n\
                      nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
        assert_eq!(
            user_in(passwd, "postgres"),
            Some(RunAs { uid: 101, gid: 104 })
        );
        assert_eq!(user_in(passwd, "nobody").map(|r| r.uid), Some(65534));
        assert_eq!(user_in(passwd, "post"), None);
    }

    #[test]
    fn the_server_listens_on_loopback_and_acks_before_the_wal_flush() {
        let s = settings(
            SocketAddr::from(([127, 0, 0, 1], 5999)),
            Path::new("/tmp/x"),
            512,
        )
        .join(" ");
        assert!(
            s.contains("-c listen_addresses=127.0.0.1 -c port=5999"),
            "{s}"
        );
        assert!(s.contains("-c synchronous_commit=off"), "{s}");
        assert!(s.contains("-c shared_buffers=512MB"), "{s}");
    }
}
