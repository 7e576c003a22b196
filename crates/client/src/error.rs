//! The client's errors: what went wrong talking to the server, typed so callers can react.

use sluice_proto::{FrameError, Status};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The server closed the connection (between frames or in the middle of one).
    #[error("the server closed the connection")]
    Closed,
    /// The server sent bytes that are not a valid frame; the connection cannot be used further.
    #[error("bad frame from the server: {0}")]
    Frame(#[from] FrameError),
    /// The server answered with a non-success status.
    #[error("server answered {0:?}: {desc}", desc = .0.description())]
    Status(Status),
    /// The server answered with a status this client does not know.
    #[error("server answered unknown status 0x{0:04x}")]
    UnknownStatus(u16),
    /// A well-framed response that does not fit the request (wrong opaque, opcode or body).
    #[error("unexpected response: {0}")]
    Unexpected(&'static str),
    /// A typed operation was called while pipelined requests are still unanswered; their
    /// responses would be mistaken for its own.
    #[error("{in_flight} pipelined request(s) still in flight; read their responses first")]
    PipelineBusy { in_flight: usize },
    /// SASL failed on our side, e.g. the server's SCRAM signature did not verify.
    #[error("authentication failed: {0}")]
    Auth(#[from] sluice_sasl::AuthError),
    #[error("cluster config is not valid JSON: {0}")]
    ConfigJson(#[from] serde_json::Error),
    #[error("cluster config has no usable vBucketServerMap.vBucketMap")]
    NoVbucketMap,
}

impl ClientError {
    /// The server's status, if this error is one.
    pub fn status(&self) -> Option<Status> {
        match self {
            ClientError::Status(s) => Some(*s),
            _ => None,
        }
    }

    /// A miss (KEY_ENOENT): common enough to deserve a name.
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(Status::KeyEnoent)
    }
}
