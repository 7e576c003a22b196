//! Clustermap change notifications (server push, magic 0x82) and NOT_MY_VBUCKET dedup, byte
//! by byte against one node whose map moves to a new revision.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::kv_peer::Kv;
use sluice_cluster::{place, NodeId, NodeInfo};
use sluice_manager::Running;
use sluice_proto::encode::Packet;
use sluice_proto::header::Magic;
use sluice_proto::{decode_frame, Decoded};
use sluice_server::ServerConfig;
use sluice_types::VbState;
use std::path::Path;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

const DUPLEX: u16 = 0x0c;
const NOTIFY: u16 = 0x0d;
const NOTIFY_BRIEF: u16 = 0x1f;
const DEDUPE_NMVB: u16 = 0x1e;

async fn node(dir: &Path) -> Running {
    let mut c = ServerConfig::new(dir);
    c.kv_port = 0;
    c.admin_port = 0;
    c.vbuckets = 8;
    sluice_manager::start(c).await.unwrap()
}

fn hello(features: &[u16]) -> Vec<u8> {
    features.iter().flat_map(|f| f.to_be_bytes()).collect()
}

/// The codes a HELLO answer acknowledged.
fn acked(value: &[u8]) -> Vec<u16> {
    value
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .collect()
}

struct Pushed {
    magic: Magic,
    opcode: u8,
    extras: Vec<u8>,
    key: Vec<u8>,
    value: Vec<u8>,
}

/// Reads the next frame the server sends on its own.
async fn next_push(s: &mut TcpStream, buf: &mut Vec<u8>) -> Pushed {
    loop {
        if let Decoded::Frame(f, used) = decode_frame(buf, 1 << 26).unwrap() {
            let p = Pushed {
                magic: f.magic,
                opcode: f.opcode,
                extras: f.extras.to_vec(),
                key: f.key.to_vec(),
                value: f.value.to_vec(),
            };
            buf.drain(..used);
            return p;
        }
        let mut chunk = [0u8; 65536];
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut chunk))
            .await
            .expect("a push within 10 s")
            .unwrap();
        assert!(n > 0, "server closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn version(extras: &[u8]) -> (i64, i64) {
    (
        i64::from_be_bytes(extras[..8].try_into().unwrap()),
        i64::from_be_bytes(extras[8..16].try_into().unwrap()),
    )
}

