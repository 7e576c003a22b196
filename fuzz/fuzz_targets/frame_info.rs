//! `frame_info::parse_frame_infos` on arbitrary framing extras.
//!
//! Checks:
//! - it never panics, and only answers `Einval`, `UnknownFrameInfo` or
//!   `DurabilityInvalidLevel` on bad input;
//! - what it accepts is well-formed (durability timeout never 0 or 0xffff) and survives a
//!   canonical re-encoding with `encode_frame_info` (parses back to the same `FrameInfos`);
//! - the same bytes as the framing extras of a real alt-request SET (magic 0x08) give the
//!   same answer through `decode_frame` + `request::validate`, i.e. the two layers agree.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_proto::encode::Packet;
use sluice_proto::frame_info::{encode_frame_info, parse_frame_infos};
use sluice_proto::request::{validate, ValidateCtx};
use sluice_proto::{decode_frame, Decoded, FrameInfos, Opcode, Status};
use sluice_types::limits::{PACKET_BODY_BYTES_MAX, VALUE_BYTES_MAX_DEFAULT};
use sluice_types::Datatype;

fuzz_target!(|data: &[u8]| {
    let parsed = parse_frame_infos(data);
    match parsed {
        Ok(fi) => {
            if let Some((_, Some(t))) = fi.durability {
                assert!(t != 0 && t != 0xffff, "durability timeout {t}");
            }
            assert_eq!(parse_frame_infos(&canonical(&fi)), Ok(fi));
        }
        Err(s) => assert!(
            matches!(
                s,
                Status::Einval | Status::UnknownFrameInfo | Status::DurabilityInvalidLevel
            ),
            "unexpected status {s:?}"
        ),
    }

    // Alt-request framing carries at most 255 bytes of framing extras.
    if data.len() <= 255 {
        let extras = [0u8; 8]; // flags, expiry
        let bytes = Packet::request(Opcode::Set.byte(), 0, 1)
            .extras(&extras)
            .key(b"k")
            .value(b"v")
            .framing_extras(data)
            .to_vec();
        let Ok(Decoded::Frame(frame, used)) = decode_frame(&bytes, PACKET_BODY_BYTES_MAX) else {
            panic!("a well-formed alt request did not decode");
        };
        assert_eq!(used, bytes.len());
        assert_eq!(frame.framing_extras, data);
        let ctx = ValidateCtx {
            datatype_allowed: Datatype::KNOWN,
            value_bytes_max: VALUE_BYTES_MAX_DEFAULT,
        };
        // SET is a mutation, so every frame info it may carry is acceptable: validation must
        // fail exactly when the frame infos do, with the same status.
        assert_eq!(validate(&frame, &ctx).map(|r| r.frame_infos), parsed);
    }
});

/// The shortest encoding of `fi`, in id order.
fn canonical(fi: &FrameInfos) -> Vec<u8> {
    let mut out = Vec::new();
    if fi.barrier {
        encode_frame_info(&mut out, 0, &[]);
    }
    if let Some((level, timeout)) = fi.durability {
        let mut d = vec![level as u8];
        if let Some(t) = timeout {
            d.extend_from_slice(&t.to_be_bytes());
        }
        encode_frame_info(&mut out, 1, &d);
    }
    if let Some(sid) = fi.stream_id {
        encode_frame_info(&mut out, 2, &sid.to_be_bytes());
    }
    if fi.preserve_ttl {
        encode_frame_info(&mut out, 5, &[]);
    }
    out
}
