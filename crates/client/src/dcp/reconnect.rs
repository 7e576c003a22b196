//! [`ReconnectingStream`]: a [`DcpStream`] that survives connection loss.
//!
//! When the connection fails (I/O error, the server closing it, or two noop intervals of
//! silence) the helper reconnects with exponential backoff and requests every vbucket again
//! from its current position: the position of the last event the application received.
//! Nothing is skipped and nothing is repeated, because positions only ever move on
//! delivery. Vbuckets whose stream had ended for good stay ended.
//!
//! Retried: exactly the errors for which [`DcpError::is_connection_lost`] holds, including
//! "cannot connect" while the server restarts. Everything else (authentication, a refused
//! DCP_OPEN, a malformed message) is returned to the caller. The helper retries forever;
//! wrap `next()` in a timeout to give up.

use std::time::Duration;

use sluice_types::VbId;

use super::error::DcpError;
use super::event::DcpEvent;
use super::options::DcpOptions;
use super::position::StreamPositions;
use super::stream::{DcpStream, StartFrom};

pub struct ReconnectingStream {
    addr: String,
    opts: DcpOptions,
    stream: Option<DcpStream>,
    /// Positions while disconnected (the stream's own while connected).
    positions: StreamPositions,
    finished: std::collections::BTreeSet<VbId>,
    delay: Duration,
    reconnects: u64,
}

impl ReconnectingStream {
    /// Connects once; an error here is returned as is (so "wrong password" or "no server at
    /// that address" is reported at once rather than retried forever).
    pub async fn connect(
        addr: &str,
        opts: DcpOptions,
        from: StartFrom,
    ) -> Result<ReconnectingStream, DcpError> {
        let stream = DcpStream::connect(addr, opts.clone(), from).await?;
        Ok(ReconnectingStream {
            addr: addr.to_string(),
            positions: stream.positions().clone(),
            delay: opts.reconnect_delay_min,
            opts,
            stream: Some(stream),
            finished: Default::default(),
            reconnects: 0,
        })
    }

    /// The next event; reconnects as often as needed. Cancel-safe.
    pub async fn next(&mut self) -> Result<DcpEvent, DcpError> {
        loop {
            if let Some(stream) = &mut self.stream {
                match stream.next().await {
                    Ok(event) => return Ok(event),
                    Err(e) if e.is_connection_lost() => {
                        tracing::warn!(error = %e, "DCP connection lost; reconnecting");
                        self.positions = stream.positions().clone();
                        self.finished = stream.finished_vbuckets();
                        self.stream = None;
                    }
                    Err(e) => return Err(e),
                }
            }
            tokio::time::sleep(self.delay).await;
            self.delay = (self.delay * 2).min(self.opts.reconnect_delay_max);
            let from = StartFrom::Positions(self.positions.clone());
            match DcpStream::open(&self.addr, self.opts.clone(), from, &self.finished).await {
                Ok(stream) => {
                    tracing::info!(addr = %self.addr, "DCP connection re-established");
                    self.stream = Some(stream);
                    self.delay = self.opts.reconnect_delay_min;
                    self.reconnects += 1;
                }
                Err(e) if e.is_connection_lost() => {
                    tracing::debug!(error = %e, delay = ?self.delay, "reconnect failed; retrying");
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Positions after the last delivered event, connected or not.
    pub fn positions(&self) -> &StreamPositions {
        match &self.stream {
            Some(s) => s.positions(),
            None => &self.positions,
        }
    }

    /// How many times the connection was re-established.
    pub fn reconnects(&self) -> u64 {
        self.reconnects
    }

    /// The current connection, if any.
    pub fn stream(&self) -> Option<&DcpStream> {
        self.stream.as_ref()
    }
}
