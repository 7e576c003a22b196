//! Sub-document commands byte by byte over a real socket: the single-path answers, the
//! multi-path result layouts, per-path failures, CAS and document flags.

use crate::common::kv_peer::{Answer, Kv};
use sluice_proto::encode::Packet;
use sluice_types::vbucket_of;

const VBS: u16 = 16;

async fn start() -> (sluice_manager::Running, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let c =
        crate::common::loopback_config(dir.path(), sluice_engine::BucketType::Couchbase, VBS, 64);
    (sluice_manager::start(c).await.unwrap(), dir)
}

fn vb(key: &[u8]) -> u16 {
    vbucket_of(key, VBS).0
}

async fn set(kv: &mut Kv, key: &[u8], value: &[u8]) -> Answer {
    let a = kv
        .call(
            Packet::request(0x01, vb(key), 1)
                .key(key)
                .extras(&[0; 8])
                .value(value),
        )
        .await;
    assert_eq!(a.status, 0);
    a
}

/// A single-path command: extras `u16 path_len, u8 path_flags` (+ `doc_flags`).
async fn single(kv: &mut Kv, op: u8, key: &[u8], path: &[u8], value: &[u8], cas: u64) -> Answer {
    let mut extras = (path.len() as u16).to_be_bytes().to_vec();
    extras.push(0);
    let mut body = path.to_vec();
    body.extend_from_slice(value);
    kv.call(
        Packet::request(op, vb(key), 2)
            .key(key)
            .extras(&extras)
            .value(&body)
            .cas(cas),
    )
    .await
}

fn lookup_spec(op: u8, flags: u8, path: &[u8]) -> Vec<u8> {
    let mut v = vec![op, flags];
    v.extend_from_slice(&(path.len() as u16).to_be_bytes());
    v.extend_from_slice(path);
    v
}

fn mutation_spec(op: u8, path: &[u8], value: &[u8]) -> Vec<u8> {
    let mut v = vec![op, 0];
    v.extend_from_slice(&(path.len() as u16).to_be_bytes());
    v.extend_from_slice(&(value.len() as u32).to_be_bytes());
    v.extend_from_slice(path);
    v.extend_from_slice(value);
    v
}

/// `u16 status, u32 len, value` repeated.
fn lookup_results(mut b: &[u8]) -> Vec<(u16, Vec<u8>)> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let status = u16::from_be_bytes([b[0], b[1]]);
        let len = u32::from_be_bytes([b[2], b[3], b[4], b[5]]) as usize;
        out.push((status, b[6..6 + len].to_vec()));
        b = &b[6 + len..];
    }
    out
}

