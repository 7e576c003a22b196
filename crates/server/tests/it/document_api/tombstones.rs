//! Sub-document mutations of deleted documents over a real socket, as transactions use
//! them: a document staged in a tombstone (create-as-deleted), its staging xattrs changed
//! under the tombstone's CAS (access-deleted), then committed with revive and
//! REPLACE_BODY_WITH_XATTR; the refusals on the way; and a tombstone written back from disk
//! after a restart.

use crate::common::kv_peer::{Answer, Kv};
use sluice_proto::encode::Packet;
use sluice_types::vbucket_of;

const VBS: u16 = 16;

const XATTR: u8 = 0x04;
const MKDIR_P: u8 = 0x01;
const EXPAND_MACROS: u8 = 0x10;

const ADD: u8 = 0x02;
const ACCESS_DELETED: u8 = 0x04;
const CREATE_AS_DELETED: u8 = 0x08;
const REVIVE: u8 = 0x10;

const SUCCESS_DELETED: u16 = 0xcd;

fn config(dir: &std::path::Path) -> sluice_server::ServerConfig {
    crate::common::loopback_config(dir, sluice_engine::BucketType::Couchbase, VBS, 64)
}

fn vb(key: &[u8]) -> u16 {
    vbucket_of(key, VBS).0
}

fn spec(op: u8, flags: u8, path: &[u8], value: &[u8]) -> Vec<u8> {
    let mut v = vec![op, flags];
    v.extend_from_slice(&(path.len() as u16).to_be_bytes());
    v.extend_from_slice(&(value.len() as u32).to_be_bytes());
    v.extend_from_slice(path);
    v.extend_from_slice(value);
    v
}

/// A multi-path mutation: extras `u32 expiry, u32 user_flags, u8 doc_flags` (what
/// gocbcore's transactions send).
async fn mutate(kv: &mut Kv, key: &[u8], doc_flags: u8, cas: u64, specs: &[Vec<u8>]) -> Answer {
    let mut extras = vec![0, 0, 0, 0];
    extras.extend_from_slice(&0x0200_0000u32.to_be_bytes());
    extras.push(doc_flags);
    let body = specs.concat();
    kv.call(
        Packet::request(0xd1, vb(key), 7)
            .key(key)
            .extras(&extras)
            .value(&body)
            .cas(cas),
    )
    .await
}

/// A multi-path lookup of xattr paths with access-deleted: the status and each path's
/// `(status, value)`.
async fn lookup_deleted(kv: &mut Kv, key: &[u8], paths: &[&[u8]]) -> (u16, Vec<(u16, Vec<u8>)>) {
    let mut body = Vec::new();
    for p in paths {
        body.extend_from_slice(&[0xc5, XATTR]);
        body.extend_from_slice(&(p.len() as u16).to_be_bytes());
        body.extend_from_slice(p);
    }
    let a = kv
        .call(
            Packet::request(0xd0, vb(key), 8)
                .key(key)
                .extras(&[ACCESS_DELETED])
                .value(&body),
        )
        .await;
    let mut out = Vec::new();
    let mut b = &a.value[..];
    while b.len() >= 6 {
        let status = u16::from_be_bytes([b[0], b[1]]);
        let len = u32::from_be_bytes([b[2], b[3], b[4], b[5]]) as usize;
        out.push((status, b[6..6 + len].to_vec()));
        b = &b[6 + len..];
    }
    (a.status, out)
}

