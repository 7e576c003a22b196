//! Collection-aware DCP on the wire, byte by byte: stream ids (`enable_stream_id`: two
//! filtered streams of one vbucket on one connection, each message naming its stream in a
//! stream-id frame info, CLOSE_STREAM by id, the DCP_STREAMID_INVALID and KEY_EEXISTS rules),
//! SEQNO_ADVANCED at the end of a snapshot whose tail is another collection's, and the
//! FilterEmpty end when the filter's collection is dropped.

use super::collections::{key, rest};
use crate::common::dcp_peer::high_seqnos;
use crate::common::kv_peer::Kv;
use sluice_client::admin_http::Method;
use sluice_proto::dcp::{DcpMessage, StreamEndReason, StreamFlags, StreamRequest};
use sluice_proto::encode::Packet;
use sluice_proto::frame_info::parse_frame_infos;
use sluice_proto::{decode_frame, Decoded, Magic};
use sluice_types::{vbucket_of, Seqno, VbUuid};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const VBS: u16 = 4;
const COLLECTIONS: u16 = 0x12;
const XERROR: u16 = 0x07;
const JSON: u16 = 0x0b;
const DOCS: usize = 40;

/// What one stream (by id) received, in order.
#[derive(Debug, Default)]
struct Received {
    markers: Vec<(u64, u64)>,
    /// (key as sent, seqno) of mutations and deletions.
    items: Vec<(Vec<u8>, u64)>,
    events: Vec<u64>,
    advanced: Vec<u64>,
    end: Option<StreamEndReason>,
}

/// A raw DCP connection that sorts what arrives by stream id.
struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
    streams: BTreeMap<Option<u16>, Received>,
    /// (opaque, status) of responses not taken yet.
    answers: VecDeque<(u32, u16)>,
}

impl Conn {
    async fn open(addr: SocketAddr) -> Conn {
        let kv = Kv::open_with_features(
            addr,
            "Administrator",
            "password",
            &[COLLECTIONS, XERROR, JSON],
        )
        .await;
        let (s, buf) = kv.into_parts();
        let mut c = Conn {
            s,
            buf,
            streams: BTreeMap::new(),
            answers: VecDeque::new(),
        };
        let mut e = [0u8; 8];
        e[4..].copy_from_slice(&1u32.to_be_bytes());
        c.send(Packet::request(0x50, 0, 1).extras(&e).key(b"sid-test"))
            .await;
        assert_eq!(c.answer(1).await, 0, "DCP_OPEN");
        for (k, v) in [("enable_noop", "true"), ("enable_stream_id", "true")] {
            c.send(
                Packet::request(0x5e, 0, 2)
                    .key(k.as_bytes())
                    .value(v.as_bytes()),
            )
            .await;
            assert_eq!(c.answer(2).await, 0, "DCP_CONTROL {k}");
        }
        // Once on, stream ids stay on.
        c.send(
            Packet::request(0x5e, 0, 2)
                .key(b"enable_stream_id")
                .value(b"false"),
        )
        .await;
        assert_eq!(c.answer(2).await, 0x04);
        c
    }

    async fn send(&mut self, p: Packet<'_>) {
        self.s.write_all(&p.to_vec()).await.unwrap();
    }

    async fn stream_req(&mut self, vb: u16, opaque: u32, end: u64, value: &str) {
        let e = StreamRequest {
            flags: StreamFlags(0),
            start: Seqno(0),
            end: Seqno(end),
            vb_uuid: VbUuid(0),
            snap_start: Seqno(0),
            snap_end: Seqno(0),
        }
        .encode();
        self.send(
            Packet::request(0x53, vb, opaque)
                .extras(&e)
                .value(value.as_bytes()),
        )
        .await;
    }

    async fn close(&mut self, vb: u16, opaque: u32, sid: Option<u16>) {
        let fe = sid.map(|s| {
            let [hi, lo] = s.to_be_bytes();
            [0x22, hi, lo]
        });
        let p = Packet::request(0x52, vb, opaque);
        let p = match &fe {
            Some(f) => p.framing_extras(f),
            None => p,
        };
        self.send(p).await;
    }

    /// Reads until the response with `opaque` arrives; its status.
    async fn answer(&mut self, opaque: u32) -> u16 {
        loop {
            if let Some(i) = self.answers.iter().position(|(o, _)| *o == opaque) {
                return self.answers.remove(i).unwrap().1;
            }
            self.step().await;
        }
    }

