//! Messages a DCP producer sends to its consumer (magic 0x80 requests with the stream's
//! opaque and vbucket in the header): their encoding, decoding and flow-control size.

use super::end_reason::StreamEndReason;
use super::flags::SnapshotFlags;
use crate::encode::Packet;
use crate::frame::Frame;
use crate::header::Magic;
use crate::opcode::Opcode;
use bytes::Bytes;
use sluice_types::{Cas, Datatype, DurabilityLevel, Seqno, VbId, VbState};

/// v1 marker extras: `u64 start, u64 end, u32 flags`.
pub const SNAPSHOT_MARKER_V1_EXTRAS_LEN: usize = 20;
/// v2.x marker extras: one version byte; the fields move into the value.
pub const SNAPSHOT_MARKER_V2_EXTRAS_LEN: usize = 1;
/// v2.0 marker value: the v1 fields + `u64 max_visible_seqno, u64 high_completed_seqno`.
pub const SNAPSHOT_MARKER_V2_0_VALUE_LEN: usize = 36;
/// v2.2 marker value: the v2.0 value + `u64 purge_seqno, u64 high_prepared_seqno`.
pub const SNAPSHOT_MARKER_V2_2_VALUE_LEN: usize = 52;
/// `u64 by_seqno, u64 rev_seqno, u32 flags, u32 expiry, u32 lock_time, u16 nmeta, u8 nru`.
pub const MUTATION_EXTRAS_LEN: usize = 31;
/// `u64 by_seqno, u64 rev_seqno, u16 nmeta`.
pub const DELETION_V1_EXTRAS_LEN: usize = 18;
/// `u64 by_seqno, u64 rev_seqno, u32 delete_time, u8 unused` (IncludeDeleteTimes).
pub const DELETION_V2_EXTRAS_LEN: usize = 21;
/// `u64 by_seqno, u64 rev_seqno, u32 delete_time`.
pub const EXPIRATION_EXTRAS_LEN: usize = 20;
/// `u32 reason`.
pub const STREAM_END_EXTRAS_LEN: usize = 4;
/// One state byte.
pub const SET_VBUCKET_STATE_EXTRAS_LEN: usize = 1;
/// `u64 seqno`.
pub const SEQNO_ADVANCED_EXTRAS_LEN: usize = 8;
/// `u64 by_seqno, u64 rev_seqno, u32 flags, u32 expiry, u32 lock_time, u8 nru, u8 deleted,
/// u8 durability_level`.
pub const PREPARE_EXTRAS_LEN: usize = 31;
/// `u64 prepared_seqno, u64 commit_seqno` (or `abort_seqno`).
pub const COMPLETION_EXTRAS_LEN: usize = 16;

/// Version bytes of v2.x snapshot markers.
const MARKER_VERSION_2_0: u8 = 0x00;
const MARKER_VERSION_2_2: u8 = 0x02;

/// A snapshot's bounds: every seqno sent until the next marker lies in `start..=end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotMarker {
    pub start: Seqno,
    pub end: Seqno,
    pub flags: SnapshotFlags,
    /// The v2.0 fields, sent to consumers that enabled sync writes (`None` encodes v1).
    pub sync: Option<MarkerSeqnos>,
}

/// What a v2.0 marker adds for a sync-write consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MarkerSeqnos {
    /// The highest seqno in the snapshot a non-sync consumer would see (not a prepare or an
    /// abort).
    pub max_visible_seqno: Seqno,
    /// Meaningful on disk snapshots: every prepare at or below it is complete.
    pub high_completed_seqno: Seqno,
}

/// A SyncWrite's prepare (DCP_PREPARE): the document it would commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DcpPrepare {
    /// `seqno` is the prepare's; `delete_time` is unused (`None`).
    pub doc: DcpDocument,
    /// A durable delete.
    pub deleted: bool,
    pub level: DurabilityLevel,
}

/// The commit or abort of a prepare (DCP_COMMIT, DCP_ABORT).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DcpCompletion {
    pub key: Bytes,
    pub prepared_seqno: Seqno,
    /// The commit's or abort's own seqno.
    pub seqno: Seqno,
}

/// A document version as a stream carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DcpDocument {
    pub key: Bytes,
    /// Empty with the NoValue open flag, and for deletions without xattrs.
    pub value: Bytes,
    /// Describes `value` as sent.
    pub datatype: Datatype,
    pub cas: Cas,
    pub seqno: Seqno,
    pub rev_seqno: u64,
    /// Mutations only (zero otherwise).
    pub flags: u32,
    /// Mutations only: absolute unix seconds, 0 = never.
    pub expiry: u32,
    /// Deletions (v2) and expirations: when it was deleted. `None` sends a v1 deletion.
    pub delete_time: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DcpMessage {
    SnapshotMarker(SnapshotMarker),
    Mutation(DcpDocument),
    Deletion(DcpDocument),
    Expiration(DcpDocument),
    StreamEnd(StreamEndReason),
    SetVbucketState(VbState),
    SeqnoAdvanced(Seqno),
    Noop,
    Prepare(DcpPrepare),
    Commit(DcpCompletion),
    Abort(DcpCompletion),
}