/// The staged insert: the transaction's xattr and the staged body, created as a tombstone.
fn stage(body: &[u8]) -> Vec<Vec<u8>> {
    vec![
        spec(0xc7, XATTR | MKDIR_P, b"txn", br#"{"id":"attempt-1"}"#),
        spec(0xc8, XATTR, b"txn.op.stgd", body),
        spec(
            0xc8,
            XATTR | EXPAND_MACROS,
            b"txn.op.crc32",
            br#""${Mutation.value_crc32c}""#,
        ),
    ]
}

/// The commit: the staged body becomes the document's, the staging xattr goes.
fn commit() -> Vec<Vec<u8>> {
    vec![
        spec(0xd3, XATTR, b"txn.op.stgd", b""),
        spec(0xc9, XATTR, b"txn", b""),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staged_insert_lives_in_a_tombstone_until_it_is_revived() {
    let dir = tempfile::tempdir().unwrap();
    let node = sluice_manager::start(config(dir.path())).await.unwrap();
    let mut kv = Kv::open(node.kv_addr).await;
    let key = b"txn-doc";
    let staged = br#"{"name":"ada","n":1}"#;

    // Staged: SUBDOC_SUCCESS_DELETED, and no document to a plain GET.
    let flags = ADD | ACCESS_DELETED | CREATE_AS_DELETED;
    let a = mutate(&mut kv, key, flags, 0, &stage(staged)).await;
    assert_eq!(a.status, SUCCESS_DELETED);
    let staged_cas = a.cas;
    assert_eq!(kv.get(key, vb(key)).await.status, 0x01);
    let (status, r) = lookup_deleted(
        &mut kv,
        key,
        &[b"txn.op.stgd", b"$document.deleted", b"$document.flags"],
    )
    .await;
    assert_eq!(status, SUCCESS_DELETED);
    assert_eq!(r[0], (0, staged.to_vec()));
    assert_eq!(r[1], (0, b"true".to_vec()));
    assert_eq!(r[2], (0, b"33554432".to_vec()));

    // A second staged insert with ADD finds the tombstone: KEY_EEXISTS.
    assert_eq!(
        mutate(&mut kv, key, flags, 0, &stage(staged)).await.status,
        0x02
    );
    // A tombstone keeps no body: a body path finds no JSON, a whole body is refused.
    let a = mutate(
        &mut kv,
        key,
        ACCESS_DELETED,
        0,
        &[spec(0xc8, 0, b"x", b"1")],
    )
    .await;
    assert_eq!((a.status, a.value.get(2)), (0xcc, Some(&0xc6)));
    let a = mutate(
        &mut kv,
        key,
        ACCESS_DELETED,
        0,
        &[spec(0x01, 0, b"", b"{}")],
    )
    .await;
    assert_eq!(a.status, 0xd7);
    // Without access-deleted the tombstone is not there.
    let a = mutate(&mut kv, key, 0, 0, &[spec(0xc8, XATTR, b"txn.x", b"1")]).await;
    assert_eq!(a.status, 0x01);

    // Restaged under the tombstone's CAS; a stale CAS loses.
    let restaged = br#"{"name":"ada","n":2}"#;
    let update = [spec(0xc8, XATTR, b"txn.op.stgd", restaged)];
    let a = mutate(&mut kv, key, ACCESS_DELETED, staged_cas, &update).await;
    assert_eq!(a.status, SUCCESS_DELETED);
    let cas = a.cas;
    assert_ne!(cas, staged_cas);
    let stale = mutate(&mut kv, key, ACCESS_DELETED, staged_cas, &update).await;
    assert_eq!(stale.status, 0x02);

    // Revive refuses a live document.
    kv.set(b"live", b"{}", vb(b"live")).await;
    let a = mutate(&mut kv, b"live", ACCESS_DELETED | REVIVE, 0, &commit()).await;
    assert_eq!(a.status, 0xd6);

    // Commit: the staged body is the document now, the staging xattr is gone.
    let a = mutate(&mut kv, key, ACCESS_DELETED | REVIVE, cas, &commit()).await;
    assert_eq!(a.status, 0);
    let got = kv.get(key, vb(key)).await;
    assert_eq!((got.status, &got.value[..]), (0, &restaged[..]));
    assert_eq!(got.extras, 0x0200_0000u32.to_be_bytes(), "the user flags");
    let (status, r) = lookup_deleted(&mut kv, key, &[b"txn", b"$document.deleted"]).await;
    assert_eq!(
        status, 0xcc,
        "txn is gone: multi-path failure on a live document"
    );
    assert_eq!(r[0].0, 0xc0);
    assert_eq!(r[1], (0, b"false".to_vec()));
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persisted_tombstone_is_read_back_before_it_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let key = b"restaged";
    {
        let node = sluice_manager::start(config(dir.path())).await.unwrap();
        let mut kv = Kv::open(node.kv_addr).await;
        let flags = ADD | ACCESS_DELETED | CREATE_AS_DELETED;
        let a = mutate(&mut kv, key, flags, 0, &stage(b"1")).await;
        assert_eq!(a.status, SUCCESS_DELETED);
        node.shutdown().await.unwrap();
    }
    let node = sluice_manager::start(config(dir.path())).await.unwrap();
    let mut kv = Kv::open(node.kv_addr).await;
    let (status, r) = lookup_deleted(&mut kv, key, &[b"txn.op.stgd"]).await;
    assert_eq!((status, &r[0]), (SUCCESS_DELETED, &(0, b"1".to_vec())));
    // Changed without a CAS: the tombstone read back from disk keeps its other xattrs.
    let update = [spec(0xc8, XATTR, b"txn.op.stgd", b"2")];
    let a = mutate(&mut kv, key, ACCESS_DELETED, 0, &update).await;
    assert_eq!(a.status, SUCCESS_DELETED);
    let (_, r) = lookup_deleted(&mut kv, key, &[b"txn.op.stgd", b"txn.id"]).await;
    assert_eq!(r[0], (0, b"2".to_vec()));
    assert_eq!(r[1], (0, br#""attempt-1""#.to_vec()));
    // Revived with the body: a live document, counted.
    let a = mutate(&mut kv, key, ACCESS_DELETED | REVIVE, 0, &commit()).await;
    assert_eq!(a.status, 0);
    assert_eq!(kv.get(key, vb(key)).await.value, b"2");
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staged_replace_saves_the_documents_metadata_with_vattr_macros() {
    let dir = tempfile::tempdir().unwrap();
    let node = sluice_manager::start(config(dir.path())).await.unwrap();
    let mut kv = Kv::open(node.kv_addr).await;
    let key = b"replaced";
    let before = kv.set(key, br#"{"v":1}"#, vb(key)).await;
    assert_eq!(before.status, 0);

    let macro_spec = |path: &[u8], m: &[u8]| spec(0xc8, XATTR | MKDIR_P | EXPAND_MACROS, path, m);
    let specs = [
        spec(0xc8, XATTR | MKDIR_P, b"txn.op.stgd", br#"{"v":2}"#),
        macro_spec(b"txn.restore.CAS", br#""${$document.CAS}""#),
        macro_spec(b"txn.restore.exptime", br#""${$document.exptime}""#),
        macro_spec(b"txn.restore.revid", br#""${$document.revid}""#),
    ];
    let a = mutate(&mut kv, key, ACCESS_DELETED, 0, &specs).await;
    assert_eq!(a.status, 0, "a live document: plain success");
    let (_, r) = lookup_deleted(&mut kv, key, &[b"txn.restore"]).await;
    let saved: serde_json::Value = serde_json::from_slice(&r[0].1).unwrap();
    assert_eq!(
        saved,
        serde_json::json!({
            "CAS": format!("0x{:016x}", before.cas),
            "exptime": 0,
            "revid": "1",
        })
    );
    // The body is untouched until the commit.
    assert_eq!(kv.get(key, vb(key)).await.value, br#"{"v":1}"#);

    // Unknown macros: a virtual one (0xd5) and another (0xd0), as the failing path's status.
    for (m, want) in [
        (&br#""${$document.nope}""#[..], 0xd5u8),
        (br#""${$vbucket.HLC}""#, 0xd5),
        (br#""${Mutation.nope}""#, 0xd0),
    ] {
        let a = mutate(&mut kv, key, 0, 0, &[macro_spec(b"m", m)]).await;
        assert_eq!((a.status, a.value.get(2)), (0xcc, Some(&want)));
    }

    // A whole body that is not JSON, as a transaction record is created: stored as is.
    let atr = [
        spec(0xc7, XATTR | MKDIR_P, b"attempts.a1.st", br#""PENDING""#),
        spec(0x01, 0, b"", &[0]),
    ];
    let a = mutate(&mut kv, b"atr", 0x01, 0, &atr).await;
    assert_eq!(a.status, 0);
    assert_eq!(kv.get(b"atr", vb(b"atr")).await.value, [0]);
    // No path works in a body that is not JSON.
    let a = mutate(&mut kv, b"atr", 0, 0, &[spec(0xc8, 0, b"x", b"1")]).await;
    assert_eq!((a.status, a.value.get(2)), (0xcc, Some(&0xc6)));
    node.shutdown().await.unwrap();
}