async fn get(kv: &mut Kv, key: &[u8]) -> Vec<u8> {
    kv.get(key, vb(key)).await.value
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_path_answers_and_statuses() {
    let (node, _dir) = start().await;
    let mut kv = Kv::open(node.kv_addr).await;
    let doc = br#"{"a": {"b": [1, 2]}, "s": "x"}"#;
    let stored = set(&mut kv, b"k", doc).await;

    let g = single(&mut kv, 0xc5, b"k", b"a.b[1]", b"", 0).await;
    assert_eq!(
        (g.status, g.cas, g.value.as_slice()),
        (0, stored.cas, &b"2"[..])
    );
    let n = single(&mut kv, 0xd2, b"k", b"a.b", b"", 0).await;
    assert_eq!((n.status, n.value.as_slice()), (0, &b"2"[..]));
    let rows: &[(u8, &[u8], &[u8], u16)] = &[
        (0xc5, b"zz", b"", 0xc0),   // PATH_ENOENT
        (0xc5, b"s.t", b"", 0xc1),  // PATH_MISMATCH
        (0xc5, b"a[", b"", 0xc2),   // PATH_EINVAL
        (0xc6, b"a.b", b"", 0x00),  // exists
        (0xc7, b"s", b"1", 0xc9),   // dict_add on an existing key: PATH_EEXISTS
        (0xc8, b"t", b"{", 0xc5),   // not JSON: VALUE_CANTINSERT
        (0xcf, b"s", b"1", 0xc1),   // counter on a string: PATH_MISMATCH
        (0xcf, b"n", b"0", 0xc8),   // zero delta: DELTA_EINVAL
        (0xce, b"a.b", b"2", 0xc9), // add_unique of a present value
    ];
    for (op, path, value, want) in rows {
        let a = single(&mut kv, *op, b"k", path, value, 0).await;
        assert_eq!(
            a.status,
            *want,
            "op {op:#x} path {:?}",
            String::from_utf8_lossy(path)
        );
    }
    // None of those changed the document.
    assert_eq!(get(&mut kv, b"k").await, doc);

    // A counter answers its new value, with a new CAS.
    let c = single(&mut kv, 0xcf, b"k", b"n", b"-7", 0).await;
    assert_eq!((c.status, c.value.as_slice()), (0, &b"-7"[..]));
    assert_ne!(c.cas, stored.cas);
    // A stale CAS is refused (KEY_EEXISTS); the current one is taken.
    let stale = single(&mut kv, 0xc8, b"k", b"s", b"\"y\"", stored.cas).await;
    assert_eq!(stale.status, 0x02);
    let ok = single(&mut kv, 0xc8, b"k", b"s", b"\"y\"", c.cas).await;
    assert_eq!(ok.status, 0);
    assert_eq!(
        get(&mut kv, b"k").await,
        br#"{"a": {"b": [1, 2]}, "s": "y","n":-7}"#
    );
    // A missing document: KEY_ENOENT. A document that is not JSON: DOC_NOTJSON.
    assert_eq!(
        single(&mut kv, 0xc5, b"nope", b"a", b"", 0).await.status,
        0x01
    );
    set(&mut kv, b"bin", b"\x00\x01binary").await;
    assert_eq!(
        single(&mut kv, 0xc5, b"bin", b"a", b"", 0).await.status,
        0xc6
    );
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_path_layouts() {
    let (node, _dir) = start().await;
    let mut kv = Kv::open(node.kv_addr).await;
    let stored = set(&mut kv, b"m", br#"{"x": 1, "l": []}"#).await;

    // Lookups: every path answered in order, the whole command MULTI_PATH_FAILURE (0xcc)
    // because one path failed.
    let mut body = lookup_spec(0xc5, 0x04, b"$document.exptime");
    body.extend(lookup_spec(0xc5, 0, b"x"));
    body.extend(lookup_spec(0xc5, 0, b"nope"));
    body.extend(lookup_spec(0x00, 0, b""));
    let a = kv
        .call(Packet::request(0xd0, vb(b"m"), 3).key(b"m").value(&body))
        .await;
    assert_eq!((a.status, a.cas), (0xcc, stored.cas));
    assert_eq!(
        lookup_results(&a.value),
        vec![
            (0, b"0".to_vec()),
            (0, b"1".to_vec()),
            (0xc0, vec![]),
            (0, br#"{"x": 1, "l": []}"#.to_vec()),
        ]
    );
    // Xattr paths come first: SUBDOC_INVALID_XATTR_ORDER (0xd4) otherwise.
    let mut body = lookup_spec(0xc5, 0, b"x");
    body.extend(lookup_spec(0xc5, 0x04, b"$document.exptime"));
    let a = kv
        .call(Packet::request(0xd0, vb(b"m"), 3).key(b"m").value(&body))
        .await;
    assert_eq!(a.status, 0xd4);

    // Mutations: the results of counters only, as `u8 index, u16 status, u32 len, value`.
    let mut body = mutation_spec(0xcb, b"l", b"\"a\"");
    body.extend(mutation_spec(0xcf, b"x", b"41"));
    let a = kv
        .call(Packet::request(0xd1, vb(b"m"), 4).key(b"m").value(&body))
        .await;
    assert_eq!(a.status, 0);
    assert_eq!(a.value, [&[1u8, 0, 0, 0, 0, 0, 2][..], b"42"].concat());
    assert_eq!(get(&mut kv, b"m").await, br#"{"x": 42, "l": ["a"]}"#);

    // A failing path: MULTI_PATH_FAILURE with `u8 index, u16 status`, nothing stored.
    let mut body = mutation_spec(0xc8, b"y", b"1");
    body.extend(mutation_spec(0xca, b"zz", b"1"));
    let a = kv
        .call(Packet::request(0xd1, vb(b"m"), 5).key(b"m").value(&body))
        .await;
    assert_eq!((a.status, a.value.as_slice()), (0xcc, &[1u8, 0, 0xc0][..]));
    assert_eq!(get(&mut kv, b"m").await, br#"{"x": 42, "l": ["a"]}"#);

    // Document flags: mkdoc creates the document; add refuses an existing one.
    let body = mutation_spec(0xc8, b"new", b"true");
    let mk = kv
        .call(
            Packet::request(0xd1, vb(b"fresh"), 6)
                .key(b"fresh")
                .extras(&[0x01])
                .value(&body),
        )
        .await;
    assert_eq!(mk.status, 0);
    assert_eq!(get(&mut kv, b"fresh").await, br#"{"new":true}"#);
    let add = kv
        .call(
            Packet::request(0xd1, vb(b"fresh"), 7)
                .key(b"fresh")
                .extras(&[0x02])
                .value(&body),
        )
        .await;
    assert_eq!(add.status, 0x02);
    // Without mkdoc a missing document is KEY_ENOENT.
    let none = kv
        .call(
            Packet::request(0xd1, vb(b"gone"), 8)
                .key(b"gone")
                .value(&body),
        )
        .await;
    assert_eq!(none.status, 0x01);
    node.shutdown().await.unwrap();
}

/// A multi-path mutation of one xattr path (`flags`: 0x04 xattr, 0x01 mkdir_p).
async fn set_xattr(kv: &mut Kv, key: &[u8], path: &[u8], value: &[u8]) -> Answer {
    let mut spec = vec![0xc8, 0x05];
    spec.extend_from_slice(&(path.len() as u16).to_be_bytes());
    spec.extend_from_slice(&(value.len() as u32).to_be_bytes());
    spec.extend_from_slice(path);
    spec.extend_from_slice(value);
    kv.call(Packet::request(0xd1, vb(key), 10).key(key).value(&spec))
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xattrs_are_stored_apart_and_reach_dcp_only_when_asked() {
    let (node, _dir) = start().await;
    let mut kv = Kv::open(node.kv_addr).await;
    let body = br#"{"v": 1}"#;
    set(&mut kv, b"x", body).await;
    let a = set_xattr(&mut kv, b"x", b"meta.tag", b"\"blue\"").await;
    assert_eq!(a.status, 0);
    // The body is untouched and a plain GET never shows the xattrs.
    assert_eq!(get(&mut kv, b"x").await, body);
    // Bad xattr keys: a virtual one, reserved punctuation, too long.
    for (path, want) in [
        (&b"$document.x"[..], 0xd2u16),
        (b"#tag", 0x87),
        (b"seventeen_bytes_k", 0x87),
    ] {
        let a = set_xattr(&mut kv, b"x", path, b"1").await;
        assert_eq!((a.status, a.value[..].get(2)), (0xcc, Some(&(want as u8))));
    }

    let vbx = vb(b"x");
    let high = crate::common::dcp_peer::high_seqnos(node.kv_addr).await[&vbx];
    let section = |v: &[u8]| -> Vec<u8> {
        let len = u32::from_be_bytes([v[0], v[1], v[2], v[3]]) as usize;
        v[..4 + len].to_vec()
    };
    // Without IncludeXattrs: the body only. With it: the section, then the body.
    for (flags, want_xattrs) in [(0u32, false), (0x04, true)] {
        let mut c = crate::common::dcp_peer::Consumer::open(
            node.kv_addr,
            &format!("xattrs-{flags}"),
            flags,
            &[("enable_noop", "true")],
        )
        .await;
        c.stream_all(vbx..vbx + 1, 0, &Default::default()).await;
        c.read_until(&[(vbx, high)].into_iter().collect()).await;
        let (_, value) = c.final_state()[&b"x".to_vec()].clone();
        if want_xattrs {
            let s = section(&value);
            let x = sluice_subdoc::Xattrs::decode(&s).unwrap();
            assert_eq!(x.get("meta"), Some(&br#"{"tag":"blue"}"#[..]));
            assert_eq!(&value[s.len()..], body);
        } else {
            assert_eq!(value, body);
        }
    }
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_keeps_the_system_xattrs_for_access_deleted_lookups() {
    let (node, _dir) = start().await;
    let mut kv = Kv::open(node.kv_addr).await;
    set(&mut kv, b"gone", br#"{"v": 1}"#).await;
    assert_eq!(
        set_xattr(&mut kv, b"gone", b"_sync.rev", b"\"1-a\"")
            .await
            .status,
        0
    );
    assert_eq!(
        set_xattr(&mut kv, b"gone", b"meta.tag", b"1").await.status,
        0
    );
    let del = kv
        .call(Packet::request(0x04, vb(b"gone"), 20).key(b"gone"))
        .await;
    assert_eq!(del.status, 0);

    let lookup = |doc_flags: &'static [u8], specs: Vec<u8>| {
        Packet::request(0xd0, vb(b"gone"), 21)
            .key(b"gone")
            .extras(doc_flags)
            .value(Box::leak(specs.into_boxed_slice()))
    };
    let sync = lookup_spec(0xc5, 0x04, b"_sync");
    // Without access-deleted: the document is gone.
    assert_eq!(kv.call(lookup(&[], sync.clone())).await.status, 0x01);
    // With it: the system xattr survived, SUBDOC_SUCCESS_DELETED (0xcd).
    let a = kv.call(lookup(&[0x04], sync.clone())).await;
    assert_eq!(a.status, 0xcd);
    assert_eq!(
        lookup_results(&a.value),
        vec![(0, br#"{"rev":"1-a"}"#.to_vec())]
    );
    // The user xattr did not; the body is empty: MULTI_PATH_FAILURE_DELETED (0xd3).
    let mut specs = sync.clone();
    specs.extend(lookup_spec(0xc5, 0x04, b"meta"));
    specs.extend(lookup_spec(0xc5, 0x04, b"$document.deleted"));
    let a = kv.call(lookup(&[0x04], specs)).await;
    assert_eq!(a.status, 0xd3);
    let r = lookup_results(&a.value);
    assert_eq!((r[1].0, &r[2]), (0xc0, &(0, b"true".to_vec())));

    // A DCP consumer that asked for xattrs gets the deletion with them; others without.
    let vbg = vb(b"gone");
    let high = crate::common::dcp_peer::high_seqnos(node.kv_addr).await[&vbg];
    for (flags, want) in [(0u32, 0usize), (0x04, 1)] {
        let mut c = crate::common::dcp_peer::Consumer::open(
            node.kv_addr,
            &format!("tombstone-{flags}"),
            flags,
            &[("enable_noop", "true")],
        )
        .await;
        c.stream_all(vbg..vbg + 1, 0, &Default::default()).await;
        c.read_until(&[(vbg, high)].into_iter().collect()).await;
        let (kind, value) = c.final_state()[&b"gone".to_vec()].clone();
        assert_eq!(kind, 0x58, "a deletion");
        let x = match value.is_empty() {
            true => sluice_subdoc::Xattrs::default(),
            false => sluice_subdoc::Xattrs::decode(&value).unwrap(),
        };
        assert_eq!(x.keys().count(), want, "flags {flags:#x}");
    }
    node.shutdown().await.unwrap();
}
