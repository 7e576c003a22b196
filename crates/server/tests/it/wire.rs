//! Byte-level tests over real sockets against an in-process node: exact response layouts,
//! ordering, quiet commands, authentication and session rules.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use sluice_proto::encode::Packet;
use sluice_proto::{decode_frame, Decoded};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Resp {
    opcode: u8,
    status: u16,
    opaque: u32,
    cas: u64,
    datatype: u8,
    extras: Vec<u8>,
    key: Vec<u8>,
    value: Vec<u8>,
}

struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    async fn open(addr: std::net::SocketAddr) -> Conn {
        Conn {
            s: TcpStream::connect(addr).await.unwrap(),
            buf: Vec::new(),
        }
    }
    async fn send(&mut self, p: Packet<'_>) {
        self.s.write_all(&p.to_vec()).await.unwrap();
    }
    async fn recv(&mut self) -> Resp {
        loop {
            if let Decoded::Frame(f, used) = decode_frame(&self.buf, 1 << 26).unwrap() {
                let r = Resp {
                    opcode: f.opcode,
                    status: f.vbucket_or_status,
                    opaque: f.opaque,
                    cas: f.cas,
                    datatype: f.datatype,
                    extras: f.extras.to_vec(),
                    key: f.key.to_vec(),
                    value: f.value.to_vec(),
                };
                self.buf.drain(..used);
                return r;
            }
            let mut chunk = [0u8; 65536];
            let n =
                tokio::time::timeout(std::time::Duration::from_secs(10), self.s.read(&mut chunk))
                    .await
                    .expect("answer within 10 s")
                    .unwrap();
            assert!(n > 0, "server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
    async fn call(&mut self, p: Packet<'_>) -> Resp {
        self.send(p).await;
        self.recv().await
    }
    /// HELLO, SASL PLAIN and SELECT_BUCKET.
    async fn login(&mut self, features: &[u16]) -> Vec<u16> {
        let f: Vec<u8> = features.iter().flat_map(|c| c.to_be_bytes()).collect();
        let r = self
            .call(Packet::request(0x1f, 0, 1).key(b"test").value(&f))
            .await;
        let r2 = self
            .call(
                Packet::request(0x21, 0, 2)
                    .key(b"PLAIN")
                    .value(b"\0Administrator\0password"),
            )
            .await;
        assert_eq!(r2.status, 0);
        assert_eq!(
            self.call(Packet::request(0x89, 0, 3).key(b"default"))
                .await
                .status,
            0
        );
        r.value
            .chunks(2)
            .map(|c| u16::from_be_bytes([c[0], c[1]]))
            .collect()
    }
}

async fn start(
    bucket_type: sluice_engine::BucketType,
) -> (sluice_manager::Running, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let c = common::loopback_config(dir.path(), bucket_type, 16, 64);
    (sluice_manager::start(c).await.unwrap(), dir)
}

fn set_extras(flags: u32, expiry: u32) -> [u8; 8] {
    let mut e = [0u8; 8];
    e[..4].copy_from_slice(&flags.to_be_bytes());
    e[4..].copy_from_slice(&expiry.to_be_bytes());
    e
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memcached_port_set_get_exact_layout() {
    let (node, _dir) = start(sluice_engine::BucketType::Couchbase).await;
    let mut c = Conn::open(node.memcached_addr.unwrap()).await;
    let e = set_extras(0xdead_beef, 0);
    let set = c
        .call(
            Packet::request(0x01, 0, 7)
                .key(b"hello")
                .extras(&e)
                .value(b"world"),
        )
        .await;
    assert_eq!((set.opcode, set.status, set.opaque), (0x01, 0, 7));
    assert_ne!(set.cas, 0);
    assert!(set.extras.is_empty() && set.key.is_empty() && set.value.is_empty());
    let get = c.call(Packet::request(0x00, 0, 8).key(b"hello")).await;
    assert_eq!(
        (get.status, get.opaque, get.cas, get.datatype),
        (0, 8, set.cas, 0)
    );
    assert_eq!(get.extras, 0xdead_beefu32.to_be_bytes());
    assert!(get.key.is_empty());
    assert_eq!(get.value, b"world");
    let getk = c.call(Packet::request(0x0c, 0, 9).key(b"hello")).await;
    assert_eq!(getk.key, b"hello");
    // memcached answers DELETE with CAS 0; memccapable checks it.
    let del = c.call(Packet::request(0x04, 0, 10).key(b"hello")).await;
    assert_eq!((del.status, del.cas), (0, 0));
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_answers_keep_order_and_quiet_commands_stay_silent() {
    let (node, _dir) = start(sluice_engine::BucketType::Ephemeral).await;
    let mut c = Conn::open(node.memcached_addr.unwrap()).await;
    let e = set_extras(0, 0);
    let mut batch = Vec::new();
    for i in 0..50u32 {
        let key = format!("k{i}");
        Packet::request(0x11, 0, i)
            .key(key.as_bytes())
            .extras(&e)
            .value(b"v")
            .encode_into(&mut batch); // SETQ
    }
    Packet::request(0x09, 0, 100)
        .key(b"missing")
        .encode_into(&mut batch); // GETQ miss: silent
    Packet::request(0x12, 0, 101)
        .key(b"k1")
        .extras(&e)
        .value(b"v")
        .encode_into(&mut batch); // ADDQ fails: answers
    for i in 0..50u32 {
        Packet::request(0x00, 0, 200 + i)
            .key(format!("k{i}").as_bytes())
            .encode_into(&mut batch);
    }
    Packet::request(0x0a, 0, 999).encode_into(&mut batch);
    c.s.write_all(&batch).await.unwrap();
    let first = c.recv().await;
    assert_eq!(
        (first.opcode, first.opaque, first.status),
        (0x12, 101, 0x02)
    );
    for i in 0..50u32 {
        let r = c.recv().await;
        assert_eq!((r.opcode, r.opaque, r.status), (0x00, 200 + i, 0));
    }
    let noop = c.recv().await;
    assert_eq!((noop.opcode, noop.opaque), (0x0a, 999));
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_port_requires_authentication_and_a_bucket() {
    let (node, _dir) = start(sluice_engine::BucketType::Couchbase).await;
    let mut c = Conn::open(node.kv_addr).await;
    assert_eq!(
        c.call(Packet::request(0x00, 0, 1).key(b"k")).await.status,
        0x24
    );
    let bad = c
        .call(
            Packet::request(0x21, 0, 2)
                .key(b"PLAIN")
                .value(b"\0Administrator\0wrong"),
        )
        .await;
    assert_eq!(bad.status, 0x20);
    let ok = c
        .call(
            Packet::request(0x21, 0, 3)
                .key(b"PLAIN")
                .value(b"\0Administrator\0password"),
        )
        .await;
    assert_eq!(ok.status, 0);
    assert_eq!(
        c.call(Packet::request(0x00, 0, 4).key(b"k")).await.status,
        0x08
    );
    assert_eq!(
        c.call(Packet::request(0x89, 0, 5).key(b"nope"))
            .await
            .status,
        0x01
    );
    assert_eq!(
        c.call(Packet::request(0x89, 0, 6).key(b"default"))
            .await
            .status,
        0
    );
    let vb = sluice_types::vbucket_of(b"k", 16).0;
    assert_eq!(
        c.call(Packet::request(0x00, vb, 7).key(b"k")).await.status,
        0x01
    );
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_acknowledges_only_implemented_features_and_tokens_follow() {
    let (node, _dir) = start(sluice_engine::BucketType::Couchbase).await;
    let mut c = Conn::open(node.kv_addr).await;
    // Requested: tcp_nodelay, mutation_seqno, xerror, duplex, unordered execution,
    // collections, tracing (no: not implemented), json.
    let acked = c
        .login(&[0x03, 0x04, 0x07, 0x0c, 0x0e, 0x12, 0x0f, 0x0b])
        .await;
    assert_eq!(acked, vec![0x03, 0x04, 0x07, 0x0c, 0x0e, 0x12, 0x0b]);
    // With collections, keys carry their collection's prefix (0x00: the default one).
    let vb = sluice_types::vbucket_of(b"doc", 16).0;
    let e = set_extras(0, 0);
    let r = c
        .call(
            Packet::request(0x01, vb, 9)
                .key(b"\x00doc")
                .extras(&e)
                .value(b"{\"a\":1}")
                .datatype(1),
        )
        .await;
    assert_eq!(r.status, 0);
    assert_eq!(r.extras.len(), 16, "vbucket uuid + seqno");
    assert_eq!(u64::from_be_bytes(r.extras[8..].try_into().unwrap()), 1);
    let g = c.call(Packet::request(0x00, vb, 10).key(b"\x00doc")).await;
    assert_eq!(g.datatype, 0x01, "JSON detected and negotiated");
    // Wrong vbucket: NOT_MY_VBUCKET with the cluster map.
    let nmvb = c.call(Packet::request(0x00, 99, 11).key(b"\x00doc")).await;
    assert_eq!(nmvb.status, 0x07);
    let map: serde_json::Value = serde_json::from_slice(&nmvb.value).unwrap();
    assert_eq!(map["nodeLocator"], "vbucket");
    assert_eq!(
        map["vBucketServerMap"]["vBucketMap"]
            .as_array()
            .unwrap()
            .len(),
        16
    );
    assert_eq!(map["nodesExt"][0]["services"]["kv"], node.kv_addr.port());
    // Extended errors carry a JSON context.
    let miss = c
        .call(Packet::request(0x04, vb, 12).key(b"\x00absent"))
        .await;
    assert_eq!(miss.status, 0x01);
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persist_level_durability_waits_for_disk() {
    let (node, _dir) = start(sluice_engine::BucketType::Couchbase).await;
    let mut c = Conn::open(node.kv_addr).await;
    c.login(&[0x04, 0x10, 0x11]).await;
    let vb = sluice_types::vbucket_of(b"durable", 16).0;
    let e = set_extras(0, 0);
    // Alt request: durability frame id 1, level 3 (persist to majority).
    let r = c
        .call(
            Packet::request(0x01, vb, 1)
                .key(b"durable")
                .extras(&e)
                .value(b"v")
                .framing_extras(&[0x11, 0x03]),
        )
        .await;
    assert_eq!(r.status, 0);
    let seqno = u64::from_be_bytes(r.extras[8..].try_into().unwrap());
    let uuid = &r.extras[..8];
    let o = c.call(Packet::request(0x91, vb, 2).value(uuid)).await;
    assert_eq!(o.status, 0);
    let persisted = u64::from_be_bytes(o.value[11..19].try_into().unwrap());
    assert!(persisted >= seqno, "acknowledged only once persisted");
    node.shutdown().await.unwrap();
}
