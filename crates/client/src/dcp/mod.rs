//! A DCP consumer: follow every change of a bucket as a stream, resumable from saved
//! positions.
//!
//! ```no_run
//! use sluice_client::dcp::{DcpEvent, DcpOptions, DcpStream, StartFrom};
//! use sluice_client::ConnectOptions;
//!
//! # async fn demo() -> Result<(), sluice_client::dcp::DcpError> {
//! let opts = DcpOptions::new(ConnectOptions::sluice("Administrator", "password", "default"));
//! let mut stream = DcpStream::connect("127.0.0.1:11210", opts, StartFrom::Beginning).await?;
//! loop {
//!     match stream.next().await? {
//!         DcpEvent::Mutation(m) => println!("{:?} = {:?}", m.key, m.value),
//!         DcpEvent::Deletion(d) | DcpEvent::Expiration(d) => println!("{:?} gone", d.key),
//!         DcpEvent::Rollback { vb, to } => println!("forget {vb} above {to}"),
//!         _ => {}
//!     }
//!     // Now and then: stream.positions().save(path)?, then DcpStream::resume later.
//! }
//! # }
//! ```
//!
//! What the client does for the application:
//! - **Positions.** Each vbucket's (uuid, seqno, snapshot) moves only when an event is
//!   delivered, so saved positions never skip anything; they always satisfy
//!   `snap_start <= seqno <= snap_end`. "From now" is built from the node's seqnos and
//!   failover logs, never from rollbacks.
//! - **Flow control.** A window (10 MiB by default); delivered bytes are acked once 20 % of
//!   it is pending. The client buffers at most the window, one message and one read buffer.
//! - **Noops.** The producer's DCP_NOOP is answered at once by the connection's I/O task;
//!   two noop intervals of silence end the connection with [`DcpError::DeadConnection`].
//! - **Rollback.** ROLLBACK(s): the position becomes s on the producer's branch holding s
//!   (from GET_FAILOVER_LOG; 0 and uuid 0 when s is 0), a [`DcpEvent::Rollback`] tells the
//!   application to discard what it has above s, and the stream is requested again.
//! - **Stream end.** `ok` / `closed` end a vbucket; any other reason re-requests it from
//!   its position.
//! - **Reconnect.** [`ReconnectingStream`] reconnects with backoff after connection loss
//!   and continues every vbucket from its position.
//!
//! Layout: `options`, `position` (positions and their file), `event`, `error`, `seqnos`
//! (GET_ALL_VB_SEQNOS, GET_FAILOVER_LOG, "from now"), `failover` (log parsing), `handshake`
//! (DCP_OPEN and controls), `link` (the socket task), `acks` (flow control), `stream`
//! ([`DcpStream`]: connect and the public API), `inbound` (what it does with each message and
//! answer), `reconnect` ([`ReconnectingStream`]).

mod acks;
mod error;
mod event;
mod failover;
mod handshake;
mod inbound;
mod link;
mod options;
mod position;
mod reconnect;
mod seqnos;
mod stream;

pub use error::DcpError;
pub use event::{DcpEvent, DcpItem};
pub use options::{
    DcpOptions, RollbackMode, DEFAULT_CONNECT_TIMEOUT, DEFAULT_NOOP_INTERVAL, DEFAULT_WINDOW_BYTES,
};
pub use position::{DcpPosition, StreamPositions};
pub use reconnect::ReconnectingStream;
pub use stream::{DcpStream, StartFrom};

// What events carry, so applications need not depend on the codec crate.
pub use sluice_proto::dcp::{SnapshotFlags, StreamEndReason};