/// Why bytes from a producer are not a valid DCP message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Producer messages are classic requests; stream-id (0x08) framing is not enabled by
    /// this server, and any other magic is not a producer → consumer request at all.
    #[error("magic 0x{0:02x} is not a classic (0x80) request")]
    UnsupportedMagic(u8),
    #[error("opcode 0x{0:02x} is not a producer message")]
    NotAProducerMessage(u8),
    /// A real producer message (system event, prepare, commit, abort, OSO, ...) that this
    /// decoder does not model yet; kept apart from `NotAProducerMessage` so a log says
    /// "not implemented" rather than "the peer is broken".
    #[error("opcode 0x{0:02x} is a producer message this decoder does not handle")]
    NotModelled(u8),
    #[error("opcode 0x{opcode:02x}: bad extras length {len}")]
    BadExtras { opcode: u8, len: usize },
    #[error("opcode 0x{0:02x}: unexpected key or value")]
    UnexpectedBody(u8),
    #[error("opcode 0x{0:02x}: a document message without a key")]
    MissingKey(u8),
    #[error("unknown snapshot-marker version {0}")]
    UnknownMarkerVersion(u8),
    #[error("opcode 0x{opcode:02x}: bad value length {len}")]
    BadValue { opcode: u8, len: usize },
    #[error("unknown stream-end reason {0}")]
    UnknownEndReason(u32),
    #[error("unknown vbucket state {0}")]
    UnknownVbState(u8),
    #[error("unknown durability level {0}")]
    UnknownDurabilityLevel(u8),
}

impl DcpMessage {
    /// The opcode this message is sent with.
    pub fn opcode(&self) -> Opcode {
        match self {
            DcpMessage::SnapshotMarker(_) => Opcode::DcpSnapshotMarker,
            DcpMessage::Mutation(_) => Opcode::DcpMutation,
            DcpMessage::Deletion(_) => Opcode::DcpDeletion,
            DcpMessage::Expiration(_) => Opcode::DcpExpiration,
            DcpMessage::StreamEnd(_) => Opcode::DcpStreamEnd,
            DcpMessage::SetVbucketState(_) => Opcode::DcpSetVbucketState,
            DcpMessage::SeqnoAdvanced(_) => Opcode::DcpSeqnoAdvanced,
            DcpMessage::Noop => Opcode::DcpNoop,
            DcpMessage::Prepare(_) => Opcode::DcpPrepare,
            DcpMessage::Commit(_) => Opcode::DcpCommit,
            DcpMessage::Abort(_) => Opcode::DcpAbort,
        }
    }

    /// Appends this message as one classic (0x80) request for stream `vb` / `opaque` and
    /// returns the bytes appended, which always equals [`DcpMessage::wire_len`].
    ///
    /// A marker is written as v2.0 exactly when it carries `sync` seqnos (consumers that
    /// enabled sync writes), else as v1. A deletion is v2 exactly when it has a
    /// `delete_time`.
    /// Fields a message kind does not carry (a deletion's flags, say) are not written, so
    /// they do not survive a decode; an expiration without a `delete_time` is sent with 0.
    ///
    /// Panics if the key is longer than 65,535 bytes or the body larger than 4 GiB: neither
    /// fits the header, and documents are capped far below that (250-byte keys, 20 MiB).
    pub fn encode(&self, vb: VbId, opaque: u32, out: &mut Vec<u8>) -> usize {
        let before = out.len();
        self.with_packet(vb, opaque, |p| p.encode_into(out));
        out.len() - before
    }

    /// The exact number of bytes [`DcpMessage::encode`] appends: what flow control counts.
    pub fn wire_len(&self) -> usize {
        // Built through the same packet description as `encode`, so the two cannot drift.
        self.with_packet(VbId(0), 0, |p| p.wire_len())
    }

