//! DCP_PREPARE, DCP_COMMIT, DCP_ABORT and v2.x snapshot markers on the wire, byte for byte
//! against protocol.md §2.5 / §4.4. The expected packets are written out as literal bytes
//! (not built with the encoder or `to_be_bytes`), so a wrong field order or width shows here
//! even if the encoder and decoder agree with each other.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use bytes::Bytes;
use sluice_proto::dcp::message::{
    DcpCompletion, DcpDocument, DcpPrepare, MarkerSeqnos, SnapshotMarker,
};
use sluice_proto::dcp::{DcpMessage, DecodeError, SnapshotFlags};
use sluice_proto::encode::Packet;
use sluice_proto::{decode_frame, Decoded};
use sluice_types::{Cas, Datatype, DurabilityLevel, Seqno, VbId};

fn decode(bytes: &[u8]) -> Result<DcpMessage, DecodeError> {
    match decode_frame(bytes, 1 << 20).unwrap() {
        Decoded::Frame(f, used) => {
            assert_eq!(used, bytes.len(), "one whole frame");
            DcpMessage::decode(&f)
        }
        Decoded::Incomplete { .. } => panic!("not one whole frame"),
    }
}

/// Encodes `msg`, checks it against `want` and the encoder's own length, and decodes it back.
fn check_bytes(msg: &DcpMessage, vb: u16, opaque: u32, want: &[u8]) {
    let mut out = Vec::new();
    let n = msg.encode(VbId(vb), opaque, &mut out);
    assert_eq!(out, want, "{msg:?}");
    assert_eq!(n, want.len());
    assert_eq!(msg.wire_len(), want.len());
    assert_eq!(decode(want).as_ref(), Ok(msg));
}

/// A packet with arbitrary parts, for the rejections.
fn raw(opcode: u8, extras: &[u8], key: &[u8], value: &[u8]) -> Vec<u8> {
    Packet::request(opcode, 0, 0)
        .extras(extras)
        .key(key)
        .value(value)
        .to_vec()
}

fn prepare() -> DcpPrepare {
    DcpPrepare {
        doc: DcpDocument {
            key: Bytes::from_static(b"k1"),
            value: Bytes::from_static(b"{}"),
            datatype: Datatype(Datatype::JSON),
            cas: Cas(0x0102_0304_0506_0708),
            seqno: Seqno(5),
            rev_seqno: 2,
            flags: 0xdead_beef,
            expiry: 0x10,
            delete_time: None,
        },
        deleted: false,
        level: DurabilityLevel::MajorityAndPersistOnMaster,
    }
}

fn completion() -> DcpCompletion {
    DcpCompletion {
        key: Bytes::from_static(b"doc"),
        prepared_seqno: Seqno(0x0100),
        seqno: Seqno(0x0102),
    }
}

fn marker(sync: Option<MarkerSeqnos>) -> DcpMessage {
    DcpMessage::SnapshotMarker(SnapshotMarker {
        start: Seqno(10),
        end: Seqno(20),
        flags: SnapshotFlags::DISK.with(SnapshotFlags::CHECKPOINT),
        sync,
    })
}

const SYNC: MarkerSeqnos = MarkerSeqnos {
    max_visible_seqno: Seqno(19),
    high_completed_seqno: Seqno(7),
};

#[test]
fn prepare_is_the_documented_bytes() {
    #[rustfmt::skip]
    let want: &[u8] = &[
        0x80, 0x60, 0x00, 0x02, // magic, DCP_PREPARE, key length 2
        0x1f, 0x01, 0x00, 0x03, // extras 31, datatype JSON, vbucket 3
        0x00, 0x00, 0x00, 0x23, // body 31 + 2 + 2
        0x11, 0x22, 0x33, 0x44, // opaque
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // cas: the document's
        0, 0, 0, 0, 0, 0, 0, 5, // by_seqno
        0, 0, 0, 0, 0, 0, 0, 2, // rev_seqno
        0xde, 0xad, 0xbe, 0xef, // flags
        0x00, 0x00, 0x00, 0x10, // expiry
        0x00, 0x00, 0x00, 0x00, // lock_time
        0x00,                   // nru
        0x00,                   // deleted
        0x02,                   // durability level: majority and persist on master
        b'k', b'1', b'{', b'}',
    ];
    check_bytes(&DcpMessage::Prepare(prepare()), 3, 0x1122_3344, want);
}

