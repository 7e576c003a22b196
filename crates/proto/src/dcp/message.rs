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
/// DCP_SYSTEM_EVENT: `u64 by_seqno, u32 event id, u8 version`.
pub const SYSTEM_EVENT_EXTRAS_LEN: usize = 13;
/// `u64 by_seqno, u64 rev_seqno, u32 flags, u32 expiry, u32 lock_time, u8 nru, u8 deleted,
/// u8 durability_level`.
pub const PREPARE_EXTRAS_LEN: usize = 31;
/// `u64 prepared_seqno, u64 commit_seqno` (or `abort_seqno`).
pub const COMPLETION_EXTRAS_LEN: usize = 16;

/// The framing extras naming a stream (frame info id 2, two bytes), if it has an id.
fn stream_id_frame(stream_id: Option<u16>) -> Option<[u8; 3]> {
    stream_id.map(|sid| {
        let [hi, lo] = sid.to_be_bytes();
        [0x22, hi, lo]
    })
}

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

/// DCP_SYSTEM_EVENT: a scope or collection made or dropped, at `seqno` of the vbucket.
/// `key` is the name (empty for drops); `value` the event's fixed fields (manifest uid,
/// scope id, collection id, maxTTL as the event and version have them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DcpSystemEvent {
    pub seqno: Seqno,
    pub event: u32,
    pub version: u8,
    pub key: Bytes,
    pub value: Bytes,
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
    SystemEvent(DcpSystemEvent),
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
            DcpMessage::SystemEvent(_) => Opcode::DcpSystemEvent,
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
        self.encode_for_stream(vb, opaque, None, out)
    }

    /// [`DcpMessage::encode`] for a stream the consumer gave an id (`enable_stream_id`):
    /// the id goes in a stream-id frame info (id 2), so the message is an alt request
    /// (magic 0x08). `None` encodes exactly as `encode`.
    pub fn encode_for_stream(
        &self,
        vb: VbId,
        opaque: u32,
        stream_id: Option<u16>,
        out: &mut Vec<u8>,
    ) -> usize {
        let before = out.len();
        let frame = stream_id_frame(stream_id);
        let fe: &[u8] = frame.as_ref().map_or(&[], |f| f.as_slice());
        self.with_packet(vb, opaque, |p| (*p).framing_extras(fe).encode_into(out));
        out.len() - before
    }

    /// The exact number of bytes [`DcpMessage::encode`] appends: what flow control counts.
    pub fn wire_len(&self) -> usize {
        // Built through the same packet description as `encode`, so the two cannot drift.
        self.with_packet(VbId(0), 0, |p| p.wire_len())
    }

    /// The bytes [`DcpMessage::encode_for_stream`] appends.
    pub fn wire_len_for_stream(&self, stream_id: Option<u16>) -> usize {
        self.wire_len() + stream_id_frame(stream_id).map_or(0, |f| f.len())
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
            DcpMessage::SystemEvent(e) => {
                extras.u64(e.seqno.0).u32(e.event).u8(e.version);
                packet = packet.key(&e.key).value(&e.value);
                None
            }
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

    /// Decodes a producer message from a frame whose magic is 0x80, or 0x08 with a stream id
    /// in its framing extras (the inverse of
    /// [`DcpMessage::encode`]; the frame's vbucket and opaque stay with the caller).
    ///
    /// Accepts v1 and v2.x snapshot markers (v2.2's purge and high prepared seqnos are
    /// dropped), v1 and v2 deletions. Lock time, nmeta and nru of a mutation are ignored, as are the header's
    /// datatype and CAS on messages that carry no document. Never panics.
    pub fn decode(frame: &Frame<'_>) -> Result<DcpMessage, DecodeError> {
        // Alt requests carry a stream id (read by the caller from the framing extras).
        if !matches!(frame.magic, Magic::ClientRequest | Magic::AltClientRequest) {
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
            Opcode::DcpSystemEvent => {
                let mut e = Fields::exact(frame, SYSTEM_EVENT_EXTRAS_LEN)?;
                let (seqno, event, version) = (Seqno(e.u64()?), e.u32()?, e.u8()?);
                Ok(DcpMessage::SystemEvent(DcpSystemEvent {
                    seqno,
                    event,
                    version,
                    key: Bytes::copy_from_slice(frame.key),
                    value: Bytes::copy_from_slice(frame.value),
                }))
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

/// Producer → consumer opcodes that [`DcpMessage`] does not model yet: OSO snapshots,
/// cache transfer.
fn not_a_producer_message(op: u8) -> DecodeError {
    match op {
        0x65..=0x67 => DecodeError::NotModelled(op),
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
mod tests;
