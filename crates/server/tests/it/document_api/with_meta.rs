//! SET / ADD / DEL_WITH_META over a real socket, byte by byte: a version made elsewhere is
//! stored with its own CAS, revision, flags, expiry and xattrs when it wins conflict
//! resolution by revision (KEY_EEXISTS when it loses, tombstones included); the options
//! word (skip conflict resolution, regenerate CAS, force-accept refused); and the
//! `replication_target` role that such writes need.

use super::xattr_values::{with_section, xattr};
use crate::common::kv_peer::{Answer, Kv};
use sluice_client::admin_http::{self, Body, Method};
use sluice_client::Credentials;
use sluice_proto::encode::Packet;
use sluice_types::vbucket_of;
use std::net::SocketAddr;
use std::time::Duration;

const VBS: u16 = 16;
const XATTR: u16 = 0x06;
const XERROR: u16 = 0x07;
const JSON: u16 = 0x0b;
const DT_JSON: u8 = 0x01;
const DT_XATTR: u8 = 0x04;
const KEY_ENOENT: u16 = 0x01;
const KEY_EEXISTS: u16 = 0x02;
const EINVAL: u16 = 0x04;
const EACCESS: u16 = 0x24;
/// A CAS from "another cluster": far above what this node's clock hands out now.
const REMOTE_CAS: u64 = 0x7000_0000_0000_0000;

fn vb(key: &[u8]) -> u16 {
    vbucket_of(key, VBS).0
}

/// The 24 fixed bytes of extras, and the options word when `options` is given.
fn extras(flags: u32, expiry: u32, rev: u64, cas: u64, options: Option<u32>) -> Vec<u8> {
    let mut e = Vec::new();
    e.extend_from_slice(&flags.to_be_bytes());
    e.extend_from_slice(&expiry.to_be_bytes());
    e.extend_from_slice(&rev.to_be_bytes());
    e.extend_from_slice(&cas.to_be_bytes());
    if let Some(o) = options {
        e.extend_from_slice(&o.to_be_bytes());
    }
    e
}

struct Op<'a> {
    opcode: u8,
    key: &'a [u8],
    rev: u64,
    cas: u64,
    value: &'a [u8],
    datatype: u8,
    options: Option<u32>,
}

impl Op<'_> {
    fn set<'a>(key: &'a [u8], rev: u64, cas: u64, value: &'a [u8]) -> Op<'a> {
        Op {
            opcode: 0xa2,
            key,
            rev,
            cas,
            value,
            datatype: DT_JSON,
            options: None,
        }
    }
}

async fn with_meta(kv: &mut Kv, op: Op<'_>) -> Answer {
    let e = extras(7, 0, op.rev, op.cas, op.options);
    kv.call(
        Packet::request(op.opcode, vb(op.key), 9)
            .key(op.key)
            .extras(&e)
            .datatype(op.datatype)
            .value(op.value),
    )
    .await
}

/// GET_META asking for the datatype: (deleted, flags, expiry, rev, datatype, cas).
async fn meta(kv: &mut Kv, key: &[u8]) -> (u32, u32, u32, u64, u8, u64) {
    let a = kv
        .call(Packet::request(0xa0, vb(key), 3).key(key).extras(&[2]))
        .await;
    assert_eq!(a.status, 0, "GET_META {key:?}");
    let e = &a.extras;
    let u32_at = |i: usize| u32::from_be_bytes(e[i..i + 4].try_into().unwrap());
    (
        u32_at(0),
        u32_at(4),
        u32_at(8),
        u64::from_be_bytes(e[12..20].try_into().unwrap()),
        e[20],
        a.cas,
    )
}