    /// Describes this message as a [`Packet`] (header, extras, key, value) and hands it to
    /// `f`; the extras live on the stack only for the duration of the call.
    fn with_packet<R>(&self, vb: VbId, opaque: u32, f: impl FnOnce(&Packet<'_>) -> R) -> R {
        let mut extras = ExtrasBuf::default();
        let mut marker_v2 = ExtrasBuf::default();
        let mut packet = Packet::request(self.opcode().byte(), vb.0, opaque);
        let doc = match self {
            DcpMessage::SnapshotMarker(m) => {
                match m.sync {
                    None => {
                        extras.u64(m.start.0).u64(m.end.0).u32(m.flags.0);
                    }
                    Some(sync) => {
                        extras.u8(MARKER_VERSION_2_0);
                        marker_v2
                            .u64(m.start.0)
                            .u64(m.end.0)
                            .u32(m.flags.0)
                            .u64(sync.max_visible_seqno.0)
                            .u64(sync.high_completed_seqno.0);
                    }
                }
                None
            }
            DcpMessage::Prepare(p) => {
                let d = &p.doc;
                extras
                    .u64(d.seqno.0)
                    .u64(d.rev_seqno)
                    .u32(d.flags)
                    .u32(d.expiry)
                    .u32(0) // lock_time
                    .u8(0) // nru
                    .u8(u8::from(p.deleted))
                    .u8(p.level.to_wire());
                Some(d)
            }
            DcpMessage::Commit(c) | DcpMessage::Abort(c) => {
                extras.u64(c.prepared_seqno.0).u64(c.seqno.0);
                packet = packet.key(&c.key);
                None
            }
            DcpMessage::Mutation(d) => {
                extras
                    .u64(d.seqno.0)
                    .u64(d.rev_seqno)
                    .u32(d.flags)
                    .u32(d.expiry)
                    .u32(0) // lock_time
                    .u16(0) // nmeta
                    .u8(0); // nru
                Some(d)
            }
            DcpMessage::Deletion(d) => {
                extras.u64(d.seqno.0).u64(d.rev_seqno);
                match d.delete_time {
                    Some(t) => extras.u32(t).u8(0),
                    None => extras.u16(0), // nmeta
                };
                Some(d)
            }
            DcpMessage::Expiration(d) => {
                extras
                    .u64(d.seqno.0)
                    .u64(d.rev_seqno)
                    .u32(d.delete_time.unwrap_or(0));
                Some(d)
            }
            DcpMessage::StreamEnd(reason) => {
                extras.u32(reason.code());
                None
            }
            DcpMessage::SetVbucketState(state) => {
                extras.u8(*state as u8);
                None
            }
            DcpMessage::SeqnoAdvanced(seqno) => {
                extras.u64(seqno.0);
                None
            }
            DcpMessage::Noop => None,
        };
        if let Some(d) = doc {
            packet = packet
                .cas(d.cas.0)
                .datatype(d.datatype.0)
                .key(&d.key)
                .value(&d.value);
        }
        if !marker_v2.as_slice().is_empty() {
            packet = packet.value(marker_v2.as_slice());
        }
        f(&packet.extras(extras.as_slice()))
    }

    /// Decodes a producer message from a frame whose magic is 0x80 (the inverse of
    /// [`DcpMessage::encode`]; the frame's vbucket and opaque stay with the caller).
    ///
    /// Accepts v1 and v2.x snapshot markers (v2.2's purge and high prepared seqnos are
    /// dropped), v1 and v2 deletions. Lock time, nmeta and nru of a mutation are ignored, as are the header's
    /// datatype and CAS on messages that carry no document. Never panics.
    pub fn decode(frame: &Frame<'_>) -> Result<DcpMessage, DecodeError> {
        if frame.magic != Magic::ClientRequest {
            return Err(DecodeError::UnsupportedMagic(frame.magic.byte()));
        }
        let op = frame.opcode;
        let Some(opcode) = Opcode::from_byte(op) else {
            return Err(not_a_producer_message(op));
        };
        match opcode {
            Opcode::DcpSnapshotMarker => decode_marker(frame).map(DcpMessage::SnapshotMarker),
            Opcode::DcpMutation => {
                let mut e = Fields::exact(frame, MUTATION_EXTRAS_LEN)?;
                let (seqno, rev_seqno) = (e.u64()?, e.u64()?);
                let (flags, expiry) = (e.u32()?, e.u32()?);
                document(frame, seqno, rev_seqno, flags, expiry, None).map(DcpMessage::Mutation)
            }
            Opcode::DcpDeletion => {
                // v1 and v2 differ only in length; IncludeDeleteTimes picks one per connection.
                let v2 = frame.extras.len() == DELETION_V2_EXTRAS_LEN;
                let len = if v2 {
                    DELETION_V2_EXTRAS_LEN
                } else {
                    DELETION_V1_EXTRAS_LEN
                };
                let mut e = Fields::exact(frame, len)?;
                let (seqno, rev_seqno) = (e.u64()?, e.u64()?);
                let delete_time = if v2 { Some(e.u32()?) } else { None };
                document(frame, seqno, rev_seqno, 0, 0, delete_time).map(DcpMessage::Deletion)
            }
            Opcode::DcpExpiration => {
                let mut e = Fields::exact(frame, EXPIRATION_EXTRAS_LEN)?;
                let (seqno, rev_seqno) = (e.u64()?, e.u64()?);
                let delete_time = Some(e.u32()?);
                document(frame, seqno, rev_seqno, 0, 0, delete_time).map(DcpMessage::Expiration)
            }
            Opcode::DcpStreamEnd => {
                let code = Fields::exact(frame, STREAM_END_EXTRAS_LEN)?.u32()?;
                no_body(frame)?;
                StreamEndReason::from_code(code)
                    .map(DcpMessage::StreamEnd)
                    .ok_or(DecodeError::UnknownEndReason(code))
            }
            Opcode::DcpSetVbucketState => {
                let state = Fields::exact(frame, SET_VBUCKET_STATE_EXTRAS_LEN)?.u8()?;
                no_body(frame)?;
                VbState::from_wire(u32::from(state))
                    .map(DcpMessage::SetVbucketState)
                    .ok_or(DecodeError::UnknownVbState(state))
            }
            Opcode::DcpSeqnoAdvanced => {
                let seqno = Fields::exact(frame, SEQNO_ADVANCED_EXTRAS_LEN)?.u64()?;
                no_body(frame)?;
                Ok(DcpMessage::SeqnoAdvanced(Seqno(seqno)))
            }
            Opcode::DcpNoop => {
                Fields::exact(frame, 0)?;
                no_body(frame)?;
                Ok(DcpMessage::Noop)
            }
            Opcode::DcpPrepare => {
                let mut e = Fields::exact(frame, PREPARE_EXTRAS_LEN)?;
                let (seqno, rev_seqno) = (e.u64()?, e.u64()?);
                let (flags, expiry, _lock_time) = (e.u32()?, e.u32()?, e.u32()?);
                let (_nru, deleted, level) = (e.u8()?, e.u8()?, e.u8()?);
                let level = DurabilityLevel::from_wire(level)
                    .ok_or(DecodeError::UnknownDurabilityLevel(level))?;
                let doc = document(frame, seqno, rev_seqno, flags, expiry, None)?;
                Ok(DcpMessage::Prepare(DcpPrepare {
                    doc,
                    deleted: deleted != 0,
                    level,
                }))
            }
            Opcode::DcpCommit | Opcode::DcpAbort => {
                let mut e = Fields::exact(frame, COMPLETION_EXTRAS_LEN)?;
                let (prepared_seqno, seqno) = (Seqno(e.u64()?), Seqno(e.u64()?));
                if frame.key.is_empty() {
                    return Err(DecodeError::MissingKey(op));
                }
                if !frame.value.is_empty() {
                    return Err(DecodeError::UnexpectedBody(op));
                }
                let c = DcpCompletion {
                    key: Bytes::copy_from_slice(frame.key),
                    prepared_seqno,
                    seqno,
                };
                Ok(if opcode == Opcode::DcpCommit {
                    DcpMessage::Commit(c)
                } else {
                    DcpMessage::Abort(c)
                })
            }
            _ => Err(not_a_producer_message(op)),
        }
    }
}

/// Producer → consumer opcodes that [`DcpMessage`] does not model yet: system events, OSO
/// snapshots, cache transfer.
fn not_a_producer_message(op: u8) -> DecodeError {
    match op {
        0x5f | 0x65..=0x67 => DecodeError::NotModelled(op),
        _ => DecodeError::NotAProducerMessage(op),
    }
}

/// A marker in any version this server can meet: v1 (fields in the extras) or v2.0 / v2.2
/// (a version byte in the extras, the same three fields at the front of the value).
fn decode_marker(frame: &Frame<'_>) -> Result<SnapshotMarker, DecodeError> {
    let opcode = frame.opcode;
    if !frame.key.is_empty() {
        return Err(DecodeError::UnexpectedBody(opcode));
    }
    let (fields, v2) = match frame.extras.len() {
        SNAPSHOT_MARKER_V1_EXTRAS_LEN => {
            if !frame.value.is_empty() {
                return Err(DecodeError::UnexpectedBody(opcode));
            }
            (frame.extras, false)
        }
        SNAPSHOT_MARKER_V2_EXTRAS_LEN => {
            let want = match frame.extras.first().copied().unwrap_or_default() {
                MARKER_VERSION_2_0 => SNAPSHOT_MARKER_V2_0_VALUE_LEN,
                MARKER_VERSION_2_2 => SNAPSHOT_MARKER_V2_2_VALUE_LEN,
                v => return Err(DecodeError::UnknownMarkerVersion(v)),
            };
            if frame.value.len() != want {
                return Err(DecodeError::BadValue {
                    opcode,
                    len: frame.value.len(),
                });
            }
            (frame.value, true)
        }
        len => return Err(DecodeError::BadExtras { opcode, len }),
    };
    let mut f = Fields {
        opcode,
        len: fields.len(),
        rest: fields,
    };
    let (start, end, flags) = (Seqno(f.u64()?), Seqno(f.u64()?), SnapshotFlags(f.u32()?));
    let sync = if v2 {
        Some(MarkerSeqnos {
            max_visible_seqno: Seqno(f.u64()?),
            high_completed_seqno: Seqno(f.u64()?),
        })
    } else {
        None
    };
    Ok(SnapshotMarker {
        start,
        end,
        flags,
        sync,
    })
}

/// The document of a mutation, deletion or expiration: the key is required (every
/// document has one), the value may be empty, CAS and datatype come from the header.
fn document(
    frame: &Frame<'_>,
    seqno: u64,
    rev_seqno: u64,
    flags: u32,
    expiry: u32,
    delete_time: Option<u32>,
) -> Result<DcpDocument, DecodeError> {
    if frame.key.is_empty() {
        return Err(DecodeError::MissingKey(frame.opcode));
    }
    Ok(DcpDocument {
        key: Bytes::copy_from_slice(frame.key),
        value: Bytes::copy_from_slice(frame.value),
        datatype: Datatype(frame.datatype),
        cas: Cas(frame.cas),
        seqno: Seqno(seqno),
        rev_seqno,
        flags,
        expiry,
        delete_time,
    })
}

fn no_body(frame: &Frame<'_>) -> Result<(), DecodeError> {
    if frame.key.is_empty() && frame.value.is_empty() {
        Ok(())
    } else {
        Err(DecodeError::UnexpectedBody(frame.opcode))
    }
}

/// Reads big-endian fields in order from an extras section of a checked length. Running
/// past the end reports a bad length instead of panicking, so a layout slip in this file
/// can never take a connection down.
struct Fields<'a> {
    opcode: u8,
    len: usize,
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    /// The frame's extras, which must be exactly `len` bytes long.
    fn exact(frame: &Frame<'a>, len: usize) -> Result<Fields<'a>, DecodeError> {
        let got = frame.extras.len();
        if got != len {
            return Err(DecodeError::BadExtras {
                opcode: frame.opcode,
                len: got,
            });
        }
        Ok(Fields {
            opcode: frame.opcode,
            len,
            rest: frame.extras,
        })
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let (head, rest) = self
            .rest
            .split_first_chunk::<N>()
            .ok_or(DecodeError::BadExtras {
                opcode: self.opcode,
                len: self.len,
            })?;
        self.rest = rest;
        Ok(*head)
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        self.take().map(u64::from_be_bytes)
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        self.take().map(u32::from_be_bytes)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        self.take::<1>().map(|[b]| b)
    }
}

/// Extras (or a v2.0 marker's value) being written: the longest is the marker's 36 bytes,
/// so they fit on the stack.
struct ExtrasBuf {
    buf: [u8; SNAPSHOT_MARKER_V2_0_VALUE_LEN],
    len: usize,
}

impl Default for ExtrasBuf {
    fn default() -> Self {
        ExtrasBuf {
            buf: [0; SNAPSHOT_MARKER_V2_0_VALUE_LEN],
            len: 0,
        }
    }
}

impl ExtrasBuf {
    fn put(&mut self, bytes: &[u8]) -> &mut Self {
        self.buf
            .get_mut(self.len..self.len + bytes.len())
            .expect("no message's extras exceed a v2.0 marker's value")
            .copy_from_slice(bytes);
        self.len += bytes.len();
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.put(&v.to_be_bytes())
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.put(&v.to_be_bytes())
    }
    fn u16(&mut self, v: u16) -> &mut Self {
        self.put(&v.to_be_bytes())
    }
    fn u8(&mut self, v: u8) -> &mut Self {
        self.put(&[v])
    }
    fn as_slice(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{decode_frame, Decoded};

    fn doc(key: &'static [u8], value: &'static [u8], delete_time: Option<u32>) -> DcpDocument {
        DcpDocument {
            key: Bytes::from_static(key),
            value: Bytes::from_static(value),
            datatype: Datatype(if value.is_empty() { 0 } else { Datatype::JSON }),
            cas: Cas(0x1234_5678_9abc_def0),
            seqno: Seqno(42),
            rev_seqno: 7,
            flags: 0,
            expiry: 0,
            delete_time,
        }
    }

    fn every_variant() -> Vec<DcpMessage> {
        let mutation = DcpDocument {
            flags: 0xdead_beef,
            expiry: 1_700_000_000,
            datatype: Datatype(Datatype::JSON | Datatype::XATTR),
            ..doc(b"key", b"{\"a\":1}", None)
        };
        let mut messages = vec![
            DcpMessage::SnapshotMarker(SnapshotMarker {
                start: Seqno(1),
                end: Seqno(u64::MAX),
                flags: SnapshotFlags::DISK.with(SnapshotFlags::CHECKPOINT),
                sync: None,
            }),
            DcpMessage::SnapshotMarker(SnapshotMarker {
                start: Seqno(1),
                end: Seqno(9),
                flags: SnapshotFlags::MEMORY,
                sync: Some(MarkerSeqnos {
                    max_visible_seqno: Seqno(8),
                    high_completed_seqno: Seqno(3),
                }),
            }),
            DcpMessage::Prepare(DcpPrepare {
                doc: DcpDocument {
                    flags: 5,
                    expiry: 77,
                    ..doc(b"durable", b"{}", None)
                },
                deleted: false,
                level: DurabilityLevel::PersistToMajority,
            }),
            DcpMessage::Prepare(DcpPrepare {
                doc: doc(b"durable-delete", b"", None),
                deleted: true,
                level: DurabilityLevel::Majority,
            }),
            DcpMessage::Commit(DcpCompletion {
                key: Bytes::from_static(b"durable"),
                prepared_seqno: Seqno(42),
                seqno: Seqno(43),
            }),
            DcpMessage::Abort(DcpCompletion {
                key: Bytes::from_static(b"durable"),
                prepared_seqno: Seqno(44),
                seqno: Seqno(45),
            }),
            DcpMessage::Mutation(mutation),
            DcpMessage::Mutation(doc(b"empty-value", b"", None)),
            DcpMessage::Deletion(doc(b"v1", b"", None)),
            DcpMessage::Deletion(doc(b"v2", b"", Some(1_600_000_000))),
            DcpMessage::Deletion(doc(b"with-xattrs", b"xattr-blob", Some(0))),
            DcpMessage::Expiration(doc(b"ttl", b"", Some(123))),
            DcpMessage::SeqnoAdvanced(Seqno(99)),
            DcpMessage::Noop,
        ];
        for code in 0..9 {
            messages.push(DcpMessage::StreamEnd(
                StreamEndReason::from_code(code).unwrap(),
            ));
        }
        for state in 1..=4 {
            messages.push(DcpMessage::SetVbucketState(
                VbState::from_wire(state).unwrap(),
            ));
        }
        messages
    }

    fn frame_of(bytes: &[u8]) -> Frame<'_> {
        match decode_frame(bytes, 1 << 20) {
            Ok(Decoded::Frame(f, used)) => {
                assert_eq!(used, bytes.len());
                f
            }
            other => panic!("not one whole frame: {other:?}"),
        }
    }

