//! Redis primary + replica as a `bench durability` target: one RESP connection per loop to
//! the primary, writing a plain `SET`, or a `SET` with `WAIT 1 0` behind it on the same
//! connection. The two go out together (one round trip, as a pipelining client would send
//! them) and the write counts as done when WAIT answers that the replica has it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::BenchError;
use crate::harness::redis_peer::{RedisError, RedisPair, RedisPersistence};
use crate::harness::resp::{encode, Reply, RespConn, RespError};
use crate::harness::settle;
use crate::scenarios::durability::closed_loop::Writer;

/// Why the Redis side did not start, connect, settle or stop.
#[derive(Debug, thiserror::Error)]
pub enum RedisSideError {
    /// Starting or stopping the pair.
    #[error(transparent)]
    Pair(#[from] RedisError),
    #[error("connecting loop {i} to the Redis primary")]
    ConnectLoop {
        i: u32,
        #[source]
        source: RespError,
    },
    /// Waiting for quiet processes.
    #[error(transparent)]
    Settle(#[from] BenchError),
    #[error("removing {}", dir.display())]
    Remove {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub struct RedisSide {
    pair: RedisPair,
}

impl RedisSide {
    /// Starts the pair under `dir` (removed first if an earlier run left it).
    pub async fn start(
        binary: &Path,
        dir: &Path,
        mode: RedisPersistence,
    ) -> Result<RedisSide, RedisSideError> {
        let _ = std::fs::remove_dir_all(dir);
        eprintln!("starting Redis primary + replica ({mode:?})");
        Ok(RedisSide {
            pair: RedisPair::start(binary, dir, mode).await?,
        })
    }

    /// `n` connections to the primary; with `wait`, each write is SET + WAIT 1 0.
    pub async fn writers(&self, n: u32, wait: bool) -> Result<Vec<RedisWriter>, RedisSideError> {
        let mut out = Vec::new();
        for i in 0..n {
            let conn = RespConn::connect(self.pair.primary)
                .await
                .map_err(|source| RedisSideError::ConnectLoop { i, source })?;
            out.push(RedisWriter {
                conn,
                wait,
                buf: Vec::new(),
            });
        }
        Ok(out)
    }

    /// Waits until both processes are quiet, for at most `quiet_max`.
    pub async fn settle(&self, quiet_max: Duration) -> Result<(), RedisSideError> {
        for pid in self.pair.pids() {
            settle::wait_quiet(pid, quiet_max).await?;
        }
        Ok(())
    }

    /// Stops both servers; their directory (AOF files) goes too unless the run failed.
    pub async fn stop(self, keep: bool) -> Result<(), RedisSideError> {
        let dir: PathBuf = self.pair.dir.clone();
        self.pair.stop().await?;
        if !keep {
            std::fs::remove_dir_all(&dir).map_err(|source| RedisSideError::Remove {
                dir: dir.clone(),
                source,
            })?;
        }
        Ok(())
    }
}

pub struct RedisWriter {
    conn: RespConn,
    wait: bool,
    buf: Vec<u8>,
}

/// A SET (and WAIT) that Redis did not answer as a durable write.
#[derive(Debug, thiserror::Error)]
pub enum RedisWriteError {
    #[error(transparent)]
    Connection(#[from] RespError),
    #[error("SET answered {0}")]
    Set(String),
    #[error("WAIT 1 0 answered {0}")]
    Wait(String),
}

impl Writer for RedisWriter {
    type Error = RedisWriteError;

    async fn write(&mut self, key: &[u8], value: &[u8]) -> Result<(), RedisWriteError> {
        self.buf.clear();
        encode(&[b"SET", key, value], &mut self.buf);
        if self.wait {
            encode(&[b"WAIT", b"1", b"0"], &mut self.buf);
        }
        self.conn.send_raw(&self.buf).await?;
        let set = self.conn.read().await?;
        // WAIT's answer is read even after a refused SET, so the connection stays in step.
        let waited = if self.wait {
            Some(self.conn.read().await?)
        } else {
            None
        };
        check(&set, waited.as_ref())
    }
}

/// The answers to SET (and WAIT): OK, and at least one replica.
fn check(set: &Reply, waited: Option<&Reply>) -> Result<(), RedisWriteError> {
    if !set.is_ok() {
        return Err(RedisWriteError::Set(format!("{set:?}")));
    }
    match waited {
        None => Ok(()),
        Some(Reply::Integer(n)) if *n >= 1 => Ok(()),
        Some(other) => Err(RedisWriteError::Wait(format!("{other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_checked() {
        let ok = Reply::Simple("OK".into());
        assert!(check(&ok, None).is_ok());
        assert!(check(&ok, Some(&Reply::Integer(1))).is_ok());
        assert!(check(&ok, Some(&Reply::Integer(0))).is_err());
        assert!(check(&ok, Some(&Reply::Error("ERR".into()))).is_err());
        let refused = Reply::Error("OOM".into());
        assert!(matches!(
            check(&refused, Some(&Reply::Integer(1))),
            Err(RedisWriteError::Set(_))
        ));
    }
}
