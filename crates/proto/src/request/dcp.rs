//! DCP requests a client sends: DCP_OPEN on an ordinary connection, then, on the producer
//! connection it opened, DCP_CONTROL, DCP_STREAM_REQ, DCP_CLOSE_STREAM, DCP_BUFFER_ACK and
//! DCP_SEQNO_ACKNOWLEDGED. The vbucket, where there is one, is the header's.

use super::shape::{be32, be64, check, Part, Shape, EMPTY};
use super::ValidateCtx;
use crate::dcp::{OpenFlags, StreamRequest};
use crate::frame::Frame;
use crate::opcode::Opcode;
use crate::status::Status;
use sluice_types::Seqno;

/// DCP connection names are at most this long (printable ASCII).
pub const DCP_NAME_BYTES_MAX: usize = 200;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DcpCommand<'a> {
    /// DCP_OPEN: `name` is the connection name; `flags` decide producer or consumer.
    Open {
        flags: OpenFlags,
        name: &'a [u8],
    },
    /// DCP_CONTROL: one `key` = `value` setting of the connection.
    Control {
        key: &'a [u8],
        value: &'a [u8],
    },
    /// DCP_STREAM_REQ for the header's vbucket; `value` is the optional JSON filter.
    StreamReq {
        req: StreamRequest,
        value: &'a [u8],
    },
    CloseStream,
    /// DCP_BUFFER_ACK: the consumer has processed `bytes` more of what it was sent.
    BufferAck {
        bytes: u32,
    },
    /// DCP_SEQNO_ACKNOWLEDGED from a replica: the vbucket's seqno it holds in memory, and
    /// (a Sluice extension: 16 bytes of extras instead of 8) the seqno it has persisted.
    /// Sluice has no prepares: the active's durable write waits for these acks.
    SeqnoAck {
        in_memory: Seqno,
        persisted: Option<Seqno>,
    },
}

/// Validates a DCP opcode; `Ok(None)` for an opcode of another family.
pub(super) fn validate<'a>(
    op: Opcode,
    f: &Frame<'a>,
    ctx: &ValidateCtx,
) -> Result<Option<DcpCommand<'a>>, Status> {
    use Opcode::*;
    let shaped = |shape: Shape| check(f, shape, ctx);
    Ok(Some(match op {
        DcpOpen => {
            shaped(Shape {
                extras: &[8],
                key: Part::Required,
                value: Part::Optional,
            })?;
            if f.key.len() > DCP_NAME_BYTES_MAX || !f.key.iter().all(u8::is_ascii_graphic) {
                return Err(Status::Einval);
            }
            DcpCommand::Open {
                flags: OpenFlags(be32(f.extras, 4)),
                name: f.key,
            }
        }
        DcpControl => {
            shaped(Shape {
                extras: &[0],
                key: Part::Required,
                value: Part::Required,
            })?;
            DcpCommand::Control {
                key: f.key,
                value: f.value,
            }
        }
        DcpStreamReq => {
            shaped(Shape {
                extras: &[48],
                key: Part::None,
                value: Part::Optional,
            })?;
            DcpCommand::StreamReq {
                req: StreamRequest::parse(f.extras).ok_or(Status::Einval)?,
                value: f.value,
            }
        }
        DcpCloseStream => {
            shaped(EMPTY)?;
            DcpCommand::CloseStream
        }
        DcpBufferAck => {
            shaped(Shape {
                extras: &[4],
                key: Part::None,
                value: Part::None,
            })?;
            DcpCommand::BufferAck {
                bytes: be32(f.extras, 0),
            }
        }
        DcpSeqnoAcknowledged => {
            shaped(Shape {
                extras: &[8, 16],
                key: Part::None,
                value: Part::None,
            })?;
            DcpCommand::SeqnoAck {
                in_memory: Seqno(be64(f.extras, 0)),
                persisted: (f.extras.len() == 16).then(|| Seqno(be64(f.extras, 8))),
            }
        }
        _ => return Ok(None),
    }))
}
