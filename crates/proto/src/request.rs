//! Validation: a [`Frame`] → a typed [`Request`], checking syntax only (per-opcode extras,
//! key and value rules, sizes, datatype bits, frame infos). Semantics are the executor's.

use crate::dcp::{OpenFlags, StreamRequest};
use crate::frame::Frame;
use crate::frame_info::{parse_frame_infos, FrameInfos};
use crate::opcode::Opcode;
use crate::status::Status;
use sluice_types::limits::KEY_BYTES_MAX;
use sluice_types::{Datatype, VbId};

/// What validation needs to know about the session.
#[derive(Debug, Clone, Copy)]
pub struct ValidateCtx {
    /// Datatype bits the client negotiated (JSON / SNAPPY / XATTR); others are invalid.
    pub datatype_allowed: u8,
    /// Largest value accepted, in bytes; larger gets E2BIG.
    pub value_bytes_max: usize,
}

/// Set, Add or Replace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreOp {
    Set,
    Add,
    Replace,
}

/// A validated request: header fields plus the typed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request<'a> {
    pub opcode: Opcode,
    pub vb: VbId,
    pub opaque: u32,
    pub cas: u64,
    pub datatype: Datatype,
    pub frame_infos: FrameInfos,
    pub quiet: bool,
    pub command: Command<'a>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command<'a> {
    /// GET / GETQ / GETK / GETKQ.
    Get {
        key: &'a [u8],
        with_key: bool,
    },
    GetReplica {
        key: &'a [u8],
    },
    /// GAT / GATQ (`expiry` as sent on the wire).
    GetAndTouch {
        key: &'a [u8],
        expiry: u32,
    },
    Touch {
        key: &'a [u8],
        expiry: u32,
    },
    Store {
        op: StoreOp,
        key: &'a [u8],
        value: &'a [u8],
        flags: u32,
        expiry: u32,
    },
    Delete {
        key: &'a [u8],
    },
    Arithmetic {
        increment: bool,
        key: &'a [u8],
        delta: u64,
        initial: u64,
        expiry: u32,
    },
    Concat {
        append: bool,
        key: &'a [u8],
        value: &'a [u8],
    },
    GetMeta {
        key: &'a [u8],
        want_datatype: bool,
    },
    Noop,
    Version,
    Quit,
    Flush {
        delay: u32,
    },
    Stat {
        group: &'a [u8],
    },
    Verbosity,
    Hello {
        agent: &'a [u8],
        features: Vec<u16>,
    },
    SaslListMechs,
    SaslAuth {
        mechanism: &'a [u8],
        data: &'a [u8],
    },
    SaslStep {
        mechanism: &'a [u8],
        data: &'a [u8],
    },
    SelectBucket {
        name: &'a [u8],
    },
    ListBuckets,
    GetErrorMap {
        version: u16,
    },
    /// Optional (epoch, revision) the client already has.
    GetClusterConfig {
        known: Option<(i64, i64)>,
    },
    /// Optional vbucket-state filter (0 = any alive state).
    GetAllVbSeqnos {
        state: Option<u32>,
    },
    ObserveSeqno {
        vb_uuid: u64,
    },
    GetFailoverLog,
    GetVbucket,
    SeqnoPersistence {
        seqno: u64,
    },
    /// DCP_OPEN: `name` is the connection name; `flags` decide producer or consumer.
    DcpOpen {
        flags: OpenFlags,
        name: &'a [u8],
    },
    DcpControl {
        key: &'a [u8],
        value: &'a [u8],
    },
    /// DCP_STREAM_REQ for the header's vbucket; `value` is the optional JSON filter.
    DcpStreamReq {
        req: StreamRequest,
        value: &'a [u8],
    },
    DcpCloseStream,
    DcpBufferAck {
        bytes: u32,
    },
    /// DCP_SEQNO_ACKNOWLEDGED from a replica: the vbucket's seqno it holds in memory, and
    /// (a Sluice extension: 16 bytes of extras instead of 8) the seqno it has persisted.
    /// Sluice has no prepares: the active's durable write waits for these acks.
    DcpSeqnoAck {
        in_memory: u64,
        persisted: Option<u64>,
    },
}

impl Command<'_> {
    /// Commands that change a document (and may carry a durability requirement).
    pub fn is_mutation(&self) -> bool {
        matches!(
            self,
            Command::Store { .. }
                | Command::Delete { .. }
                | Command::Arithmetic { .. }
                | Command::Concat { .. }
        )
    }

    /// The document key, for commands that name one.
    pub fn key(&self) -> Option<&[u8]> {
        match self {
            Command::Get { key, .. }
            | Command::GetReplica { key }
            | Command::GetAndTouch { key, .. }
            | Command::Touch { key, .. }
            | Command::Store { key, .. }
            | Command::Delete { key }
            | Command::Arithmetic { key, .. }
            | Command::Concat { key, .. }
            | Command::GetMeta { key, .. } => Some(key),
            _ => None,
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
    let carries_document = matches!(command, Command::Store { .. } | Command::Concat { .. });
    if carries_document {
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
        cas: frame.cas,
        datatype,
        frame_infos,
        quiet: opcode.is_quiet(),
        command,
    })
}

