//! Errors below the bench's top level: [`BenchError`], what the load, the child processes and
//! the in-process engine can meet. Each scenario's `run_*` has an error of its own (in its
//! folder's `error.rs`) that names the step it was at, with these as sources. [`Chain`]
//! prints an error with its sources on one line, for the failures a run reports and goes on.

use sluice_client::dcp::DcpError;
use sluice_client::ClientError;
use sluice_types::VbId;
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
    #[error(
        "no bootstrap answer within {0:?} (a plain memcached never answers HELLO: use \
         --target-memcached for it)"
    )]
    NoBootstrap(Duration),
    #[error("answer with opaque {got} where {expected} was next; the connection is out of step")]
    OutOfStep { expected: u32, got: u32 },
    #[error("making the collections: {0}")]
    Collections(String),
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
    #[error("DCP: {0}")]
    Dcp(#[from] DcpError),
    #[error("DCP consumer received nothing for {waited:?} with {live} stream(s) still open; the stream looks stalled")]
    DcpStalled { waited: Duration, live: usize },
    #[error("DCP: the client refused to close the stream of {0} after its last item")]
    DcpCloseRefused(VbId),
    #[error("prefill: no set succeeded for {waited:?} after {done} (is the quota big enough for the data?)")]
    PrefillStalled { done: u64, waited: Duration },
    #[error("{unpersisted} change(s) still unpersisted after {waited:?} without progress; the flusher looks stuck")]
    PersistenceStalled { unpersisted: u64, waited: Duration },
    #[error("engine: {0}")]
    Engine(#[from] sluice_engine::EngineError),
    #[error("storage: {0}")]
    Storage(#[from] sluice_storage::StoreError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// An error and its sources on one line, `outer: inner: root`, for a failure the bench
/// reports on stderr or in a report and then goes on without.
pub struct Chain<'a>(pub &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut next = self.0.source();
        while let Some(e) = next {
            write!(f, ": {e}")?;
            next = e.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("writing the report")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn a_chain_reads_outer_to_root() {
        let e = Outer(std::io::Error::other("disk full"));
        assert_eq!(Chain(&e).to_string(), "writing the report: disk full");
    }
}