    /// A packet with arbitrary parts, for the rejection tests.
    fn raw(opcode: u8, extras: &[u8], key: &[u8], value: &[u8]) -> Vec<u8> {
        Packet::request(opcode, 0, 0)
            .extras(extras)
            .key(key)
            .value(value)
            .to_vec()
    }

    /// A classic request laid out by hand (24-byte header, then extras, key, value), so the
    /// byte-level tests do not check the encoder against itself.
    fn by_hand(
        opcode: u8,
        (vb, opaque, cas): (u16, u32, u64),
        extras: &[u8],
        key: &[u8],
        value: &[u8],
    ) -> Vec<u8> {
        let body = extras.len() + key.len() + value.len();
        let mut out = vec![0x80, opcode];
        out.extend_from_slice(&(key.len() as u16).to_be_bytes());
        out.push(extras.len() as u8);
        out.push(0); // datatype
        out.extend_from_slice(&vb.to_be_bytes());
        out.extend_from_slice(&(body as u32).to_be_bytes());
        out.extend_from_slice(&opaque.to_be_bytes());
        out.extend_from_slice(&cas.to_be_bytes());
        [out.as_slice(), extras, key, value].concat()
    }

    fn decode_bytes(bytes: &[u8]) -> Result<DcpMessage, DecodeError> {
        DcpMessage::decode(&frame_of(bytes))
    }