    /// Reads until `done` holds over what the streams received.
    async fn until(&mut self, what: &str, done: impl Fn(&BTreeMap<Option<u16>, Received>) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while !done(&self.streams) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{what}: {:?}",
                self.streams
            );
            self.step().await;
        }
    }

    /// Handles one frame.
    async fn step(&mut self) {
        loop {
            if let Decoded::Frame(f, used) = decode_frame(&self.buf, 1 << 26).unwrap() {
                let reply = if matches!(f.magic, Magic::ClientResponse | Magic::AltClientResponse) {
                    self.answers.push_back((f.opaque, f.vbucket_or_status));
                    None
                } else {
                    let sid = parse_frame_infos(f.framing_extras).unwrap().stream_id;
                    let msg = DcpMessage::decode(&f).unwrap();
                    // A stream's messages name it exactly when it has an id (noops never).
                    assert_eq!(f.magic == Magic::AltClientRequest, sid.is_some(), "{msg:?}");
                    if msg == DcpMessage::Noop {
                        Some(
                            Packet::response(0x5c, sluice_proto::Status::Success, f.opaque)
                                .to_vec(),
                        )
                    } else {
                        let r = self.streams.entry(sid).or_default();
                        match msg {
                            DcpMessage::SnapshotMarker(m) => r.markers.push((m.start.0, m.end.0)),
                            DcpMessage::Mutation(d) | DcpMessage::Deletion(d) => {
                                r.items.push((d.key.to_vec(), d.seqno.0))
                            }
                            DcpMessage::SystemEvent(e) => r.events.push(e.seqno.0),
                            DcpMessage::SeqnoAdvanced(n) => r.advanced.push(n.0),
                            DcpMessage::StreamEnd(reason) => r.end = Some(reason),
                            other => panic!("unexpected {other:?}"),
                        }
                        None
                    }
                };
                self.buf.drain(..used);
                if let Some(reply) = reply {
                    self.s.write_all(&reply).await.unwrap();
                }
                return;
            }
            let mut chunk = [0u8; 65536];
            let n = tokio::time::timeout(Duration::from_secs(30), self.s.read(&mut chunk))
                .await
                .expect("the server sends within the timeout")
                .unwrap();
            assert!(n > 0, "the server closed the DCP connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_filtered_streams_of_one_vbucket_by_stream_id() {
    let dir = tempfile::tempdir().unwrap();
    let c =
        crate::common::loopback_config(dir.path(), sluice_engine::BucketType::Couchbase, VBS, 64);
    let node = sluice_manager::start(c).await.unwrap();
    rest(node.admin_addr, Method::POST, "", &[("name", "s")]).await;
    for name in ["a", "b"] {
        rest(
            node.admin_addr,
            Method::POST,
            "/s/collections",
            &[("name", name)],
        )
        .await;
    }
    let mut kv = Kv::open_with_features(
        node.kv_addr,
        "Administrator",
        "password",
        &[COLLECTIONS, XERROR, JSON],
    )
    .await;
    let mut cid = BTreeMap::new();
    for name in ["a", "b"] {
        let path = format!("s.{name}");
        let r = kv
            .call(Packet::request(0xbb, 0, 2).value(path.as_bytes()))
            .await;
        assert_eq!(r.status, 0);
        cid.insert(name, u32::from_be_bytes(r.extras[8..].try_into().unwrap()));
    }
    let (a, b) = (cid["a"], cid["b"]);

    // The same keys in both collections; the vbucket under test ends on one of b's.
    let vb = vbucket_of(b"k0", VBS).0;
    let mut want: BTreeMap<u32, BTreeSet<Vec<u8>>> = BTreeMap::new();
    let logical: Vec<String> = (0..DOCS)
        .map(|i| format!("k{i}"))
        .chain(
            (0..)
                .map(|i| format!("tail{i}"))
                .find(|k| vbucket_of(k.as_bytes(), VBS).0 == vb),
        )
        .collect();
    for (i, l) in logical.iter().enumerate() {
        let kvb = vbucket_of(l.as_bytes(), VBS).0;
        let tail = i == logical.len() - 1;
        for c in [a, b] {
            if tail && c == a {
                continue;
            }
            let k = key(c, l.as_bytes());
            let p = Packet::request(0x01, kvb, 3)
                .extras(&[0; 8])
                .key(&k)
                .value(b"{}");
            assert_eq!(kv.call(p).await.status, 0);
            if kvb == vb {
                want.entry(c).or_default().insert(k);
            }
        }
    }
    let high = high_seqnos(node.kv_addr).await[&vb];

    let mut dcp = Conn::open(node.kv_addr).await;
    // Without an id, on a connection that enabled them: refused.
    dcp.stream_req(vb, 10, high, &format!(r#"{{"collections":["{a:x}"]}}"#))
        .await;
    assert_eq!(dcp.answer(10).await, 0x8d, "a stream request needs an id");
    // Two streams of one vbucket, one per collection, and a third of everything.
    dcp.stream_req(
        vb,
        11,
        high,
        &format!(r#"{{"sid":1,"collections":["{a:x}"]}}"#),
    )
    .await;
    dcp.stream_req(
        vb,
        12,
        high,
        &format!(r#"{{"sid":2,"collections":["{b:x}"]}}"#),
    )
    .await;
    dcp.stream_req(vb, 13, u64::MAX, r#"{"sid":3}"#).await;
    for opaque in [11, 12, 13] {
        assert_eq!(dcp.answer(opaque).await, 0, "stream {opaque}");
    }
    dcp.stream_req(vb, 14, u64::MAX, r#"{"sid":3}"#).await;
    assert_eq!(
        dcp.answer(14).await,
        0x02,
        "stream 3 of this vbucket is live"
    );
    dcp.close(vb, 15, None).await;
    assert_eq!(dcp.answer(15).await, 0x8d, "a close needs the id");
    dcp.close(vb, 16, Some(9)).await;
    assert_eq!(
        dcp.answer(16).await,
        0x8d,
        "no stream 9 on a vbucket with streams"
    );
    dcp.close(vb, 17, Some(3)).await;
    assert_eq!(dcp.answer(17).await, 0, "closed by id");

    dcp.until("both filtered streams end", |s| {
        [Some(1), Some(2)]
            .iter()
            .all(|sid| s.get(sid).is_some_and(|r| r.end.is_some()))
    })
    .await;
    for (sid, c) in [(1u16, a), (2, b)] {
        let r = &dcp.streams[&Some(sid)];
        assert_eq!(r.end, Some(StreamEndReason::Ok), "stream {sid}");
        let keys: BTreeSet<Vec<u8>> = r.items.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(
            keys, want[&c],
            "stream {sid} holds exactly its collection's keys"
        );
        assert_eq!(r.items.len(), keys.len(), "stream {sid}: each key once");
        assert_eq!(r.events.len(), 1, "stream {sid}: its collection's creation");
        let last_marker_end = r.markers.last().unwrap().1;
        assert_eq!(
            last_marker_end, high,
            "stream {sid}: the snapshot reaches the high seqno"
        );
    }
    // Stream 1's last seqno is one of b's writes: it is told it got there. Every
    // SEQNO_ADVANCED (either stream's) is the end of the snapshot it closes.
    assert_eq!(dcp.streams[&Some(1)].advanced.last(), Some(&high));
    assert_eq!(dcp.streams[&Some(2)].items.last().unwrap().1, high);
    for sid in [1, 2] {
        let r = &dcp.streams[&Some(sid)];
        let ends: BTreeSet<u64> = r.markers.iter().map(|m| m.1).collect();
        assert!(
            r.advanced.iter().all(|n| ends.contains(n)),
            "stream {sid}: {r:?}"
        );
    }

    // A stream of collection a alone ends FilterEmpty once a is dropped.
    dcp.stream_req(
        vb,
        18,
        u64::MAX,
        &format!(r#"{{"sid":4,"collections":["{a:x}"]}}"#),
    )
    .await;
    assert_eq!(dcp.answer(18).await, 0);
    dcp.until("stream 4 catches up", |s| {
        s.get(&Some(4))
            .is_some_and(|r| r.items.len() == want[&a].len())
    })
    .await;
    rest(node.admin_addr, Method::DELETE, "/s/collections/a", &[]).await;
    dcp.until("stream 4 ends", |s| s[&Some(4)].end.is_some())
        .await;
    let r = &dcp.streams[&Some(4)];
    assert_eq!(r.end, Some(StreamEndReason::FilterEmpty));
    assert_eq!(r.events.len(), 2, "a's creation and its drop");
    assert!(
        *r.events.last().unwrap() > high,
        "the drop came after the writes"
    );
}
