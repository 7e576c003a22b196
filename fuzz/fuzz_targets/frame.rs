//! Framing + validation of client packets, as a connection's read loop would see them.
//!
//! The input is a byte stream: packets are decoded back to back with `decode_frame` until it
//! reports an error or `Incomplete`. For every decoded frame the target checks:
//! - the header arithmetic (`used == wire_len`, `used <= buf.len()`);
//! - the roundtrip property: an `encode::Packet` built from the frame's parts re-encodes to
//!   exactly the consumed bytes;
//! - partial reads: every cut of the packet (a few representative ones) is `Incomplete` with
//!   a `needed` consistent with the header, never a frame or an error;
//! - the body limit: the same packet with a limit one byte below its body is `TooLarge`;
//! - `request::validate` under a permissive and a strict `ValidateCtx`, and that whatever it
//!   accepts is consistent with the frame (header fields, key limits, datatype bits, value
//!   size, frame infos, durability only on mutations).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_proto::encode::Packet;
use sluice_proto::frame_info::parse_frame_infos;
use sluice_proto::request::{validate, Command, KvCommand, SessionCommand, StoreOp, ValidateCtx};
use sluice_proto::{decode_frame, Decoded, Frame, FrameError, Magic, HEADER_LEN};
use sluice_types::limits::{KEY_BYTES_MAX, PACKET_BODY_BYTES_MAX, VALUE_BYTES_MAX_DEFAULT};
use sluice_types::{Cas, Datatype};

const CTXS: [ValidateCtx; 2] = [
    // What a session that negotiated every datatype uses.
    ValidateCtx {
        datatype_allowed: Datatype::KNOWN,
        value_bytes_max: VALUE_BYTES_MAX_DEFAULT,
    },
    // Nothing negotiated, tiny values: exercises the E2BIG and datatype rejections.
    ValidateCtx {
        datatype_allowed: 0,
        value_bytes_max: 4,
    },
];

fuzz_target!(|data: &[u8]| {
    let mut buf = data;
    loop {
        match decode_frame(buf, PACKET_BODY_BYTES_MAX) {
            Err(e) => {
                check_error(buf, &e);
                break;
            }
            Ok(Decoded::Incomplete { needed }) => {
                assert!(
                    needed > buf.len(),
                    "Incomplete needs {needed} of {}",
                    buf.len()
                );
                if buf.len() < HEADER_LEN {
                    assert_eq!(needed, HEADER_LEN);
                }
                break;
            }
            Ok(Decoded::Frame(frame, used)) => {
                assert!(used >= HEADER_LEN && used <= buf.len());
                assert_eq!(used, frame.wire_len());
                let packet = &buf[..used];
                check_roundtrip(&frame, packet);
                check_partial_reads(packet);
                check_body_limit(packet);
                for ctx in &CTXS {
                    check_validate(&frame, ctx);
                }
                buf = &buf[used..];
            }
        }
    }
});

fn check_error(buf: &[u8], e: &FrameError) {
    match *e {
        FrameError::BadMagic(b) => {
            assert_eq!(b, buf[0]);
            assert!(Magic::from_byte(b).is_none());
        }
        FrameError::InconsistentLengths { body, parts } => {
            assert!(buf.len() >= HEADER_LEN);
            assert!(parts > body);
        }
        FrameError::TooLarge { body, max } => {
            assert!(buf.len() >= HEADER_LEN);
            assert!(body > max);
        }
    }
}

fn check_roundtrip(frame: &Frame<'_>, packet: &[u8]) {
    let p = Packet {
        magic: frame.magic,
        opcode: frame.opcode,
        datatype: frame.datatype,
        vbucket_or_status: frame.vbucket_or_status,
        opaque: frame.opaque,
        cas: frame.cas,
        framing_extras: frame.framing_extras,
        extras: frame.extras,
        key: frame.key,
        value: frame.value,
    };
    assert_eq!(p.wire_len(), packet.len());
    let encoded = p.to_vec();
    assert_eq!(
        encoded, packet,
        "re-encoded packet differs from the consumed bytes"
    );
}

fn check_partial_reads(packet: &[u8]) {
    let n = packet.len();
    for cut in [0, 1, HEADER_LEN - 1, HEADER_LEN, n - 1] {
        if cut >= n {
            continue;
        }
        match decode_frame(&packet[..cut], PACKET_BODY_BYTES_MAX) {
            Ok(Decoded::Incomplete { needed }) => {
                let want = if cut < HEADER_LEN { HEADER_LEN } else { n };
                assert_eq!(needed, want, "cut at {cut} of {n}");
            }
            other => panic!("cut at {cut} of {n}: {other:?}"),
        }
    }
}

fn check_body_limit(packet: &[u8]) {
    let body = packet.len() - HEADER_LEN;
    if body > 0 {
        assert_eq!(
            decode_frame(packet, body - 1),
            Err(FrameError::TooLarge {
                body,
                max: body - 1
            })
        );
    }
    assert!(matches!(decode_frame(packet, body), Ok(Decoded::Frame(_, n)) if n == packet.len()));
}

fn check_validate(f: &Frame<'_>, ctx: &ValidateCtx) {
    let Ok(req) = validate(f, ctx) else {
        return;
    };
    assert_eq!(req.opcode.byte(), f.opcode);
    assert_eq!(req.vb.0, f.vbucket_or_status);
    assert_eq!(req.opaque, f.opaque);
    assert_eq!(req.cas, Cas(f.cas));
    assert_eq!(req.datatype.0, f.datatype);
    assert_eq!(req.quiet, req.opcode.is_quiet());
    assert_eq!(Ok(req.frame_infos), parse_frame_infos(f.framing_extras));
    if req.frame_infos.durability.is_some() {
        assert!(req.command.is_mutation(), "durability on {:?}", req.opcode);
    }
    if let Some(key) = req.command.key() {
        assert!(!key.is_empty() && key.len() <= KEY_BYTES_MAX);
        assert_eq!(key, f.key);
    }
    match &req.command {
        Command::Kv(KvCommand::Store { value, .. } | KvCommand::Concat { value, .. }) => {
            assert_eq!(*value, f.value);
            assert!(value.len() <= ctx.value_bytes_max);
            assert_eq!(f.datatype & !Datatype::KNOWN, 0);
            assert_eq!(f.datatype & !ctx.datatype_allowed, 0);
            if matches!(
                &req.command,
                Command::Kv(KvCommand::Store {
                    op: StoreOp::Add,
                    ..
                })
            ) {
                assert_eq!(f.cas, 0, "ADD with a CAS");
            }
        }
        _ => assert_eq!(f.datatype, 0, "datatype on a non-document command"),
    }
    if let Command::Session(SessionCommand::Hello { features, agent }) = &req.command {
        assert_eq!(features.len() * 2, f.value.len());
        assert_eq!(*agent, f.key);
    }
}