/// Moves the node to the next revision of its own map.
fn bump(n: &Running) -> u64 {
    let view = n.node.cluster_map();
    let next = view.map.with_vbmap(view.map.vbmap().clone()).unwrap();
    let rev = next.rev().0;
    n.node.install_map(next, view.this);
    rev
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn map_changes_are_pushed_to_clients_that_asked() {
    let dir = tempfile::tempdir().unwrap();
    let n = node(dir.path()).await;

    // Notifications need duplex; asked for both forms, a client gets the brief one.
    let mut kv = Kv::open(n.kv_addr).await;
    let a = kv
        .call(Packet::request(0x1f, 0, 1).value(&hello(&[NOTIFY])))
        .await;
    assert_eq!(a.status, 0x04, "EINVAL without duplex");
    let a = kv
        .call(Packet::request(0x1f, 0, 1).value(&hello(&[DUPLEX, NOTIFY, NOTIFY_BRIEF])))
        .await;
    assert_eq!(acked(&a.value), [DUPLEX, NOTIFY_BRIEF]);
    let brief = kv;

    let mut full = Kv::open(n.kv_addr).await;
    let a = full
        .call(Packet::request(0x1f, 0, 1).value(&hello(&[DUPLEX, NOTIFY])))
        .await;
    assert_eq!(acked(&a.value), [DUPLEX, NOTIFY]);
    // A client that knows the current map is not told about it again.
    let current = full.call(Packet::request(0xb5, 0, 2)).await;
    assert_eq!(current.status, 0);

    let mut plain = Kv::open(n.kv_addr).await;

    let rev = bump(&n);
    let (mut s, mut buf) = brief.into_parts();
    let p = next_push(&mut s, &mut buf).await;
    assert_eq!((p.magic, p.opcode), (Magic::ServerRequest, 0x01));
    assert_eq!(version(&p.extras), (1, rev as i64));
    assert_eq!(p.key, b"default");
    assert!(p.value.is_empty(), "brief: no map");

    let (mut s2, mut buf2) = full.into_parts();
    let p = next_push(&mut s2, &mut buf2).await;
    assert_eq!(version(&p.extras), (1, rev as i64));
    let doc: serde_json::Value = serde_json::from_slice(&p.value).unwrap();
    assert_eq!(doc["rev"].as_u64(), Some(rev));

    // The client's answer to a push (magic 0x83) is accepted and ignored.
    let mut reply = Packet::response(0x01, sluice_proto::Status::Success, 0).to_vec();
    reply[0] = 0x83;
    tokio::io::AsyncWriteExt::write_all(&mut s, &reply)
        .await
        .unwrap();
    let mut again = Kv::open(n.kv_addr).await;
    assert_eq!(again.call(Packet::request(0x0a, 0, 3)).await.status, 0);

    // Nothing was pushed to the client that did not ask: its next frame is its own answer.
    let noop = plain.call(Packet::request(0x0a, 0, 4)).await;
    assert_eq!(noop.status, 0);
    assert!(noop.value.is_empty());
    n.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_my_vbucket_leaves_out_a_map_the_client_has() {
    let dir = tempfile::tempdir().unwrap();
    let n = node(dir.path()).await;
    // A second node (never started) owns half the vbuckets: they are dead here.
    let view = n.node.cluster_map();
    let other = NodeInfo {
        id: NodeId(1),
        host: "127.0.0.1".into(),
        kv_port: 1,
        admin_port: 1,
        tls: None,
        services: sluice_cluster::Services::ALL,
    };
    let ids = [view.this, other.id];
    let map = view
        .map
        .next(
            vec![n.node.node_info(view.this), other],
            place(&ids, 8, 0).unwrap(),
        )
        .unwrap();
    let theirs = map
        .vbmap()
        .iter()
        .find(|(_, c)| c.active == Some(NodeId(1)))
        .map(|(vb, _)| vb)
        .unwrap();
    n.node.install_map(map, view.this);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while n.node.bucket.engine.vb_state(theirs).unwrap() != VbState::Dead {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the agent applies the map"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let vb = theirs.0;

    let mut dedupe = Kv::open(n.kv_addr).await;
    let a = dedupe
        .call(Packet::request(0x1f, 0, 1).value(&hello(&[DEDUPE_NMVB])))
        .await;
    assert_eq!(acked(&a.value), [DEDUPE_NMVB]);
    // Before it has seen a map, the NMVB carries it.
    let first = dedupe.set(b"k", b"v", vb).await;
    assert_eq!(first.status, 0x07);
    assert!(!first.value.is_empty());
    assert_eq!(dedupe.call(Packet::request(0xb5, 0, 2)).await.status, 0);
    let second = dedupe.set(b"k", b"v", vb).await;
    assert_eq!(second.status, 0x07);
    assert!(second.value.is_empty(), "the client has this map");
    // A newer map goes out again.
    let rev = bump(&n);
    let third = dedupe.set(b"k", b"v", vb).await;
    let doc: serde_json::Value = serde_json::from_slice(&third.value).unwrap();
    assert_eq!(doc["rev"].as_u64(), Some(rev));

    // Without the feature, every NMVB carries the map.
    let mut plain = Kv::open(n.kv_addr).await;
    assert_eq!(plain.call(Packet::request(0xb5, 0, 2)).await.status, 0);
    assert!(!plain.set(b"k", b"v", vb).await.value.is_empty());
    n.shutdown().await.unwrap();
}

/// Reads from `s` until `text` holds `needle`, for up to 10 s.
async fn read_until_text(s: &mut TcpStream, text: &mut String, needle: &str) {
    while !text.contains(needle) {
        let mut chunk = [0u8; 65536];
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut chunk))
            .await
            .unwrap_or_else(|_| panic!("no {needle} within 10 s in:\n{text}"))
            .unwrap();
        assert!(n > 0, "the stream closed:\n{text}");
        text.push_str(&String::from_utf8_lossy(&chunk[..n]));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_map_streams_over_http_for_sdks_that_fall_back_to_it() {
    use tokio::io::AsyncWriteExt;
    let dir = tempfile::tempdir().unwrap();
    let n = node(dir.path()).await;
    let rev = n.node.cluster_map().map.rev().0;
    let mut s = TcpStream::connect(n.admin_addr).await.unwrap();
    // Administrator:password
    let get = "GET /pools/default/bs/default HTTP/1.1\r\nHost: x\r\n\
               Authorization: Basic QWRtaW5pc3RyYXRvcjpwYXNzd29yZA==\r\n\r\n";
    s.write_all(get.as_bytes()).await.unwrap();
    let mut text = String::new();
    read_until_text(&mut s, &mut text, &format!("\"rev\":{rev},")).await;
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    read_until_text(&mut s, &mut text, "\n\n\n\n").await;
    // Each new revision follows on the same response, without asking again.
    let next = bump(&n);
    read_until_text(&mut s, &mut text, &format!("\"rev\":{next},")).await;
    let next2 = bump(&n);
    read_until_text(&mut s, &mut text, &format!("\"rev\":{next2},")).await;
    // Without credentials: 401, as for the plain map.
    let mut s = TcpStream::connect(n.admin_addr).await.unwrap();
    s.write_all(b"GET /pools/default/bs/default HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut text = String::new();
    read_until_text(&mut s, &mut text, "HTTP/1.1 ").await;
    read_until_text(&mut s, &mut text, "401").await;
    n.shutdown().await.unwrap();
}
