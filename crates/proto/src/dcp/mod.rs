//! DCP on the wire: flags, the stream request, stream-end reasons and the messages a producer
//! sends. Shared by the server's producer and consumer and by the client; no I/O.
//!
//! Layout: `flags` (open, stream and snapshot-marker bits), `stream_request` (the 48-byte
//! extras of DCP_STREAM_REQ), `end_reason` (STREAM_END reasons), `message` (producer →
//! consumer messages: encoding, decoding and their flow-control size).

pub mod end_reason;
pub mod flags;
pub mod message;
pub mod stream_request;

pub use end_reason::StreamEndReason;
pub use flags::{OpenFlags, SnapshotFlags, StreamFlags};
pub use message::{DcpMessage, DecodeError};
pub use stream_request::StreamRequest;