/// Which parts a request may or must carry.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    None,
    Optional,
    Required,
}

struct Shape {
    extras: &'static [usize],
    key: Part,
    value: Part,
}

fn check(frame: &Frame<'_>, shape: Shape, ctx: &ValidateCtx) -> Result<(), Status> {
    if !shape.extras.contains(&frame.extras.len()) {
        return Err(Status::Einval);
    }
    match (shape.key, frame.key.len()) {
        (Part::None, n) if n > 0 => return Err(Status::Einval),
        (Part::Required, 0) => return Err(Status::Einval),
        _ => {}
    }
    match (shape.value, frame.value.len()) {
        (Part::None, n) if n > 0 => return Err(Status::Einval),
        (Part::Required, 0) => return Err(Status::Einval),
        _ => {}
    }
    if shape.value != Part::None && frame.value.len() > ctx.value_bytes_max {
        return Err(Status::E2big);
    }
    Ok(())
}

fn doc_key<'a>(frame: &Frame<'a>) -> Result<&'a [u8], Status> {
    if frame.key.is_empty() || frame.key.len() > KEY_BYTES_MAX {
        return Err(Status::Einval);
    }
    Ok(frame.key)
}

/// The big-endian `u32` at `at` of extras whose length was validated for the opcode.
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(array_at(b, at))
}

/// The big-endian `u64` at `at` of extras whose length was validated for the opcode.
fn be64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(array_at(b, at))
}

fn array_at<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    b.get(at..)
        .and_then(|rest| rest.first_chunk::<N>())
        .copied()
        .expect("extras length validated before reading fields")
}

/// DCP connection names are at most this long (printable ASCII).
pub const DCP_NAME_BYTES_MAX: usize = 200;

const KEY_ONLY: Shape = Shape {
    extras: &[0],
    key: Part::Required,
    value: Part::None,
};
const EMPTY: Shape = Shape {
    extras: &[0],
    key: Part::None,
    value: Part::None,
};