async fn put_user(admin: SocketAddr, name: &str, roles: &str) {
    let who = Credentials::new("Administrator", "password");
    let form = [("roles", roles), ("password", "s3cret-pw")];
    let a = admin_http::send(
        &Default::default(),
        &admin.to_string(),
        &who,
        Method::PUT,
        &format!("/settings/rbac/users/local/{name}"),
        Body::Form(&form),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert!(a.ok(), "user {name}: {} {}", a.status, a.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_made_elsewhere_are_stored_by_revision() {
    let dir = tempfile::tempdir().unwrap();
    let c =
        crate::common::loopback_config(dir.path(), sluice_engine::BucketType::Couchbase, VBS, 64);
    let node = sluice_manager::start(c).await.unwrap();
    let mut kv = Kv::open_with_features(
        node.kv_addr,
        "Administrator",
        "password",
        &[XATTR, XERROR, JSON],
    )
    .await;

    // A new key takes the version as sent: its CAS, revision and flags.
    let a = with_meta(&mut kv, Op::set(b"doc", 10, REMOTE_CAS, br#"{"v":1}"#)).await;
    assert_eq!((a.status, a.cas), (0, REMOTE_CAS));
    assert_eq!(
        meta(&mut kv, b"doc").await,
        (0, 7, 0, 10, DT_JSON, REMOTE_CAS)
    );

    // Fewer revisions lose, whatever the CAS; so does the same version again.
    let behind = with_meta(&mut kv, Op::set(b"doc", 9, u64::MAX >> 1, br#"{"v":0}"#)).await;
    assert_eq!(behind.status, KEY_EEXISTS);
    let same = with_meta(&mut kv, Op::set(b"doc", 10, REMOTE_CAS, br#"{"v":1}"#)).await;
    assert_eq!(same.status, KEY_EEXISTS);
    assert_eq!(kv.get(b"doc", vb(b"doc")).await.value, br#"{"v":1}"#);

    // More revisions win, xattrs and all.
    let value = with_section(&[("_sync", r#"{"rev":"11-a"}"#)], br#"{"v":2}"#);
    let ahead = with_meta(
        &mut kv,
        Op {
            datatype: DT_JSON | DT_XATTR,
            ..Op::set(b"doc", 11, REMOTE_CAS - 5, &value)
        },
    )
    .await;
    assert_eq!((ahead.status, ahead.cas), (0, REMOTE_CAS - 5));
    assert_eq!(kv.get(b"doc", vb(b"doc")).await.value, br#"{"v":2}"#);
    let x = xattr(&mut kv, b"doc", b"_sync.rev").await;
    assert_eq!((x.status, &x.value[..]), (0, &br#""11-a""#[..]));
    let (_, _, _, rev, datatype, _) = meta(&mut kv, b"doc").await;
    assert_eq!((rev, datatype & DT_XATTR), (11, DT_XATTR));

    // A local write after it: a CAS above the remote one, the next revision.
    let local = kv.set(b"doc", br#"{"v":3}"#, vb(b"doc")).await;
    assert!(
        local.status == 0 && local.cas > REMOTE_CAS,
        "{:x}",
        local.cas
    );
    assert_eq!(meta(&mut kv, b"doc").await.3, 12);

    // ADD_WITH_META needs no live document; DEL_WITH_META leaves a tombstone that still
    // takes part in conflict resolution.
    let add = with_meta(
        &mut kv,
        Op {
            opcode: 0xa4,
            ..Op::set(b"doc", 99, 1, b"{}")
        },
    )
    .await;
    assert_eq!(add.status, KEY_EEXISTS);
    let del = with_meta(
        &mut kv,
        Op {
            opcode: 0xa8,
            datatype: 0,
            ..Op::set(b"doc", 13, REMOTE_CAS + 1, b"")
        },
    )
    .await;
    assert_eq!(del.status, 0);
    assert_eq!(kv.get(b"doc", vb(b"doc")).await.status, KEY_ENOENT);
    let (deleted, _, _, rev, _, cas) = meta(&mut kv, b"doc").await;
    assert_eq!((deleted, rev, cas), (1, 13, REMOTE_CAS + 1));
    let stale = with_meta(
        &mut kv,
        Op {
            opcode: 0xa4,
            ..Op::set(b"doc", 12, 1, b"{}")
        },
    )
    .await;
    assert_eq!(stale.status, KEY_EEXISTS, "behind the tombstone");
    let revived = with_meta(
        &mut kv,
        Op {
            opcode: 0xa4,
            ..Op::set(b"doc", 14, 1, br#"{"v":4}"#)
        },
    )
    .await;
    assert_eq!(revived.status, 0);
    assert_eq!(kv.get(b"doc", vb(b"doc")).await.value, br#"{"v":4}"#);
    // A deletion's value is xattrs only.
    let body = with_meta(
        &mut kv,
        Op {
            opcode: 0xa8,
            datatype: 0,
            ..Op::set(b"doc", 20, 1, b"a body")
        },
    )
    .await;
    assert_eq!(body.status, EINVAL);

    // Options: skipping conflict resolution takes anything, regenerating the CAS gives a
    // local one; force-accept is for last-write-wins buckets.
    let forced = with_meta(
        &mut kv,
        Op {
            options: Some(0x08 | 0x04),
            ..Op::set(b"doc", 1, 5, br#"{"v":5}"#)
        },
    )
    .await;
    assert_eq!(forced.status, 0);
    assert!(forced.cas != 5 && forced.cas > REMOTE_CAS);
    assert_eq!(meta(&mut kv, b"doc").await.3, 1);
    let lww = with_meta(
        &mut kv,
        Op {
            options: Some(0x02),
            ..Op::set(b"doc", 50, 5, b"{}")
        },
    )
    .await;
    assert_eq!(lww.status, EINVAL);

    // Who may: replication_target, not a data_writer.
    put_user(node.admin_addr, "writer", "data_writer[default]").await;
    put_user(node.admin_addr, "target", "replication_target[default]").await;
    let mut writer =
        Kv::open_with_features(node.kv_addr, "writer", "s3cret-pw", &[XERROR, JSON]).await;
    let refused = with_meta(&mut writer, Op::set(b"other", 1, REMOTE_CAS, b"{}")).await;
    assert_eq!(refused.status, EACCESS);
    let mut target =
        Kv::open_with_features(node.kv_addr, "target", "s3cret-pw", &[XERROR, JSON]).await;
    let ok = with_meta(&mut target, Op::set(b"other", 1, REMOTE_CAS, b"{}")).await;
    assert_eq!(ok.status, 0);
    assert_eq!(
        meta(&mut target, b"other").await.3,
        1,
        "GET_META is allowed too"
    );
}
