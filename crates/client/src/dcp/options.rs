//! How a DCP stream connects and what it asks the producer for.

use std::time::Duration;

use rand::RngCore;
use sluice_types::{IncludeValue, Seqno};

use crate::options::ConnectOptions;

/// 10 MiB: what the reference SDK clients use. The window is also the most the client
/// buffers (plus one message and one read buffer), whatever the application's pace.
pub const DEFAULT_WINDOW_BYTES: u32 = 10 * 1024 * 1024;
/// The producer sends a DCP_NOOP after this much idle time, and the client declares the
/// connection dead after twice this much silence.
pub const DEFAULT_NOOP_INTERVAL: Duration = Duration::from_secs(60);
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What the stream does when the producer answers a stream request with ROLLBACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RollbackMode {
    /// Move the vbucket's position back to the rollback point and ask again, then tell the
    /// application with a `Rollback` event (it truncates its own copy).
    #[default]
    Follow,
    /// Only tell the application (`Rollback` event) and wait: it decides where to resume
    /// and calls [`DcpStream::restart`](super::DcpStream::restart). A replica that cannot
    /// undo changes exactly starts over from 0, for example.
    Report,
}

#[derive(Debug, Clone)]
pub struct DcpOptions {
    /// Bootstrap: credentials, bucket, HELLO features. A bucket is needed to start from the
    /// beginning or from now (the vbucket count and seqnos come from it).
    pub connect: ConnectOptions,
    /// DCP_OPEN connection name (printable, at most 200 bytes). The default is random and
    /// chosen once per options value, so the reconnecting helper reconnects under the same
    /// name, which makes the producer drop a half-dead predecessor.
    pub name: String,
    /// Flow-control window (`connection_buffer_size`), > 0. Acks go out once 20 % of it
    /// has been delivered to the application.
    pub window_bytes: u32,
    /// `set_noop_interval`; whole seconds, at least 1 (the server's minimum).
    pub noop_interval: Duration,
    /// Stop each vbucket after the snapshot holding this seqno; `Seqno::MAX` = follow forever.
    pub end: Seqno,
    /// `No`: keys and metadata only (the NoValue open flag).
    pub value: IncludeValue,
    /// Bound on connecting: TCP, bootstrap, DCP_OPEN and DCP_CONTROL.
    pub connect_timeout: Duration,
    /// Reconnect backoff of [`ReconnectingStream`](super::ReconnectingStream): the first
    /// wait, doubled after each failed attempt up to `reconnect_delay_max`.
    pub reconnect_delay_min: Duration,
    pub reconnect_delay_max: Duration,
    pub rollback: RollbackMode,
    /// `set_priority` (high / medium / low); `None` leaves the producer's default. Replication
    /// connections ask for high.
    pub priority: Option<&'static str>,
    /// `consumer_name`: the identity the producer counts this consumer's
    /// [`DcpStream::ack_seqno`](super::DcpStream::ack_seqno) acks for. Replicas give their node.
    pub consumer_name: Option<String>,
    /// `enable_sync_writes`: receive SyncWrite prepares, commits and aborts
    /// ([`DcpEvent::Prepare`](super::DcpEvent::Prepare) …) rather than committed documents
    /// only. Replicas ask for them; an application following changes does not.
    pub sync_writes: bool,
    /// Ask for xattrs (DCP_OPEN IncludeXattrs): a document with xattrs arrives with them
    /// (its value starts with the xattr section, datatype XATTR); without this the producer
    /// sends the body only. Replicas ask for them.
    pub xattrs: bool,
}

impl DcpOptions {
    pub fn new(connect: ConnectOptions) -> DcpOptions {
        DcpOptions {
            connect,
            name: format!("sluice-client:{:016x}", rand::rngs::OsRng.next_u64()),
            window_bytes: DEFAULT_WINDOW_BYTES,
            noop_interval: DEFAULT_NOOP_INTERVAL,
            end: Seqno::MAX,
            value: IncludeValue::Yes,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            reconnect_delay_min: Duration::from_millis(100),
            reconnect_delay_max: Duration::from_secs(5),
            rollback: RollbackMode::Follow,
            priority: None,
            consumer_name: None,
            sync_writes: false,
            xattrs: false,
        }
    }

    pub(crate) fn validate(&self) -> Result<(), &'static str> {
        if self.window_bytes == 0 {
            return Err("window_bytes must be positive: flow control is what bounds memory");
        }
        if self.noop_interval < Duration::from_secs(1) {
            return Err("noop_interval must be at least 1 second");
        }
        if self.name.is_empty()
            || self.name.len() > 200
            || !self.name.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err("name must be 1 to 200 printable ASCII characters");
        }
        Ok(())
    }

    /// The silence after which the connection is presumed dead.
    pub(crate) fn dead_after(&self) -> Duration {
        self.noop_interval * 2
    }
}
