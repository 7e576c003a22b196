//! Errors below the bench's top level. `run_kv` turns them into `anyhow` with context.

use sluice_client::ClientError;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(
        "no answer within {0:?} (after the run ended, or to a prefill set); the server looks stuck"
    )]
    NoAnswer(Duration),
    #[error("answer with opaque {got} where {expected} was next; the connection is out of step")]
    OutOfStep { expected: u32, got: u32 },
    #[error("prefill: the server answered status 0x{status:04x} to a set (is the quota big enough for the key space?)")]
    Prefill { status: u16 },
    #[error("{addr} is not a loopback address; the bench only generates load on this machine")]
    NotLoopback { addr: String },
    #[error("cannot resolve {addr}: {source}")]
    Resolve {
        addr: String,
        source: std::io::Error,
    },
    #[error("cannot start {what}: {source}")]
    Spawn {
        what: &'static str,
        source: std::io::Error,
    },
    #[error("{what} exited early ({status}); its log is {log}")]
    Exited {
        what: &'static str,
        status: std::process::ExitStatus,
        log: PathBuf,
    },
    #[error("{what} did not become ready within {waited:?}; its log is {log}")]
    NotReady {
        what: &'static str,
        waited: Duration,
        log: PathBuf,
    },
    #[error("the started server never completed a bootstrap within {waited:?} (last attempt: {last}); its log is {log}")]
    NeverServed {
        waited: Duration,
        log: PathBuf,
        last: ClientError,
    },
    #[error("engine: {0}")]
    Engine(#[from] sluice_engine::EngineError),
    #[error("storage: {0}")]
    Storage(#[from] sluice_storage::StoreError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
