//! The producer messages' encoding, decoding and sizes: round trips of every variant,
//! byte-level layouts against protocol.md, and the rejections.

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
        DcpMessage::SystemEvent(DcpSystemEvent {
            seqno: Seqno(7),
            event: 0,
            version: 1,
            key: Bytes::from_static(b"hotel"),
            value: Bytes::from_static(&[
                0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 8, 0, 0, 0, 9, 0, 0, 0, 60,
            ]),
        }),
        DcpMessage::SystemEvent(DcpSystemEvent {
            seqno: Seqno(8),
            event: 1,
            version: 0,
            key: Bytes::new(),
            value: Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 8, 0, 0, 0, 9]),
        }),
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
    for opcode in [0x65, 0x66, 0x67] {
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
    let server_request = Packet::server_request(0x5c, 1).to_vec();
    assert_eq!(
        decode_bytes(&server_request),
        Err(DecodeError::UnsupportedMagic(0x82))
    );
}

#[test]
fn with_a_stream_id_every_variant_is_an_alt_request_naming_it() {
    for msg in every_variant() {
        let mut out = Vec::new();
        let n = msg.encode_for_stream(VbId(7), 9, Some(0x0102), &mut out);
        assert_eq!(n, out.len());
        assert_eq!(n, msg.wire_len_for_stream(Some(0x0102)), "{msg:?}");
        assert_eq!(n, msg.wire_len() + 3, "{msg:?}");
        let f = frame_of(&out);
        assert_eq!(f.magic, Magic::AltClientRequest);
        assert_eq!(f.framing_extras, &[0x22, 0x01, 0x02]);
        let infos = crate::frame_info::parse_frame_infos(f.framing_extras).unwrap();
        assert_eq!(infos.stream_id, Some(0x0102));
        assert_eq!((f.vbucket_or_status, f.opaque), (7, 9));
        assert_eq!(DcpMessage::decode(&f).as_ref(), Ok(&msg));
        let mut plain = Vec::new();
        msg.encode_for_stream(VbId(7), 9, None, &mut plain);
        assert_eq!(
            frame_of(&plain).magic,
            Magic::ClientRequest,
            "no id: classic"
        );
    }
}

#[test]
fn never_panics_on_any_shape() {
    // Every opcode with every extras length up to 64, with and without key and value, and
    // a few fill bytes: decoding must return, and whatever it accepts must round-trip.
    for opcode in 0..=u8::MAX {
        for len in 0..=64 {
            for fill in [0x00, 0x02, 0xff] {
                let extras = vec![fill; len];
                for (key, value) in [(&b""[..], &b""[..]), (b"k", b""), (b"", b"v"), (b"k", b"v")] {
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
