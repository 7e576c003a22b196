//! Sub-document requests byte by byte: single-path extras, the multi-path spec lists, and
//! what is refused.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use sluice_proto::encode::Packet;
use sluice_proto::request::{
    validate, Command, DocFlags, KvCommand, SubdocCommand, SubdocOp, SubdocSpec, ValidateCtx,
};
use sluice_proto::{decode_frame, Decoded, Status};

const CTX: ValidateCtx = ValidateCtx {
    datatype_allowed: 0x01,
    value_bytes_max: 1024,
};

fn check(packet: Packet<'_>) -> Result<SubdocCommand<'static>, Status> {
    let bytes: &'static [u8] = Box::leak(packet.to_vec().into_boxed_slice());
    let Decoded::Frame(frame, _) = decode_frame(bytes, 1 << 20).unwrap() else {
        panic!("whole packet")
    };
    match validate(&frame, &CTX)?.command {
        Command::Kv(KvCommand::Subdoc(s)) => Ok(s),
        other => panic!("not a sub-document command: {other:?}"),
    }
}

fn single(op: u8, extras: &[u8], body: &[u8]) -> Result<SubdocCommand<'static>, Status> {
    let extras: &'static [u8] = Box::leak(extras.to_vec().into_boxed_slice());
    let body: &'static [u8] = Box::leak(body.to_vec().into_boxed_slice());
    check(
        Packet::request(op, 0, 1)
            .key(b"doc")
            .extras(extras)
            .value(body),
    )
}

fn spec(op: SubdocOp, flags: u8, path: &'static str, value: &'static str) -> SubdocSpec<'static> {
    SubdocSpec {
        op,
        flags: sluice_proto::request::PathFlags(flags),
        path: path.as_bytes(),
        value: value.as_bytes(),
    }
}

#[test]
fn single_path_extras_of_every_length() {
    // get "a.b": path length 3, no flags.
    let c = single(0xc5, &[0, 3, 0], b"a.b").unwrap();
    assert_eq!(c.specs, vec![spec(SubdocOp::Get, 0, "a.b", "")]);
    assert_eq!((c.expiry, c.doc_flags, c.multi), (None, DocFlags(0), false));
    assert!(!c.is_mutation());
    // dict_upsert "x" = 1 with mkdir_p, doc flags mkdoc.
    let c = single(0xc8, &[0, 1, 0x01, 0x01], b"x1").unwrap();
    assert_eq!(c.specs, vec![spec(SubdocOp::DictUpsert, 1, "x", "1")]);
    assert_eq!(c.doc_flags, DocFlags(DocFlags::MKDOC));
    assert!(c.is_mutation());
    // counter with an expiry of 60 s.
    let c = single(0xcf, &[0, 1, 0, 0, 0, 0, 60], b"n5").unwrap();
    assert_eq!((c.expiry, c.specs[0].value), (Some(60), &b"5"[..]));
    // replace with expiry and doc flags (add).
    let c = single(0xca, &[0, 1, 0, 0, 0, 1, 0, 0x02], b"xv").unwrap();
    assert_eq!(
        (c.expiry, c.doc_flags),
        (Some(256), DocFlags(DocFlags::ADD))
    );
    // get_count.
    assert_eq!(
        single(0xd2, &[0, 1, 0], b"l").unwrap().specs[0].op,
        SubdocOp::GetCount
    );
    // dict_upsert with expiry and user flags (11), then with doc flags too (12).
    let c = single(0xc8, &[0, 1, 0, 0, 0, 0, 9, 0x02, 0, 0, 0], b"x1").unwrap();
    assert_eq!(
        (c.expiry, c.user_flags, c.doc_flags),
        (Some(9), Some(0x0200_0000), DocFlags(0))
    );
    let c = single(0xc8, &[0, 1, 0x04, 0, 0, 0, 0, 0, 0, 0, 7, 0x0d], b"x1").unwrap();
    assert_eq!(
        (c.expiry, c.user_flags, c.doc_flags),
        (
            Some(0),
            Some(7),
            DocFlags(DocFlags::MKDOC | DocFlags::ACCESS_DELETED | DocFlags::CREATE_AS_DELETED)
        )
    );
    // replace_body_with_xattr names an xattr path and takes no value.
    let c = single(0xd3, &[0, 3, 0x04, 0x14], b"t.s").unwrap();
    assert_eq!(
        c.specs,
        vec![spec(SubdocOp::ReplaceBodyWithXattr, 4, "t.s", "")]
    );
    assert!(c.is_mutation());
}