#[test]
fn a_durable_delete_sets_the_deleted_byte() {
    let p = DcpPrepare {
        doc: DcpDocument {
            value: Bytes::new(),
            datatype: Datatype::RAW,
            flags: 0,
            expiry: 0,
            ..prepare().doc
        },
        deleted: true,
        level: DurabilityLevel::PersistToMajority,
    };
    #[rustfmt::skip]
    let want: &[u8] = &[
        0x80, 0x60, 0x00, 0x02, // magic, DCP_PREPARE, key length 2
        0x1f, 0x00, 0x00, 0x03, // extras 31, datatype raw, vbucket 3
        0x00, 0x00, 0x00, 0x21, // body 31 + 2
        0x11, 0x22, 0x33, 0x44, // opaque
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // cas
        0, 0, 0, 0, 0, 0, 0, 5, // by_seqno
        0, 0, 0, 0, 0, 0, 0, 2, // rev_seqno
        0, 0, 0, 0,             // flags
        0, 0, 0, 0,             // expiry
        0, 0, 0, 0,             // lock_time
        0x00,                   // nru
        0x01,                   // deleted
        0x03,                   // durability level: persist to majority
        b'k', b'1',
    ];
    check_bytes(&DcpMessage::Prepare(p), 3, 0x1122_3344, want);
}

#[test]
fn commit_is_the_documented_bytes() {
    #[rustfmt::skip]
    let want: &[u8] = &[
        0x80, 0x62, 0x00, 0x03, // magic, DCP_COMMIT, key length 3
        0x10, 0x00, 0x03, 0xff, // extras 16, datatype raw, vbucket 1023
        0x00, 0x00, 0x00, 0x13, // body 16 + 3
        0x00, 0x00, 0x00, 0x01, // opaque
        0, 0, 0, 0, 0, 0, 0, 0, // cas: none (the prepare carried the document's)
        0, 0, 0, 0, 0, 0, 0x01, 0x00, // prepared_seqno
        0, 0, 0, 0, 0, 0, 0x01, 0x02, // commit_seqno
        b'd', b'o', b'c',
    ];
    check_bytes(&DcpMessage::Commit(completion()), 1023, 1, want);
}

#[test]
fn abort_is_the_documented_bytes() {
    #[rustfmt::skip]
    let want: &[u8] = &[
        0x80, 0x63, 0x00, 0x03, // magic, DCP_ABORT, key length 3
        0x10, 0x00, 0x03, 0xff, // extras 16, datatype raw, vbucket 1023
        0x00, 0x00, 0x00, 0x13, // body 16 + 3
        0x00, 0x00, 0x00, 0x01, // opaque
        0, 0, 0, 0, 0, 0, 0, 0, // cas
        0, 0, 0, 0, 0, 0, 0x01, 0x00, // prepared_seqno
        0, 0, 0, 0, 0, 0, 0x01, 0x02, // abort_seqno
        b'd', b'o', b'c',
    ];
    check_bytes(&DcpMessage::Abort(completion()), 1023, 1, want);
}

#[test]
fn a_marker_with_sync_seqnos_is_v2_0() {
    #[rustfmt::skip]
    let want: &[u8] = &[
        0x80, 0x56, 0x00, 0x00, // magic, DCP_SNAPSHOT_MARKER, no key
        0x01, 0x00, 0x00, 0x03, // extras 1, datatype raw, vbucket 3
        0x00, 0x00, 0x00, 0x25, // body 1 + 36
        0x11, 0x22, 0x33, 0x44, // opaque
        0, 0, 0, 0, 0, 0, 0, 0, // cas
        0x00,                   // extras: version 2.0
        0, 0, 0, 0, 0, 0, 0, 10, // value: start
        0, 0, 0, 0, 0, 0, 0, 20, // end
        0x00, 0x00, 0x00, 0x06,  // flags: disk | checkpoint
        0, 0, 0, 0, 0, 0, 0, 19, // max_visible_seqno
        0, 0, 0, 0, 0, 0, 0, 7,  // high_completed_seqno
    ];
    check_bytes(&marker(Some(SYNC)), 3, 0x1122_3344, want);
}