    #[test]
    fn every_variant_round_trips() {
        for msg in every_variant() {
            let mut out = vec![0xee; 3]; // encode appends; it must not touch what is there
            let n = msg.encode(VbId(513), 0xfeed_f00d, &mut out);
            assert_eq!(&out[..3], &[0xee; 3]);
            assert_eq!(n, out.len() - 3, "{msg:?}");
            assert_eq!(n, msg.wire_len(), "{msg:?}");
            let f = frame_of(&out[3..]);
            assert_eq!(f.magic, Magic::ClientRequest);
            assert_eq!(f.opcode, msg.opcode().byte());
            assert_eq!((f.vbucket_or_status, f.opaque), (513, 0xfeed_f00d));
            assert_eq!(DcpMessage::decode(&f).as_ref(), Ok(&msg));
        }
    }

    #[test]
    fn only_documents_carry_cas_and_datatype() {
        for msg in every_variant() {
            let mut out = Vec::new();
            msg.encode(VbId(0), 0, &mut out);
            let f = frame_of(&out);
            match &msg {
                DcpMessage::Mutation(d) | DcpMessage::Deletion(d) | DcpMessage::Expiration(d) => {
                    assert_eq!((f.cas, f.datatype), (d.cas.0, d.datatype.0));
                }
                DcpMessage::Prepare(p) => {
                    assert_eq!((f.cas, f.datatype), (p.doc.cas.0, p.doc.datatype.0));
                }
                _ => assert_eq!((f.cas, f.datatype), (0, 0), "{msg:?}"),
            }
        }
    }