/// What is wrong, opcode, extras, body, the status it gets.
type Refusal = (&'static str, u8, &'static [u8], &'static [u8], Status);

#[test]
fn single_path_refusals() {
    let rows: &[Refusal] = &[
        (
            "lookup with an expiry",
            0xc5,
            &[0, 1, 0, 0, 0, 0, 1],
            b"a",
            Status::Einval,
        ),
        ("extras of 5", 0xc8, &[0, 1, 0, 0, 0], b"a1", Status::Einval),
        (
            "path longer than the body",
            0xc5,
            &[0, 9, 0],
            b"a",
            Status::Einval,
        ),
        (
            "a value on a lookup",
            0xc5,
            &[0, 1, 0],
            b"ab",
            Status::Einval,
        ),
        (
            "a value on a delete",
            0xc9,
            &[0, 1, 0],
            b"ab",
            Status::Einval,
        ),
        (
            "unknown path flag",
            0xc5,
            &[0, 1, 0x02],
            b"a",
            Status::Einval,
        ),
        (
            "unknown doc flag",
            0xc5,
            &[0, 1, 0, 0x40],
            b"a",
            Status::Einval,
        ),
        (
            "mkdoc with add",
            0xc8,
            &[0, 1, 0, 0x03],
            b"a1",
            Status::Einval,
        ),
        (
            "revive without access-deleted",
            0xc8,
            &[0, 1, 0x04, 0x10],
            b"a1",
            Status::Einval,
        ),
        (
            "revive with create-as-deleted",
            0xc8,
            &[0, 1, 0x04, 0x1d],
            b"a1",
            Status::Einval,
        ),
        (
            "create-as-deleted without mkdoc or add",
            0xc8,
            &[0, 1, 0x04, 0x0c],
            b"a1",
            Status::Einval,
        ),
        (
            "create-as-deleted on a body path",
            0xc8,
            &[0, 1, 0, 0x09],
            b"a1",
            Status::Einval,
        ),
        (
            "replace_body_with_xattr on a body path",
            0xd3,
            &[0, 1, 0, 0x14],
            b"a",
            Status::Einval,
        ),
        (
            "replace_body_with_xattr with a value",
            0xd3,
            &[0, 1, 0x04, 0x14],
            b"a1",
            Status::Einval,
        ),
        (
            "replica read on a mutation",
            0xc8,
            &[0, 1, 0, 0x20],
            b"a1",
            Status::Einval,
        ),
        (
            "extras of 9",
            0xc8,
            &[0, 1, 0, 0, 0, 0, 0, 0, 0],
            b"a1",
            Status::Einval,
        ),
    ];
    for (what, op, extras, body, want) in rows {
        assert_eq!(single(*op, extras, body).err(), Some(*want), "{what}");
    }
}

fn lookup_spec(op: u8, flags: u8, path: &[u8]) -> Vec<u8> {
    let mut v = vec![op, flags];
    v.extend_from_slice(&(path.len() as u16).to_be_bytes());
    v.extend_from_slice(path);
    v
}

fn mutation_spec(op: u8, flags: u8, path: &[u8], value: &[u8]) -> Vec<u8> {
    let mut v = vec![op, flags];
    v.extend_from_slice(&(path.len() as u16).to_be_bytes());
    v.extend_from_slice(&(value.len() as u32).to_be_bytes());
    v.extend_from_slice(path);
    v.extend_from_slice(value);
    v
}

fn multi(op: u8, extras: &[u8], body: Vec<u8>) -> Result<SubdocCommand<'static>, Status> {
    single(op, extras, &body)
}

#[test]
fn multi_path_lists() {
    let mut body = lookup_spec(0xc5, 0x04, b"$document.exptime");
    body.extend(lookup_spec(0x00, 0, b""));
    body.extend(lookup_spec(0xd2, 0, b"tags"));
    let c = multi(0xd0, &[], body).unwrap();
    assert!(c.multi);
    assert_eq!(
        c.specs,
        vec![
            spec(SubdocOp::Get, 0x04, "$document.exptime", ""),
            spec(SubdocOp::GetDoc, 0, "", ""),
            spec(SubdocOp::GetCount, 0, "tags", ""),
        ]
    );

    let mut body = mutation_spec(0xc8, 0x01, b"a.b", b"{\"x\":1}");
    body.extend(mutation_spec(0xcf, 0, b"n", b"-2"));
    body.extend(mutation_spec(0xc9, 0, b"gone", b""));
    let c = multi(0xd1, &[0, 0, 0, 10, 0x01], body).unwrap();
    assert_eq!(
        (c.expiry, c.doc_flags),
        (Some(10), DocFlags(DocFlags::MKDOC))
    );
    assert_eq!(
        c.specs,
        vec![
            spec(SubdocOp::DictUpsert, 1, "a.b", "{\"x\":1}"),
            spec(SubdocOp::Counter, 0, "n", "-2"),
            spec(SubdocOp::Delete, 0, "gone", ""),
        ]
    );
}

