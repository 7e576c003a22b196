//! What can go wrong on a DCP stream, typed so an application (and the reconnecting helper)
//! can tell "the connection is gone, try again" from "this will never work".

use std::path::PathBuf;
use std::time::Duration;

use sluice_proto::dcp::DecodeError;
use sluice_proto::{FrameError, Status};
use sluice_types::VbId;

use crate::error::ClientError;

#[derive(Debug, thiserror::Error)]
pub enum DcpError {
    /// The TCP connection or the bootstrap's first exchange failed at the socket level
    /// (refused, unreachable, reset during the handshake).
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    /// Connecting (TCP, HELLO, SASL, SELECT_BUCKET, DCP_OPEN, DCP_CONTROL) took longer than
    /// [`DcpOptions::connect_timeout`](super::DcpOptions::connect_timeout): a connect must
    /// never hang without a diagnosis.
    #[error("connecting to {addr} did not finish within {after:?}")]
    ConnectTimeout { addr: String, after: Duration },
    /// The bootstrap failed: authentication, bucket selection, cluster map, or a request
    /// made on the ordinary connection before DCP_OPEN.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The server refused DCP_OPEN.
    #[error("DCP_OPEN refused: {status:?} ({desc})", desc = .status.description())]
    Open { status: Status },
    /// The server refused a DCP_CONTROL this client depends on.
    #[error("DCP_CONTROL {key}={value} refused: {status:?}")]
    Control {
        key: &'static str,
        value: String,
        status: Status,
    },
    /// A stream request was refused with something other than ROLLBACK (e.g.
    /// NOT_MY_VBUCKET, ERANGE). Not fatal: that vbucket is dropped from the stream and the
    /// others go on; the position of the vbucket is left as it was.
    #[error("stream request for {vb} refused: {status:?} ({desc})", desc = .status.description())]
    StreamRequest { vb: VbId, status: Status },
    /// A stream request was refused with a status this client does not know.
    #[error("stream request for {vb} refused with unknown status 0x{code:04x}")]
    StreamRequestUnknownStatus { vb: VbId, code: u16 },
    /// A vbucket kept answering ROLLBACK without ever streaming: the server's and the
    /// client's histories do not converge, which a correct producer never causes.
    #[error("{vb}: {count} rollbacks in a row without a successful stream request")]
    RollbackLoop { vb: VbId, count: u32 },
    /// Nothing at all arrived for two noop intervals: the server sends a DCP_NOOP after one
    /// idle interval, so the connection (or the server) is dead.
    #[error("no data from the server for {0:?} (2 x the noop interval): connection presumed dead")]
    DeadConnection(Duration),
    #[error("the server closed the connection")]
    Closed,
    #[error("i/o error on the DCP connection: {0}")]
    Io(#[from] std::io::Error),
    /// The server sent bytes that are not a frame; the connection cannot be used further.
    #[error("bad frame from the server: {0}")]
    Frame(#[from] FrameError),
    /// A well-formed frame that is not a DCP message this client understands.
    #[error("bad DCP message from the server: {0}")]
    Decode(#[from] DecodeError),
    /// A response that does not fit what was asked.
    #[error("unexpected answer from the server: {0}")]
    Unexpected(&'static str),
    /// Every vbucket's stream has ended (reason ok or closed) or was refused: there is
    /// nothing more to deliver.
    #[error("every stream has ended")]
    AllStreamsEnded,
    /// Positions name a vbucket the bucket does not have (e.g. a positions file saved
    /// against a bucket with more vbuckets).
    #[error("position for {vb}, but the bucket has {num_vbuckets} vbuckets")]
    PositionsMismatch { vb: VbId, num_vbuckets: u16 },
    /// A starting point needs the vbucket count, which needs a bucket in the options.
    #[error("no bucket selected: set ConnectOptions::bucket")]
    NoBucket,
    #[error("invalid DCP options: {0}")]
    InvalidOptions(&'static str),
    #[error("positions file {path}: {source}")]
    PositionsFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("positions file {path} is not valid: {source}")]
    PositionsFormat {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("positions file {path} is not valid: {why}")]
    PositionsInvalid { path: PathBuf, why: String },
}

impl DcpError {
    /// The connection was lost or never came up, and trying again later may work. The
    /// reconnecting helper retries exactly these.
    pub fn is_connection_lost(&self) -> bool {
        match self {
            DcpError::Connect { .. }
            | DcpError::ConnectTimeout { .. }
            | DcpError::DeadConnection(_)
            | DcpError::Closed
            | DcpError::Io(_) => true,
            DcpError::Client(e) => matches!(e, ClientError::Io(_) | ClientError::Closed),
            _ => false,
        }
    }

    /// The server refused the credentials (or could not prove it knows them).
    pub fn is_auth_failure(&self) -> bool {
        match self {
            DcpError::Client(ClientError::Auth(_)) => true,
            DcpError::Client(e) => e.status() == Some(Status::AuthError),
            _ => false,
        }
    }
}
