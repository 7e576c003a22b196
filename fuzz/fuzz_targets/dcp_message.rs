//! DCP producer messages as a consumer's read loop sees them: packets decoded back to back
//! with `decode_frame`, each handed to `DcpMessage::decode`.
//!
//! For every frame the target checks:
//! - a rejection names what is actually wrong with the frame (its magic, opcode, extras
//!   length, reason code or state byte);
//! - the roundtrip property: whatever decodes re-encodes (with the frame's vbucket and
//!   opaque) to a single classic request of exactly `wire_len` bytes, which decodes back to
//!   the same message, with the same CAS and datatype for documents (prepares included) and
//!   none otherwise. A v2.0 marker comes back as one (a v2.2 marker's extra seqnos are not
//!   kept, so it re-encodes as v2.0: same fields, shorter value).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_proto::dcp::{DcpMessage, DecodeError, StreamEndReason};
use sluice_proto::{decode_frame, Decoded, Frame, Magic};
use sluice_types::limits::PACKET_BODY_BYTES_MAX;
use sluice_types::{VbId, VbState};

fuzz_target!(|data: &[u8]| {
    let mut buf = data;
    while let Ok(Decoded::Frame(frame, used)) = decode_frame(buf, PACKET_BODY_BYTES_MAX) {
        match DcpMessage::decode(&frame) {
            Ok(msg) => check_roundtrip(&frame, &msg),
            Err(e) => check_rejection(&frame, &e),
        }
        buf = &buf[used..];
    }
});

fn check_roundtrip(frame: &Frame<'_>, msg: &DcpMessage) {
    assert_eq!(frame.magic, Magic::ClientRequest);
    assert_eq!(frame.opcode, msg.opcode().byte());

    let mut out = vec![0xa5]; // encode appends after whatever is there
    let n = msg.encode(VbId(frame.vbucket_or_status), frame.opaque, &mut out);
    assert_eq!(out[0], 0xa5);
    assert_eq!(n, out.len() - 1);
    assert_eq!(n, msg.wire_len());

    let Ok(Decoded::Frame(again, used)) = decode_frame(&out[1..], PACKET_BODY_BYTES_MAX) else {
        panic!("re-encoded {msg:?} is not a frame");
    };
    assert_eq!(used, n);
    assert_eq!(again.magic, Magic::ClientRequest);
    assert_eq!(again.opcode, frame.opcode);
    assert_eq!(again.vbucket_or_status, frame.vbucket_or_status);
    assert_eq!(again.opaque, frame.opaque);
    assert!(again.framing_extras.is_empty());
    match msg {
        DcpMessage::Mutation(d)
        | DcpMessage::Deletion(d)
        | DcpMessage::Expiration(d)
        | DcpMessage::Prepare(sluice_proto::dcp::message::DcpPrepare { doc: d, .. }) => {
            assert_eq!((again.cas, again.datatype), (frame.cas, frame.datatype));
            assert_eq!((again.key, again.value), (frame.key, frame.value));
            assert_eq!((&d.key[..], &d.value[..]), (frame.key, frame.value));
        }
        DcpMessage::Commit(c) | DcpMessage::Abort(c) => {
            assert_eq!((again.cas, again.datatype), (0, 0));
            assert_eq!(&c.key[..], frame.key);
            assert!(!again.key.is_empty() && again.value.is_empty());
        }
        DcpMessage::SnapshotMarker(m) if m.sync.is_some() => {
            assert_eq!((again.cas, again.datatype), (0, 0));
            assert!(again.key.is_empty() && again.value.len() == 36);
        }
        _ => {
            assert_eq!((again.cas, again.datatype), (0, 0));
            assert!(again.key.is_empty() && again.value.is_empty());
        }
    }
    assert_eq!(DcpMessage::decode(&again).as_ref(), Ok(msg));
}

fn check_rejection(frame: &Frame<'_>, e: &DecodeError) {
    let is_request = frame.magic == Magic::ClientRequest;
    match *e {
        DecodeError::UnsupportedMagic(m) => {
            assert_eq!(m, frame.magic.byte());
            assert!(!is_request);
        }
        DecodeError::NotAProducerMessage(op) | DecodeError::NotModelled(op) => {
            assert!(is_request);
            assert_eq!(op, frame.opcode);
        }
        DecodeError::BadExtras { opcode, len } => {
            assert!(is_request);
            assert_eq!((opcode, len), (frame.opcode, frame.extras.len()));
        }
        DecodeError::UnexpectedBody(op) => {
            assert!(is_request);
            assert_eq!(op, frame.opcode);
            assert!(!frame.key.is_empty() || !frame.value.is_empty());
        }
        DecodeError::MissingKey(op) => {
            assert!(is_request);
            assert_eq!(op, frame.opcode);
            assert!(frame.key.is_empty());
        }
        DecodeError::UnknownMarkerVersion(v) => {
            assert!(is_request);
            assert_eq!(frame.extras, &[v]);
        }
        DecodeError::BadValue { opcode, len } => {
            assert!(is_request);
            assert_eq!((opcode, len), (frame.opcode, frame.value.len()));
        }
        DecodeError::UnknownEndReason(code) => {
            assert!(is_request);
            assert_eq!(frame.extras, code.to_be_bytes());
            assert!(StreamEndReason::from_code(code).is_none());
        }
        DecodeError::UnknownVbState(state) => {
            assert!(is_request);
            assert_eq!(frame.extras, &[state]);
            assert!(VbState::from_wire(u32::from(state)).is_none());
        }
        DecodeError::UnknownDurabilityLevel(level) => {
            assert!(is_request);
            assert_eq!(frame.extras.last(), Some(&level));
            assert!(sluice_types::DurabilityLevel::from_wire(level).is_none());
        }
    }
}