#[test]
fn multi_path_refusals() {
    let lookups = |n: usize| {
        (0..n)
            .flat_map(|_| lookup_spec(0xc5, 0, b"a"))
            .collect::<Vec<_>>()
    };
    assert!(multi(0xd0, &[], lookups(16)).is_ok());
    assert_eq!(
        multi(0xd0, &[], lookups(17)).err(),
        Some(Status::SubdocInvalidCombo)
    );
    // A mutation inside a lookup, and a lookup inside a mutation.
    assert_eq!(
        multi(0xd0, &[], mutation_spec(0xc8, 0, b"a", b"1")).err(),
        Some(Status::SubdocInvalidCombo)
    );
    let mut body = mutation_spec(0xc8, 0, b"a", b"1");
    body.extend(lookup_spec(0xc5, 0, b"a"));
    assert!(multi(0xd1, &[], body).is_err());
    // Truncated specs, an unknown spec opcode, an empty list, bad extras.
    let mut cut = lookup_spec(0xc5, 0, b"abc");
    cut.pop();
    assert_eq!(multi(0xd0, &[], cut).err(), Some(Status::Einval));
    assert_eq!(
        multi(0xd0, &[], lookup_spec(0x99, 0, b"a")).err(),
        Some(Status::UnknownCommand)
    );
    assert_eq!(multi(0xd0, &[], vec![]).err(), Some(Status::Einval));
    assert_eq!(
        multi(0xd0, &[0, 0, 0, 1], lookups(1)).err(),
        Some(Status::Einval)
    );
    assert_eq!(
        multi(0xd1, &[0, 0], mutation_spec(0xc8, 0, b"a", b"1")).err(),
        Some(Status::Einval)
    );
    // Xattr paths come first, in lookups and mutations.
    let mut body = lookup_spec(0xc5, 0, b"a");
    body.extend(lookup_spec(0xc5, 0x04, b"x"));
    assert_eq!(
        multi(0xd0, &[], body).err(),
        Some(Status::SubdocInvalidXattrOrder)
    );
    let mut body = mutation_spec(0xc8, 0, b"a", b"1");
    body.extend(mutation_spec(0xc8, 0x04, b"x", b"1"));
    assert_eq!(
        multi(0xd1, &[], body).err(),
        Some(Status::SubdocInvalidXattrOrder)
    );
    // Replica reads are lookups.
    assert!(multi(0xd0, &[0x20], lookups(1)).is_ok());
    assert_eq!(
        multi(0xd1, &[0x20], mutation_spec(0xc8, 0, b"a", b"1")).err(),
        Some(Status::Einval)
    );
    // Revive needs access-deleted.
    assert_eq!(
        multi(0xd1, &[0x10], mutation_spec(0xc8, 0x04, b"x", b"1")).err(),
        Some(Status::Einval)
    );
}

#[test]
fn multi_path_user_flags_and_tombstone_flags() {
    // A staged insert as gocbcore's transactions send it: expiry 0, user flags, then
    // create-as-deleted | access-deleted | add.
    let mut body = mutation_spec(0xc7, 0x05, b"txn", b"{}");
    body.extend(mutation_spec(
        0xc8,
        0x14,
        b"txn.op.crc32",
        b"\"${Mutation.value_crc32c}\"",
    ));
    let c = multi(0xd1, &[0, 0, 0, 0, 0x02, 0, 0, 0, 0x0e], body).unwrap();
    assert_eq!(
        (c.expiry, c.user_flags, c.doc_flags),
        (
            Some(0),
            Some(0x0200_0000),
            DocFlags(DocFlags::ADD | DocFlags::ACCESS_DELETED | DocFlags::CREATE_AS_DELETED)
        )
    );
    // Expiry and user flags without doc flags (8).
    let c = multi(
        0xd1,
        &[0, 0, 0, 5, 0, 0, 0, 1],
        mutation_spec(0xc8, 0, b"a", b"1"),
    )
    .unwrap();
    assert_eq!((c.expiry, c.user_flags), (Some(5), Some(1)));
    // A commit as gocbcore sends it: replace the body with the staged xattr, drop "txn".
    let mut body = mutation_spec(0xd3, 0x04, b"txn.op.stgd", b"");
    body.extend(mutation_spec(0xc9, 0x04, b"txn", b""));
    let c = multi(0xd1, &[0x14], body).unwrap();
    assert_eq!(c.specs[0].op, SubdocOp::ReplaceBodyWithXattr);
    assert_eq!(
        c.doc_flags,
        DocFlags(DocFlags::ACCESS_DELETED | DocFlags::REVIVE)
    );
}
