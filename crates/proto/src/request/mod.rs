//! Validation: a [`Frame`] → a typed [`Request`], checking syntax only (per-opcode extras,
//! key and value rules, sizes, datatype bits, frame infos). Semantics are the executor's.
//!
//! Commands come in families, one file each, holding the family's enum and the per-opcode
//! checks that build it: `kv` (documents), `session` (negotiation and queries about the
//! server), `subdoc` (sub-document lookups and mutations, part of the `kv` family),
//! `vbucket` (seqno and vbucket queries) and `dcp` (opening and driving a DCP
//! producer). `shape` holds what their checks share. [`validate`] checks what every request
//! shares (opcode, frame infos, durability, datatype) and asks each family for its opcode.

mod dcp;
mod kv;
mod session;
mod shape;
mod subdoc;
mod vbucket;

pub use dcp::{DcpCommand, DCP_NAME_BYTES_MAX};
pub use kv::{KvCommand, StoreOp, WithMeta, WithMetaOp, WithMetaOptions};
pub use session::SessionCommand;
pub use subdoc::{DocFlags, PathFlags, SubdocCommand, SubdocOp, SubdocSpec, SUBDOC_SPECS_MAX};
pub use vbucket::VbucketCommand;

use crate::frame::Frame;
use crate::frame_info::{parse_frame_infos, FrameInfos};
use crate::opcode::Opcode;
use crate::status::Status;
use sluice_types::{Cas, Datatype, VbId};

/// What validation needs to know about the session.
#[derive(Debug, Clone, Copy)]
pub struct ValidateCtx {
    /// Datatype bits the client negotiated (JSON / SNAPPY / XATTR); others are invalid.
    pub datatype_allowed: u8,
    /// Largest value accepted, in bytes; larger gets E2BIG.
    pub value_bytes_max: usize,
}

/// A validated request: header fields plus the typed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request<'a> {
    pub opcode: Opcode,
    pub vb: VbId,
    pub opaque: u32,
    /// The CAS the client expects the document to have (0: any).
    pub cas: Cas,
    pub datatype: Datatype,
    pub frame_infos: FrameInfos,
    /// A quiet opcode: the uninteresting answer (a miss, a success) is not sent.
    pub quiet: bool,
    pub command: Command<'a>,
}

/// A validated command, by family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command<'a> {
    Kv(KvCommand<'a>),
    Session(SessionCommand<'a>),
    Vbucket(VbucketCommand),
    Dcp(DcpCommand<'a>),
}

impl Command<'_> {
    /// Commands that change a document (and may carry a durability requirement).
    pub fn is_mutation(&self) -> bool {
        matches!(self, Command::Kv(kv) if kv.is_mutation())
    }

    /// Commands whose value is a document, and so may carry datatype bits.
    pub fn carries_document(&self) -> bool {
        matches!(self, Command::Kv(kv) if kv.carries_document())
    }

    /// The document key, for commands that name one.
    pub fn key(&self) -> Option<&[u8]> {
        match self {
            Command::Kv(kv) => kv.key(),
            Command::Session(_) | Command::Vbucket(_) | Command::Dcp(_) => None,
        }
    }
}

/// Why a frame did not validate: the status to answer with, or an unknown opcode.
pub type ValidateResult<'a> = Result<Request<'a>, Status>;

/// Validates a client request frame. Callers answer an `Err(status)` with that status.
pub fn validate<'a>(frame: &Frame<'a>, ctx: &ValidateCtx) -> ValidateResult<'a> {
    let opcode = Opcode::from_byte(frame.opcode).ok_or(Status::UnknownCommand)?;
    let frame_infos = parse_frame_infos(frame.framing_extras)?;
    let command = command(opcode, frame, ctx)?;
    if frame_infos.durability.is_some() && !command.is_mutation() {
        return Err(Status::Einval);
    }
    let datatype = Datatype(frame.datatype);
    if command.carries_document() {
        if frame.datatype & !Datatype::KNOWN != 0 || frame.datatype & !ctx.datatype_allowed != 0 {
            return Err(Status::Einval);
        }
    } else if frame.datatype != 0 {
        return Err(Status::Einval);
    }
    Ok(Request {
        opcode,
        vb: VbId(frame.vbucket_or_status),
        opaque: frame.opaque,
        cas: Cas(frame.cas),
        datatype,
        frame_infos,
        quiet: opcode.is_quiet(),
        command,
    })
}

/// The opcode's family checks the frame; the families' opcodes do not overlap.
fn command<'a>(op: Opcode, f: &Frame<'a>, ctx: &ValidateCtx) -> Result<Command<'a>, Status> {
    if let Some(c) = kv::validate(op, f, ctx)? {
        return Ok(Command::Kv(c));
    }
    if let Some(c) = session::validate(op, f, ctx)? {
        return Ok(Command::Session(c));
    }
    if let Some(c) = vbucket::validate(op, f, ctx)? {
        return Ok(Command::Vbucket(c));
    }
    if let Some(c) = dcp::validate(op, f, ctx)? {
        return Ok(Command::Dcp(c));
    }
    // Known to the codec but not served on a KV session: vbucket admin, the DCP messages a
    // producer sends, OBSERVE, locking, collections.
    Err(Status::NotSupported)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::Magic;

    /// `command` asks the families in turn: an opcode two of them claimed would be served
    /// by whichever is asked first.
    #[test]
    fn every_opcode_belongs_to_at_most_one_family() {
        let ctx = ValidateCtx {
            datatype_allowed: Datatype::KNOWN,
            value_bytes_max: 1024,
        };
        for b in 0..=255u8 {
            let Some(op) = Opcode::from_byte(b) else {
                continue;
            };
            let f = Frame {
                magic: Magic::ClientRequest,
                opcode: b,
                datatype: 0,
                vbucket_or_status: 0,
                opaque: 0,
                cas: 0,
                framing_extras: &[],
                extras: &[],
                key: &[],
                value: &[],
            };
            let claimed = [
                !matches!(kv::validate(op, &f, &ctx), Ok(None)),
                !matches!(session::validate(op, &f, &ctx), Ok(None)),
                !matches!(vbucket::validate(op, &f, &ctx), Ok(None)),
                !matches!(dcp::validate(op, &f, &ctx), Ok(None)),
            ];
            let families = claimed.iter().filter(|&&c| c).count();
            assert!(families <= 1, "{op:?} is claimed by {families} families");
        }
    }
}