#[test]
fn a_marker_without_sync_seqnos_stays_v1() {
    #[rustfmt::skip]
    let want: &[u8] = &[
        0x80, 0x56, 0x00, 0x00, // magic, DCP_SNAPSHOT_MARKER, no key
        0x14, 0x00, 0x00, 0x03, // extras 20, datatype raw, vbucket 3
        0x00, 0x00, 0x00, 0x14, // body 20
        0x11, 0x22, 0x33, 0x44, // opaque
        0, 0, 0, 0, 0, 0, 0, 0, // cas
        0, 0, 0, 0, 0, 0, 0, 10, // start
        0, 0, 0, 0, 0, 0, 0, 20, // end
        0x00, 0x00, 0x00, 0x06,  // flags
    ];
    check_bytes(&marker(None), 3, 0x1122_3344, want);
}

#[test]
fn a_v2_2_marker_decodes_to_its_v2_0_fields() {
    #[rustfmt::skip]
    let value: &[u8] = &[
        0, 0, 0, 0, 0, 0, 0, 10, // start
        0, 0, 0, 0, 0, 0, 0, 20, // end
        0x00, 0x00, 0x00, 0x06,  // flags
        0, 0, 0, 0, 0, 0, 0, 19, // max_visible_seqno
        0, 0, 0, 0, 0, 0, 0, 7,  // high_completed_seqno
        0, 0, 0, 0, 0, 0, 0, 3,  // purge_seqno: dropped
        0, 0, 0, 0, 0, 0, 0, 18, // high_prepared_seqno: dropped
    ];
    assert_eq!(
        decode(&raw(0x56, &[0x02], b"", value)),
        Ok(marker(Some(SYNC)))
    );
    // Re-encoded, it is the v2.0 marker: this server never writes v2.2.
    let mut out = Vec::new();
    marker(Some(SYNC)).encode(VbId(0), 0, &mut out);
    assert_eq!(out, raw(0x56, &[0x00], b"", &value[..36]));
}

#[test]
fn decoding_ignores_what_the_messages_do_not_carry() {
    // A prepare's lock time and nru, and any non-zero `deleted` byte (a C bool).
    let mut e = [0u8; 31];
    e[7] = 5;
    e[24..29].copy_from_slice(&[0xff; 5]);
    e[29] = 0x7f;
    e[30] = 1;
    let Ok(DcpMessage::Prepare(p)) = decode(&raw(0x60, &e, b"k", b"")) else {
        panic!("a valid prepare")
    };
    assert_eq!((p.doc.seqno, p.deleted), (Seqno(5), true));
    assert_eq!(
        (p.level, p.doc.delete_time),
        (DurabilityLevel::Majority, None)
    );

    // A commit's header CAS and datatype.
    let e = [0u8; 16];
    let commit = Packet::request(0x62, 0, 0)
        .cas(9)
        .datatype(1)
        .extras(&e)
        .key(b"k")
        .to_vec();
    assert!(matches!(decode(&commit), Ok(DcpMessage::Commit(_))));
}

#[test]
fn malformed_messages_are_refused() {
    for len in [0, 16, 30, 32] {
        assert_eq!(
            decode(&raw(0x60, &vec![1; len], b"k", b"v")),
            Err(DecodeError::BadExtras { opcode: 0x60, len })
        );
    }
    let mut e = [0u8; 31];
    for level in [0u8, 4, 0xff] {
        e[30] = level;
        assert_eq!(
            decode(&raw(0x60, &e, b"k", b"v")),
            Err(DecodeError::UnknownDurabilityLevel(level))
        );
    }
    e[30] = 1;
    assert_eq!(
        decode(&raw(0x60, &e, b"", b"v")),
        Err(DecodeError::MissingKey(0x60))
    );

    for opcode in [0x62, 0x63] {
        for len in [0, 8, 15, 17, 31] {
            assert_eq!(
                decode(&raw(opcode, &vec![0; len], b"k", b"")),
                Err(DecodeError::BadExtras { opcode, len })
            );
        }
        assert_eq!(
            decode(&raw(opcode, &[0; 16], b"", b"")),
            Err(DecodeError::MissingKey(opcode))
        );
        assert_eq!(
            decode(&raw(opcode, &[0; 16], b"k", b"v")),
            Err(DecodeError::UnexpectedBody(opcode))
        );
    }

    // v2.x markers: the value length must match the version byte.
    for (version, len) in [(0x00, 52), (0x00, 35), (0x02, 36), (0x02, 0)] {
        assert_eq!(
            decode(&raw(0x56, &[version], b"", &vec![0; len])),
            Err(DecodeError::BadValue { opcode: 0x56, len })
        );
    }
}