fn command<'a>(op: Opcode, f: &Frame<'a>, ctx: &ValidateCtx) -> Result<Command<'a>, Status> {
    use Opcode::*;
    let shaped = |shape: Shape| check(f, shape, ctx);
    Ok(match op {
        Get | GetQ | GetK | GetKQ => {
            shaped(KEY_ONLY)?;
            Command::Get {
                key: doc_key(f)?,
                with_key: matches!(op, GetK | GetKQ),
            }
        }
        GetReplica => {
            shaped(KEY_ONLY)?;
            Command::GetReplica { key: doc_key(f)? }
        }
        Gat | GatQ | Touch => {
            shaped(Shape {
                extras: &[4],
                key: Part::Required,
                value: Part::None,
            })?;
            let key = doc_key(f)?;
            let expiry = be32(f.extras, 0);
            if op == Touch {
                Command::Touch { key, expiry }
            } else {
                Command::GetAndTouch { key, expiry }
            }
        }
        Set | SetQ | Add | AddQ | Replace | ReplaceQ => {
            shaped(Shape {
                extras: &[8],
                key: Part::Required,
                value: Part::Optional,
            })?;
            let store_op = match op {
                Set | SetQ => StoreOp::Set,
                Add | AddQ => StoreOp::Add,
                _ => StoreOp::Replace,
            };
            if store_op == StoreOp::Add && f.cas != 0 {
                return Err(Status::Einval);
            }
            Command::Store {
                op: store_op,
                key: doc_key(f)?,
                value: f.value,
                flags: be32(f.extras, 0),
                expiry: be32(f.extras, 4),
            }
        }
        Delete | DeleteQ => {
            shaped(KEY_ONLY)?;
            Command::Delete { key: doc_key(f)? }
        }
        Increment | IncrementQ | Decrement | DecrementQ => {
            shaped(Shape {
                extras: &[20],
                key: Part::Required,
                value: Part::None,
            })?;
            Command::Arithmetic {
                increment: matches!(op, Increment | IncrementQ),
                key: doc_key(f)?,
                delta: be64(f.extras, 0),
                initial: be64(f.extras, 8),
                expiry: be32(f.extras, 16),
            }
        }
        Append | AppendQ | Prepend | PrependQ => {
            shaped(Shape {
                extras: &[0],
                key: Part::Required,
                value: Part::Optional,
            })?;
            Command::Concat {
                append: matches!(op, Append | AppendQ),
                key: doc_key(f)?,
                value: f.value,
            }
        }
        GetMeta | GetqMeta => {
            shaped(Shape {
                extras: &[0, 1],
                key: Part::Required,
                value: Part::None,
            })?;
            Command::GetMeta {
                key: doc_key(f)?,
                want_datatype: f.extras.first() == Some(&0x02),
            }
        }
        Noop => {
            shaped(EMPTY)?;
            Command::Noop
        }
        Version => {
            shaped(EMPTY)?;
            Command::Version
        }
        Quit | QuitQ => {
            shaped(EMPTY)?;
            Command::Quit
        }
        Flush | FlushQ => {
            shaped(Shape {
                extras: &[0, 4],
                key: Part::None,
                value: Part::None,
            })?;
            let delay = if f.extras.len() == 4 {
                be32(f.extras, 0)
            } else {
                0
            };
            Command::Flush { delay }
        }
        Stat => {
            shaped(Shape {
                extras: &[0],
                key: Part::Optional,
                value: Part::Optional,
            })?;
            Command::Stat { group: f.key }
        }
        Verbosity => {
            shaped(Shape {
                extras: &[4],
                key: Part::None,
                value: Part::None,
            })?;
            Command::Verbosity
        }
        Hello => {
            shaped(Shape {
                extras: &[0],
                key: Part::Optional,
                value: Part::Optional,
            })?;
            if !f.value.len().is_multiple_of(2) {
                return Err(Status::Einval);
            }
            let features = f
                .value
                .chunks_exact(2)
                .filter_map(|c| c.try_into().ok().map(u16::from_be_bytes))
                .collect();
            Command::Hello {
                agent: f.key,
                features,
            }
        }
        SaslListMechs => {
            shaped(EMPTY)?;
            Command::SaslListMechs
        }
        SaslAuth | SaslStep => {
            shaped(Shape {
                extras: &[0],
                key: Part::Required,
                value: Part::Optional,
            })?;
            if op == SaslAuth {
                Command::SaslAuth {
                    mechanism: f.key,
                    data: f.value,
                }
            } else {
                Command::SaslStep {
                    mechanism: f.key,
                    data: f.value,
                }
            }
        }
        SelectBucket => {
            shaped(Shape {
                extras: &[0],
                key: Part::Required,
                value: Part::None,
            })?;
            Command::SelectBucket { name: f.key }
        }
        ListBuckets => {
            shaped(EMPTY)?;
            Command::ListBuckets
        }
        GetErrorMap => {
            shaped(Shape {
                extras: &[0],
                key: Part::None,
                value: Part::Required,
            })?;
            let Ok(version) = <[u8; 2]>::try_from(f.value).map(u16::from_be_bytes) else {
                return Err(Status::Einval);
            };
            if version == 0 {
                return Err(Status::Einval);
            }
            Command::GetErrorMap { version }
        }
        GetClusterConfig => {
            shaped(Shape {
                extras: &[0, 16],
                key: Part::None,
                value: Part::None,
            })?;
            let known = (f.extras.len() == 16)
                .then(|| (be64(f.extras, 0) as i64, be64(f.extras, 8) as i64));
            Command::GetClusterConfig { known }
        }
        GetAllVbSeqnos => {
            shaped(Shape {
                extras: &[0, 4, 8],
                key: Part::None,
                value: Part::None,
            })?;
            let state = (f.extras.len() >= 4).then(|| be32(f.extras, 0));
            if state.is_some_and(|s| s > 4) {
                return Err(Status::Einval);
            }
            Command::GetAllVbSeqnos { state }
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
            Command::ObserveSeqno {
                vb_uuid: be64(f.value, 0),
            }
        }
        GetFailoverLog | DcpGetFailoverLog => {
            shaped(EMPTY)?;
            Command::GetFailoverLog
        }
        GetVbucket => {
            shaped(EMPTY)?;
            Command::GetVbucket
        }
        SeqnoPersistence => {
            shaped(Shape {
                extras: &[8],
                key: Part::None,
                value: Part::None,
            })?;
            Command::SeqnoPersistence {
                seqno: be64(f.extras, 0),
            }
        }
        DcpOpen => {
            shaped(Shape {
                extras: &[8],
                key: Part::Required,
                value: Part::Optional,
            })?;
            if f.key.len() > DCP_NAME_BYTES_MAX || !f.key.iter().all(u8::is_ascii_graphic) {
                return Err(Status::Einval);
            }
            Command::DcpOpen {
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
            Command::DcpControl {
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
            Command::DcpStreamReq {
                req: StreamRequest::parse(f.extras).ok_or(Status::Einval)?,
                value: f.value,
            }
        }
        DcpCloseStream => {
            shaped(EMPTY)?;
            Command::DcpCloseStream
        }
        DcpBufferAck => {
            shaped(Shape {
                extras: &[4],
                key: Part::None,
                value: Part::None,
            })?;
            Command::DcpBufferAck {
                bytes: be32(f.extras, 0),
            }
        }
        DcpSeqnoAcknowledged => {
            shaped(Shape {
                extras: &[8, 16],
                key: Part::None,
                value: Part::None,
            })?;
            Command::DcpSeqnoAck {
                in_memory: be64(f.extras, 0),
                persisted: (f.extras.len() == 16).then(|| be64(f.extras, 8)),
            }
        }
        // Known to the codec but not served on a KV session (DCP and vbucket admin are
        // handled by their own layers once they exist).
        _ => return Err(Status::NotSupported),
    })
}
