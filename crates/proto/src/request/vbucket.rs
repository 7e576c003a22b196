//! vbucket and seqno queries: GET_ALL_VB_SEQNOS, OBSERVE_SEQNO, GET_FAILOVER_LOG,
//! GET_VBUCKET, SEQNO_PERSISTENCE. They name no document; the vbucket is the header's.

use super::shape::{be32, be64, check, Part, Shape, EMPTY};
use super::ValidateCtx;
use crate::frame::Frame;
use crate::opcode::Opcode;
use crate::status::Status;
use sluice_types::{Seqno, VbState, VbUuid};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VbucketCommand {
    /// Every vbucket's high seqno, optionally only those in one state (`None`: any alive
    /// state, as the wire's absent or 0 filter says).
    GetAllVbSeqnos {
        state: Option<VbState>,
    },
    /// The vbucket's persisted and current seqnos, and whether `vb_uuid` was failed over.
    ObserveSeqno {
        vb_uuid: VbUuid,
    },
    /// GET_FAILOVER_LOG, or DCP_GET_FAILOVER_LOG (the same answer).
    GetFailoverLog,
    GetVbucket,
    /// Answer once `seqno` is persisted.
    SeqnoPersistence {
        seqno: Seqno,
    },
}

/// Validates a vbucket opcode; `Ok(None)` for an opcode of another family.
pub(super) fn validate(
    op: Opcode,
    f: &Frame<'_>,
    ctx: &ValidateCtx,
) -> Result<Option<VbucketCommand>, Status> {
    use Opcode::*;
    let shaped = |shape: Shape| check(f, shape, ctx);
    Ok(Some(match op {
        GetAllVbSeqnos => {
            shaped(Shape {
                extras: &[0, 4, 8],
                key: Part::None,
                value: Part::None,
            })?;
            let state = match (f.extras.len() >= 4).then(|| be32(f.extras, 0)) {
                None | Some(0) => None,
                Some(wire) => Some(VbState::from_wire(wire).ok_or(Status::Einval)?),
            };
            VbucketCommand::GetAllVbSeqnos { state }
        }
        ObserveSeqno => {
            shaped(Shape {
                extras: &[0],
                key: Part::None,
                value: Part::Required,
            })?;
            if f.value.len() != 8 {
                return Err(Status::Einval);
            }
            VbucketCommand::ObserveSeqno {
                vb_uuid: VbUuid(be64(f.value, 0)),
            }
        }
        GetFailoverLog | DcpGetFailoverLog => {
            shaped(EMPTY)?;
            VbucketCommand::GetFailoverLog
        }
        GetVbucket => {
            shaped(EMPTY)?;
            VbucketCommand::GetVbucket
        }
        SeqnoPersistence => {
            shaped(Shape {
                extras: &[8],
                key: Part::None,
                value: Part::None,
            })?;
            VbucketCommand::SeqnoPersistence {
                seqno: Seqno(be64(f.extras, 0)),
            }
        }
        _ => return Ok(None),
    }))
}
