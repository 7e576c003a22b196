//! The memcached binary protocol with Couchbase's extensions. No sockets, no clocks.
//!
//! A request goes through three stages; this crate owns the first two and the encoding of the
//! answer:
//! 1. **framing** (`frame`): bytes → [`Frame`] (or `Incomplete` for a partial read), checking
//!    only the header's arithmetic;
//! 2. **validation** (`request`): a frame → a typed [`Request`], checking syntax per opcode
//!    (extras length, key and value presence, sizes, datatype bits, frame infos);
//! 3. execution is the server's job; it answers with `response::encode_response`.
//!
//! Layout: `header` (magic, the 24-byte header), `frame` (decoding), `frame_info` (flexible
//! framing extras), `opcode`, `status`, `feature` (HELLO), `request/` (typed requests and
//! their validation, one file per command family: `kv`, `session`, `vbucket`, `dcp`),
//! `response` / `encode` (writing packets), `error_map` (GET_ERROR_MAP JSON),
//! `body` (response bodies both the server and the client read: failover logs, vbucket seqnos).
#![deny(unsafe_code)]
// A decoder never panics on what it reads: every index is checked (`get`, `split_at_checked`).
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

pub mod body;
pub mod dcp;
pub mod encode;
pub mod error_map;
pub mod feature;
pub mod frame;
pub mod frame_info;
pub mod header;
pub mod opcode;
pub mod request;
pub mod status;

pub use feature::Feature;
pub use frame::{decode_frame, Decoded, Frame, FrameError};
pub use frame_info::{DurabilityLevel, FrameInfos};
pub use header::{Magic, HEADER_LEN};
pub use opcode::Opcode;
pub use request::{Request, StoreOp, ValidateCtx};
pub use status::Status;
