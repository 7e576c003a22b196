//! Per-opcode syntax rules: each row is a request and the status validation must give.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use sluice_proto::encode::Packet;
use sluice_proto::request::{
    validate, Command, DcpCommand, KvCommand, SessionCommand, ValidateCtx, VbucketCommand,
};
use sluice_proto::{decode_frame, Decoded, Status};
use sluice_types::{MapVersion, Seqno, VbState};

const CTX: ValidateCtx = ValidateCtx {
    datatype_allowed: 0x01,
    value_bytes_max: 1024,
};

fn check(packet: Packet<'_>) -> Result<Command<'static>, Status> {
    let bytes: &'static [u8] = Box::leak(packet.to_vec().into_boxed_slice());
    let Decoded::Frame(frame, _) = decode_frame(bytes, 1 << 20).unwrap() else {
        panic!("whole packet")
    };
    validate(&frame, &CTX).map(|r| r.command)
}

fn req(op: u8) -> Packet<'static> {
    Packet::request(op, 0, 1)
}

#[test]
fn rejects_what_each_opcode_does_not_allow() {
    // 251 bytes is a key behind a one-byte collection prefix; the server checks a key
    // without collections against 250 when it qualifies it.
    let long_key = [b'k'; 252];
    let big = [0u8; 1025];
    let rows: Vec<(&str, Packet<'_>, Status)> = vec![
        ("get without key", req(0x00), Status::Einval),
        (
            "get with extras",
            req(0x00).key(b"k").extras(&[0; 4]),
            Status::Einval,
        ),
        (
            "get with value",
            req(0x00).key(b"k").value(b"v"),
            Status::Einval,
        ),
        ("key of 252 bytes", req(0x00).key(&long_key), Status::Einval),
        (
            "set with 7 bytes of extras",
            req(0x01).key(b"k").extras(&[0; 7]),
            Status::Einval,
        ),
        (
            "set too large",
            req(0x01).key(b"k").extras(&[0; 8]).value(&big),
            Status::E2big,
        ),
        (
            "set with un-negotiated snappy",
            req(0x01).key(b"k").extras(&[0; 8]).datatype(0x02),
            Status::Einval,
        ),
        (
            "set with unknown datatype bit",
            req(0x01).key(b"k").extras(&[0; 8]).datatype(0x08),
            Status::Einval,
        ),
        (
            "add with a cas",
            req(0x02).key(b"k").extras(&[0; 8]).cas(5),
            Status::Einval,
        ),
        (
            "get with a datatype",
            req(0x00).key(b"k").datatype(0x01),
            Status::Einval,
        ),
        (
            "incr with short extras",
            req(0x05).key(b"k").extras(&[0; 8]),
            Status::Einval,
        ),
        ("noop with a key", req(0x0a).key(b"k"), Status::Einval),
        (
            "hello with an odd feature list",
            req(0x1f).value(&[0, 3, 0]),
            Status::Einval,
        ),
        (
            "error map with no version",
            req(0xfe).value(&[0, 0]),
            Status::Einval,
        ),
        (
            "observe seqno with a short uuid",
            req(0x91).value(&[0; 7]),
            Status::Einval,
        ),
        (
            "all vb seqnos with a bad state",
            req(0x48).extras(&[0, 0, 0, 9]),
            Status::Einval,
        ),
        ("unknown opcode", req(0xee), Status::UnknownCommand),
        (
            "durability on a get",
            req(0x00).key(b"k").framing_extras(&[0x11, 0x01]),
            Status::Einval,
        ),
        (
            "unknown frame info",
            req(0x00).key(b"k").framing_extras(&[0x30]),
            Status::UnknownFrameInfo,
        ),
        (
            "bad durability level",
            req(0x01)
                .key(b"k")
                .extras(&[0; 8])
                .framing_extras(&[0x11, 0x07]),
            Status::DurabilityInvalidLevel,
        ),
    ];
    for (name, packet, want) in rows {
        assert_eq!(check(packet).err(), Some(want), "{name}");
    }
}

#[test]
fn accepts_well_formed_requests_with_their_fields() {
    let extras = [0, 0, 0, 7, 0, 0, 0, 60];
    let c = check(
        req(0x01)
            .key(b"k")
            .extras(&extras)
            .value(b"{}")
            .datatype(0x01),
    )
    .unwrap();
    assert!(matches!(
        c,
        Command::Kv(KvCommand::Store {
            flags: 7,
            expiry: 60,
            ..
        })
    ));
    let mut arith = Vec::new();
    arith.extend_from_slice(&5u64.to_be_bytes());
    arith.extend_from_slice(&9u64.to_be_bytes());
    arith.extend_from_slice(&u32::MAX.to_be_bytes());
    let c = check(req(0x06).key(b"n").extras(&arith)).unwrap();
    assert!(matches!(
        c,
        Command::Kv(KvCommand::Arithmetic {
            increment: false,
            delta: 5,
            initial: 9,
            expiry: u32::MAX,
            ..
        })
    ));
    let c = check(req(0x1f).key(b"agent").value(&[0, 3, 0, 4])).unwrap();
    assert!(
        matches!(c, Command::Session(SessionCommand::Hello { ref features, .. }) if features == &vec![3, 4])
    );
    let known = [1u64.to_be_bytes(), 7u64.to_be_bytes()].concat();
    let c = check(req(0xb5).extras(&known)).unwrap();
    assert!(matches!(
        c,
        Command::Session(SessionCommand::GetClusterConfig {
            known: Some(MapVersion { epoch: 1, rev: 7 })
        })
    ));
    let c = check(
        req(0x01)
            .key(b"k")
            .extras(&[0; 8])
            .framing_extras(&[0x13, 0x02, 0x01, 0x00]),
    )
    .unwrap();
    assert!(matches!(c, Command::Kv(KvCommand::Store { .. })));
    // DCP_SEQNO_ACKNOWLEDGED: the standard 8 bytes, or Sluice's 16 with the persisted seqno.
    let c = check(req(0x61).extras(&9u64.to_be_bytes())).unwrap();
    assert!(matches!(
        c,
        Command::Dcp(DcpCommand::SeqnoAck {
            in_memory: Seqno(9),
            persisted: None
        })
    ));
    let mut both = 9u64.to_be_bytes().to_vec();
    both.extend_from_slice(&4u64.to_be_bytes());
    let c = check(req(0x61).extras(&both)).unwrap();
    assert!(matches!(
        c,
        Command::Dcp(DcpCommand::SeqnoAck {
            in_memory: Seqno(9),
            persisted: Some(Seqno(4))
        })
    ));
    assert_eq!(check(req(0x61).extras(&[0; 4])).err(), Some(Status::Einval));
    assert_eq!(
        check(req(0x61).extras(&[0; 8]).key(b"k")).err(),
        Some(Status::Einval)
    );
}