    #[test]
    fn mutation_matches_the_spec_byte_for_byte() {
        let msg = DcpMessage::Mutation(DcpDocument {
            key: Bytes::from_static(b"k1"),
            value: Bytes::from_static(b"{}"),
            datatype: Datatype(Datatype::JSON),
            cas: Cas(0x0102_0304_0506_0708),
            seqno: Seqno(5),
            rev_seqno: 2,
            flags: 0xdead_beef,
            expiry: 0x10,
            delete_time: None,
        });
        #[rustfmt::skip]
        let want: Vec<u8> = vec![
            0x80, 0x57, 0x00, 0x02, // magic, DCP_MUTATION, key length 2
            0x1f, 0x01, 0x00, 0x03, // extras 31, datatype JSON, vbucket 3
            0x00, 0x00, 0x00, 0x23, // body 31 + 2 + 2
            0x11, 0x22, 0x33, 0x44, // opaque
            0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // cas
            0, 0, 0, 0, 0, 0, 0, 5, // by_seqno
            0, 0, 0, 0, 0, 0, 0, 2, // rev_seqno
            0xde, 0xad, 0xbe, 0xef, // flags
            0x00, 0x00, 0x00, 0x10, // expiry
            0x00, 0x00, 0x00, 0x00, // lock_time
            0x00, 0x00,             // nmeta
            0x00,                   // nru
            b'k', b'1', b'{', b'}',
        ];
        let mut out = Vec::new();
        assert_eq!(msg.encode(VbId(3), 0x1122_3344, &mut out), want.len());
        assert_eq!(out, want);
        assert_eq!(decode_bytes(&want), Ok(msg));
    }

    #[test]
    fn v2_deletion_matches_the_spec_byte_for_byte() {
        let msg = DcpMessage::Deletion(DcpDocument {
            key: Bytes::from_static(b"doc"),
            value: Bytes::new(),
            datatype: Datatype::RAW,
            cas: Cas(0xaabb_ccdd_eeff_0011),
            seqno: Seqno(0x0100),
            rev_seqno: 9,
            flags: 0,
            expiry: 0,
            delete_time: Some(0x5f5e_1000),
        });
        #[rustfmt::skip]
        let want: Vec<u8> = vec![
            0x80, 0x58, 0x00, 0x03, // magic, DCP_DELETION, key length 3
            0x15, 0x00, 0x03, 0xff, // extras 21, datatype raw, vbucket 1023
            0x00, 0x00, 0x00, 0x18, // body 21 + 3
            0x00, 0x00, 0x00, 0x01, // opaque
            0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00, 0x11, // cas
            0, 0, 0, 0, 0, 0, 0x01, 0x00, // by_seqno
            0, 0, 0, 0, 0, 0, 0, 9,       // rev_seqno
            0x5f, 0x5e, 0x10, 0x00,       // delete_time
            0x00,                         // unused
            b'd', b'o', b'c',
        ];
        let mut out = Vec::new();
        assert_eq!(msg.encode(VbId(1023), 1, &mut out), want.len());
        assert_eq!(out, want);
        assert_eq!(decode_bytes(&want), Ok(msg));
    }

    #[test]
    fn v1_deletion_ignores_nmeta_and_mutation_ignores_lock_time_and_nru() {
        let mut extras = [0u8; DELETION_V1_EXTRAS_LEN];
        extras[7] = 3;
        extras[16..18].copy_from_slice(&[0xff, 0xff]);
        let Ok(DcpMessage::Deletion(d)) = decode_bytes(&raw(0x58, &extras, b"k", b"")) else {
            panic!()
        };
        assert_eq!((d.seqno, d.delete_time), (Seqno(3), None));

        let mut extras = [0xffu8; MUTATION_EXTRAS_LEN];
        extras[..8].copy_from_slice(&4u64.to_be_bytes());
        let Ok(DcpMessage::Mutation(d)) = decode_bytes(&raw(0x57, &extras, b"k", b"v")) else {
            panic!()
        };
        assert_eq!((d.seqno, d.flags, d.expiry), (Seqno(4), u32::MAX, u32::MAX));
    }

