//! Child processes the bench starts (its own Sluice server, memcached): spawn with output to a
//! log file, wait until the port accepts connections, stop with SIGTERM (SIGKILL only if it
//! does not exit in time). Dropping a running child stops it too, so an error mid-run leaves
//! nothing behind.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::BenchError;

/// How long a child gets to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(30);

pub struct ChildProcess {
    what: &'static str,
    child: Option<Child>,
    log: PathBuf,
}

impl ChildProcess {
    /// Starts `cmd` with stdout and stderr appended to `log`.
    pub fn spawn(what: &'static str, mut cmd: Command, log: &Path) -> Result<Self, BenchError> {
        let out = std::fs::File::create(log)?;
        let err = out.try_clone()?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|source| BenchError::Spawn { what, source })?;
        Ok(ChildProcess {
            what,
            child: Some(child),
            log: log.to_path_buf(),
        })
    }

    pub fn log(&self) -> &Path {
        &self.log
    }

    /// The child's pid while the bench holds it (it is never reaped before `stop`).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// An error if the child has already exited.
    pub fn check_running(&mut self) -> Result<(), BenchError> {
        let Some(child) = self.child.as_mut() else {
            return Ok(());
        };
        match child.try_wait()? {
            None => Ok(()),
            Some(status) => Err(BenchError::Exited {
                what: self.what,
                status,
                log: self.log.clone(),
            }),
        }
    }

    /// Waits until `addr` accepts TCP connections.
    pub async fn wait_for_port(
        &mut self,
        addr: SocketAddr,
        timeout: Duration,
    ) -> Result<(), BenchError> {
        let deadline = Instant::now() + timeout;
        loop {
            self.check_running()?;
            if tokio::net::TcpStream::connect(addr).await.is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(self.not_ready(timeout));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn not_ready(&self, waited: Duration) -> BenchError {
        BenchError::NotReady {
            what: self.what,
            waited,
            log: self.log.clone(),
        }
    }

    /// SIGTERM, then wait (off the async threads) for the exit.
    pub async fn stop(mut self) -> Result<(), BenchError> {
        if let Some(child) = self.child.take() {
            tokio::task::spawn_blocking(move || terminate(child))
                .await
                .map_err(|e| BenchError::Io(std::io::Error::other(e)))??;
        }
        Ok(())
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            let _ = terminate(child);
        }
    }
}

fn terminate(mut child: Child) -> Result<(), BenchError> {
    if child.try_wait()?.is_some() {
        return Ok(());
    }
    // The pid is our own child's, not yet reaped, so it cannot name another process.
    let pid = Pid::from_raw(i32::try_from(child.id()).expect("pids fit an i32"));
    let _ = kill(pid, Signal::SIGTERM);
    let deadline = Instant::now() + STOP_GRACE;
    while Instant::now() < deadline {
        if child.try_wait()?.is_some() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill()?;
    child.wait()?;
    Ok(())
}

/// A loopback port that was free a moment ago (the usual small race is accepted).
pub fn free_port() -> Result<u16, BenchError> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Resolves `addr` and insists on loopback: the bench generates heavy load and must never
/// point it at another machine by mistake.
pub fn loopback_addr(addr: &str) -> Result<SocketAddr, BenchError> {
    let resolved = addr
        .to_socket_addrs()
        .map_err(|source| BenchError::Resolve {
            addr: addr.to_string(),
            source,
        })?
        .next()
        .ok_or_else(|| BenchError::Resolve {
            addr: addr.to_string(),
            source: std::io::Error::other("no address"),
        })?;
    if resolved.ip().is_loopback() {
        Ok(resolved)
    } else {
        Err(BenchError::NotLoopback {
            addr: addr.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_targets_are_accepted() {
        assert!(loopback_addr("127.0.0.1:11210").is_ok());
        assert!(loopback_addr("[::1]:11210").is_ok());
        assert!(matches!(
            loopback_addr("10.1.2.3:11210"),
            Err(BenchError::NotLoopback { .. })
        ));
        assert!(loopback_addr("no-port").is_err());
    }
}