#[test]
fn get_all_vb_seqnos_names_its_state_filter() {
    let state = |extras: &[u8]| match check(req(0x48).extras(extras)) {
        Ok(Command::Vbucket(VbucketCommand::GetAllVbSeqnos { state })) => Ok(state),
        Ok(other) => panic!("{other:?}"),
        Err(status) => Err(status),
    };
    assert_eq!(state(&[]), Ok(None), "no filter");
    assert_eq!(state(&[0, 0, 0, 0]), Ok(None), "0: any alive state");
    assert_eq!(state(&[0, 0, 0, 2]), Ok(Some(VbState::Replica)));
    // With a collection id after the state.
    assert_eq!(state(&[0, 0, 0, 1, 0, 0, 0, 8]), Ok(Some(VbState::Active)));
    assert_eq!(state(&[0, 0, 0, 5]), Err(Status::Einval));
}

#[test]
fn with_meta_requests_carry_their_version_and_drop_legacy_ext_meta() {
    use sluice_proto::request::{WithMeta, WithMetaOp, WithMetaOptions};
    let mut fixed = Vec::new();
    fixed.extend_from_slice(&7u32.to_be_bytes()); // flags
    fixed.extend_from_slice(&1_900_000_000u32.to_be_bytes()); // absolute expiry
    fixed.extend_from_slice(&42u64.to_be_bytes()); // rev seqno
    fixed.extend_from_slice(&0x1234u64.to_be_bytes()); // cas
    let meta = |options: u32| WithMeta {
        flags: 7,
        expiry: 1_900_000_000,
        rev_seqno: 42,
        cas: 0x1234,
        options: WithMetaOptions(options),
    };
    let with = |tail: &[u8]| [&fixed[..], tail].concat();
    let e24 = with(&[]);
    assert_eq!(
        check(req(0xa2).key(b"k").extras(&e24).value(b"{}")),
        Ok(Command::Kv(KvCommand::WithMeta {
            op: WithMetaOp::Set,
            key: b"k",
            value: b"{}",
            meta: meta(0),
        }))
    );
    // 26: a legacy ext-meta length, its bytes end the value.
    let e26 = with(&3u16.to_be_bytes());
    assert_eq!(
        check(req(0xa4).key(b"k").extras(&e26).value(b"{}xyz")),
        Ok(Command::Kv(KvCommand::WithMeta {
            op: WithMetaOp::Add,
            key: b"k",
            value: b"{}",
            meta: meta(0),
        }))
    );
    // 28: options; 30: options and ext-meta length.
    let e28 = with(&0x18u32.to_be_bytes());
    // What a sender writes is what is read back.
    assert_eq!(meta(0x18).extras().to_vec(), e28);
    assert_eq!(WithMetaOp::Delete.opcode().byte(), 0xa8);
    assert_eq!(
        check(req(0xa8).key(b"k").extras(&e28)),
        Ok(Command::Kv(KvCommand::WithMeta {
            op: WithMetaOp::Delete,
            key: b"k",
            value: b"",
            meta: meta(0x18),
        }))
    );
    let e30 = with(&[0, 0, 0, 0x0c, 0, 1]);
    assert!(matches!(
        check(req(0xa3).key(b"k").extras(&e30).value(b"vX")),
        Ok(Command::Kv(KvCommand::WithMeta { value: b"v", .. }))
    ));
    let (regen, expiration, unknown) = (
        with(&0x04u32.to_be_bytes()),
        with(&0x10u32.to_be_bytes()),
        with(&0x100u32.to_be_bytes()),
    );
    let refused: Vec<(&str, Packet<'_>)> = vec![
        ("25 bytes of extras", req(0xa2).key(b"k").extras(&[0; 25])),
        ("no key", req(0xa2).extras(&e24)),
        (
            "ext-meta longer than the value",
            req(0xa2).key(b"k").extras(&e26).value(b"v"),
        ),
        (
            "regenerate CAS with conflict resolution",
            req(0xa2).key(b"k").extras(&regen),
        ),
        (
            "is-expiration on a set",
            req(0xa2).key(b"k").extras(&expiration),
        ),
        ("an unknown option", req(0xa8).key(b"k").extras(&unknown)),
    ];
    for (what, p) in refused {
        assert_eq!(check(p), Err(Status::Einval), "{what}");
    }
    assert!(WithMetaOptions(0x01).check_conflicts() == WithMetaOptions(0x08).check_conflicts());
}