    #[test]
    fn sync_write_messages_are_the_documented_bytes() {
        let mut out = Vec::new();
        let prepare = DcpMessage::Prepare(DcpPrepare {
            doc: DcpDocument {
                key: Bytes::from_static(b"k"),
                value: Bytes::from_static(b"v"),
                datatype: Datatype::RAW,
                cas: Cas(0x0102),
                seqno: Seqno(5),
                rev_seqno: 2,
                flags: 0x0a0b_0c0d,
                expiry: 9,
                delete_time: None,
            },
            deleted: true,
            level: DurabilityLevel::MajorityAndPersistOnMaster,
        });
        prepare.encode(VbId(3), 0x11, &mut out);
        let extras = [
            &5u64.to_be_bytes()[..],
            &2u64.to_be_bytes(),
            &0x0a0b_0c0du32.to_be_bytes(),
            &9u32.to_be_bytes(),
            &[0, 0, 0, 0], // lock time
            &[0, 1, 2],    // nru, deleted, level
        ]
        .concat();
        assert_eq!(extras.len(), PREPARE_EXTRAS_LEN);
        assert_eq!(out, by_hand(0x60, (3, 0x11, 0x0102), &extras, b"k", b"v"));

        out.clear();
        let commit = DcpMessage::Commit(DcpCompletion {
            key: Bytes::from_static(b"k"),
            prepared_seqno: Seqno(5),
            seqno: Seqno(6),
        });
        commit.encode(VbId(3), 0x11, &mut out);
        let extras = [&5u64.to_be_bytes()[..], &6u64.to_be_bytes()].concat();
        assert_eq!(out, by_hand(0x62, (3, 0x11, 0), &extras, b"k", b""));

        out.clear();
        let marker = DcpMessage::SnapshotMarker(SnapshotMarker {
            start: Seqno(1),
            end: Seqno(2),
            flags: SnapshotFlags::MEMORY,
            sync: Some(MarkerSeqnos {
                max_visible_seqno: Seqno(2),
                high_completed_seqno: Seqno(0),
            }),
        });
        marker.encode(VbId(0), 0, &mut out);
        let value = [
            &1u64.to_be_bytes()[..],
            &2u64.to_be_bytes(),
            &SnapshotFlags::MEMORY.0.to_be_bytes(),
            &2u64.to_be_bytes(),
            &0u64.to_be_bytes(),
        ]
        .concat();
        assert_eq!(out, by_hand(0x56, (0, 0, 0), &[0x00], b"", &value));
    }

    #[test]
    fn malformed_sync_write_messages_are_refused() {
        let prepare = |level: u8| {
            let mut e = [0u8; PREPARE_EXTRAS_LEN];
            e[30] = level;
            decode_bytes(&raw(0x60, &e, b"k", b""))
        };
        assert!(matches!(prepare(1), Ok(DcpMessage::Prepare(_))));
        assert_eq!(prepare(0), Err(DecodeError::UnknownDurabilityLevel(0)));
        assert_eq!(prepare(4), Err(DecodeError::UnknownDurabilityLevel(4)));
        let e16 = [0u8; COMPLETION_EXTRAS_LEN];
        for op in [0x62, 0x63] {
            assert_eq!(
                decode_bytes(&raw(op, &e16, b"", b"")),
                Err(DecodeError::MissingKey(op))
            );
            assert_eq!(
                decode_bytes(&raw(op, &e16, b"k", b"v")),
                Err(DecodeError::UnexpectedBody(op))
            );
            assert_eq!(
                decode_bytes(&raw(op, &e16[..8], b"k", b"")),
                Err(DecodeError::BadExtras { opcode: op, len: 8 })
            );
        }
        assert_eq!(
            decode_bytes(&raw(0x60, &[0; 30], b"k", b"")),
            Err(DecodeError::BadExtras {
                opcode: 0x60,
                len: 30
            })
        );
    }

    #[test]
    fn decodes_v2_markers() {
        let mut fields = Vec::new();
        fields.extend_from_slice(&10u64.to_be_bytes());
        fields.extend_from_slice(&20u64.to_be_bytes());
        fields.extend_from_slice(&(SnapshotFlags::DISK.0).to_be_bytes());
        let marker = |sync| {
            DcpMessage::SnapshotMarker(SnapshotMarker {
                start: Seqno(10),
                end: Seqno(20),
                flags: SnapshotFlags::DISK,
                sync,
            })
        };
        let v2_0 = [fields.as_slice(), &[0xab; 16]].concat();
        let v2_2 = [fields.as_slice(), &[0xcd; 32]].concat();
        let sync = |b: u8| {
            Some(MarkerSeqnos {
                max_visible_seqno: Seqno(u64::from_be_bytes([b; 8])),
                high_completed_seqno: Seqno(u64::from_be_bytes([b; 8])),
            })
        };
        assert_eq!(
            decode_bytes(&raw(0x56, &[0x00], b"", &v2_0)),
            Ok(marker(sync(0xab)))
        );
        assert_eq!(
            decode_bytes(&raw(0x56, &[0x02], b"", &v2_2)),
            Ok(marker(sync(0xcd)))
        );
        assert_eq!(
            decode_bytes(&raw(0x56, &fields, b"", b"")),
            Ok(marker(None))
        );

        let bad = |e, v: &[u8]| decode_bytes(&raw(0x56, e, b"", v));
        assert_eq!(
            bad(&[0x01], &v2_0),
            Err(DecodeError::UnknownMarkerVersion(1))
        );
        let value_err = |len| Err(DecodeError::BadValue { opcode: 0x56, len });
        assert_eq!(bad(&[0x00], &v2_2), value_err(52));
        assert_eq!(bad(&[0x02], &v2_0), value_err(36));
        assert_eq!(bad(&[0x00], &fields), value_err(20));
        assert_eq!(bad(&[0x00], b""), value_err(0));
        assert_eq!(bad(&fields, b"x"), Err(DecodeError::UnexpectedBody(0x56)));
        assert_eq!(
            decode_bytes(&raw(0x56, &[0x00], b"k", &v2_0)),
            Err(DecodeError::UnexpectedBody(0x56))
        );
    }

    #[test]
    fn rejects_wrong_extras_lengths() {
        let cases: &[(u8, &[usize], &[u8])] = &[
            (0x56, &[0, 2, 19, 21, 36], b""),
            (0x57, &[0, 18, 21, 30, 32], b"k"),
            (0x58, &[0, 17, 19, 20, 22, 31], b"k"),
            (0x59, &[0, 18, 21, 19], b"k"),
            (0x55, &[0, 3, 5, 8], b""),
            (0x5b, &[0, 2, 4], b""),
            (0x64, &[0, 4, 7, 9], b""),
            (0x5c, &[1, 4], b""),
        ];
        for &(opcode, lens, key) in cases {
            for &len in lens {
                let extras = vec![0u8; len];
                assert_eq!(
                    decode_bytes(&raw(opcode, &extras, key, b"")),
                    Err(DecodeError::BadExtras { opcode, len }),
                    "opcode 0x{opcode:02x} extras {len}"
                );
            }
        }
    }

    #[test]
    fn rejects_unknown_reasons_and_states() {
        assert_eq!(
            decode_bytes(&raw(0x55, &9u32.to_be_bytes(), b"", b"")),
            Err(DecodeError::UnknownEndReason(9))
        );
        assert_eq!(
            decode_bytes(&raw(0x55, &u32::MAX.to_be_bytes(), b"", b"")),
            Err(DecodeError::UnknownEndReason(u32::MAX))
        );
        for state in [0u8, 5, 0xff] {
            assert_eq!(
                decode_bytes(&raw(0x5b, &[state], b"", b"")),
                Err(DecodeError::UnknownVbState(state))
            );
        }
    }

    #[test]
    fn rejects_bodies_where_none_belongs_and_documents_without_keys() {
        let bodies: &[(u8, &[u8])] = &[
            (0x55, &[0, 0, 0, 0]),
            (0x5b, &[1]),
            (0x64, &[0; 8]),
            (0x5c, &[]),
        ];
        for &(opcode, extras) in bodies {
            assert_eq!(
                decode_bytes(&raw(opcode, extras, b"k", b"")),
                Err(DecodeError::UnexpectedBody(opcode))
            );
            assert_eq!(
                decode_bytes(&raw(opcode, extras, b"", b"v")),
                Err(DecodeError::UnexpectedBody(opcode))
            );
        }
        for (opcode, len) in [(0x57, 31), (0x58, 18), (0x58, 21), (0x59, 20)] {
            assert_eq!(
                decode_bytes(&raw(opcode, &vec![0; len], b"", b"v")),
                Err(DecodeError::MissingKey(opcode))
            );
        }
    }

    #[test]
    fn rejects_other_opcodes_and_magics() {
        for opcode in [
            0x00, 0x01, 0x50, 0x51, 0x52, 0x53, 0x54, 0x5a, 0x5d, 0x5e, 0x61,
        ] {
            assert_eq!(
                decode_bytes(&raw(opcode, &[], b"", b"")),
                Err(DecodeError::NotAProducerMessage(opcode))
            );
        }
        assert_eq!(
            decode_bytes(&raw(0xee, &[], b"", b"")),
            Err(DecodeError::NotAProducerMessage(0xee))
        );
        for opcode in [0x5f, 0x65, 0x66, 0x67] {
            assert_eq!(
                decode_bytes(&raw(opcode, &[0; 16], b"k", b"")),
                Err(DecodeError::NotModelled(opcode))
            );
        }
        let response = Packet::response(0x5c, crate::Status::Success, 1).to_vec();
        assert_eq!(
            decode_bytes(&response),
            Err(DecodeError::UnsupportedMagic(0x81))
        );
        let with_sid = Packet::request(0x5c, 0, 1)
            .framing_extras(&[0x22, 0x00, 0x01])
            .to_vec();
        assert_eq!(
            decode_bytes(&with_sid),
            Err(DecodeError::UnsupportedMagic(0x08))
        );
    }

    #[test]
    fn never_panics_on_any_shape() {
        // Every opcode with every extras length up to 64, with and without key and value, and
        // a few fill bytes: decoding must return, and whatever it accepts must round-trip.
        for opcode in 0..=u8::MAX {
            for len in 0..=64 {
                for fill in [0x00, 0x02, 0xff] {
                    let extras = vec![fill; len];
                    for (key, value) in
                        [(&b""[..], &b""[..]), (b"k", b""), (b"", b"v"), (b"k", b"v")]
                    {
                        let bytes = raw(opcode, &extras, key, value);
                        if let Ok(msg) = decode_bytes(&bytes) {
                            let mut out = Vec::new();
                            msg.encode(VbId(0), 0, &mut out);
                            assert_eq!(decode_bytes(&out), Ok(msg));
                        }
                    }
                }
            }
        }
    }
}
