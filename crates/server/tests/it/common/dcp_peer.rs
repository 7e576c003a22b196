//! Test peers over real sockets: a pipelined writer on the memcached port and a raw DCP
//! consumer that records everything it receives, checking the stream invariants as it goes.

#![allow(dead_code)]

use sluice_proto::dcp::message::SnapshotMarker;
use sluice_proto::dcp::{DcpMessage, StreamEndReason, StreamFlags, StreamRequest};
use sluice_proto::encode::Packet;
use sluice_proto::{decode_frame, Decoded, Magic};
use sluice_types::{Seqno, VbUuid};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub const TIMEOUT: Duration = Duration::from_secs(30);

/// Writes key → value on the memcached port (no auth, routed by key), pipelined, retrying
/// temporary failures. Returns how many TMPFAILs it saw.
pub async fn write_all(addr: SocketAddr, items: &[(Vec<u8>, Vec<u8>)]) -> usize {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut tmpfails = 0;
    let mut pending: Vec<usize> = (0..items.len()).collect();
    while !pending.is_empty() {
        let mut out = Vec::new();
        for (n, &i) in pending.iter().enumerate() {
            let (k, v) = &items[i];
            Packet::request(0x01, 0, n as u32)
                .key(k)
                .extras(&[0u8; 8])
                .value(v)
                .encode_into(&mut out);
        }
        s.write_all(&out).await.unwrap();
        let mut retry = Vec::new();
        let mut buf = Vec::new();
        let mut answered = 0;
        while answered < pending.len() {
            let mut chunk = [0u8; 65536];
            let n = tokio::time::timeout(TIMEOUT, s.read(&mut chunk))
                .await
                .expect("writer answered")
                .unwrap();
            assert!(n > 0);
            buf.extend_from_slice(&chunk[..n]);
            while let Ok(Decoded::Frame(f, used)) = decode_frame(&buf, 1 << 26) {
                match f.vbucket_or_status {
                    0 => {}
                    0x86 | 0x82 => {
                        tmpfails += 1;
                        retry.push(pending[f.opaque as usize]);
                    }
                    other => panic!("write failed with status 0x{other:x}"),
                }
                answered += 1;
                buf.drain(..used);
            }
        }
        if !retry.is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        pending = retry;
    }
    tmpfails
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Marker(SnapshotMarker),
    Item {
        kind: u8,
        key: Vec<u8>,
        value: Vec<u8>,
        seqno: u64,
    },
    End(StreamEndReason),
}

/// A DCP consumer on one connection.
pub struct Consumer {
    s: TcpStream,
    buf: Vec<u8>,
    pub events: BTreeMap<u16, Vec<Event>>,
    /// Per vbucket: last seqno and the current marker, to check the invariants.
    last: HashMap<u16, u64>,
    marker: HashMap<u16, SnapshotMarker>,
    /// Bytes of DCP messages received and not yet acked (noops excluded).
    pub unacked: usize,
    pub max_unacked_seen: usize,
    pub largest_message: usize,
    pub window: usize,
    /// Ack automatically once this many bytes are unacked (0: never).
    pub auto_ack_at: usize,
    pub noops_answered: usize,
}

impl Consumer {
    pub async fn open(addr: SocketAddr, name: &str, flags: u32, controls: &[(&str, &str)]) -> Self {
        let kv = super::kv_peer::Kv::open(addr).await;
        Consumer::open_on(kv, name, flags, controls).await
    }

    /// [`Consumer::open`] on a connection logged in already (as whoever the test needs).
    pub async fn open_on(
        kv: super::kv_peer::Kv,
        name: &str,
        flags: u32,
        controls: &[(&str, &str)],
    ) -> Self {
        // The same login as any KV connection; then the stream keeps the socket.
        let (s, buf) = kv.into_parts();
        let mut c = Consumer {
            s,
            buf,
            events: BTreeMap::new(),
            last: HashMap::new(),
            marker: HashMap::new(),
            unacked: 0,
            max_unacked_seen: 0,
            largest_message: 0,
            window: 0,
            auto_ack_at: 0,
            noops_answered: 0,
        };
        let mut e = [0u8; 8];
        e[4..].copy_from_slice(&(flags | 1).to_be_bytes());
        let open = c
            .call(Packet::request(0x50, 0, 3).extras(&e).key(name.as_bytes()))
            .await;
        assert_eq!(open.0, 0, "DCP_OPEN");
        for (k, v) in controls {
            let r = c
                .call(
                    Packet::request(0x5e, 0, 4)
                        .key(k.as_bytes())
                        .value(v.as_bytes()),
                )
                .await;
            assert_eq!(r.0, 0, "DCP_CONTROL {k}={v}");
            if *k == "connection_buffer_size" {
                c.window = v.parse().unwrap();
            }
        }
        c
    }

    /// A request/response exchange before streaming starts: (status, value).
    pub async fn call(&mut self, p: Packet<'_>) -> (u16, Vec<u8>) {
        self.s.write_all(&p.to_vec()).await.unwrap();
        loop {
            if let Decoded::Frame(f, used) = decode_frame(&self.buf, 1 << 26).unwrap() {
                assert_eq!(f.magic, Magic::ClientResponse);
                let r = (f.vbucket_or_status, f.value.to_vec());
                self.buf.drain(..used);
                return r;
            }
            self.fill().await;
        }
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).await.unwrap();
    }

    /// Handles stream messages until a response arrives: (status, value).
    pub async fn recv_response(&mut self) -> (u16, Vec<u8>) {
        loop {
            if let Some(status_and_value) = self.step_frame().await {
                return status_and_value;
            }
        }
    }

    /// The bytes of the next whole frame.
    async fn next_frame(&mut self) -> Vec<u8> {
        loop {
            match decode_frame(&self.buf, 1 << 26).unwrap() {
                Decoded::Frame(_, used) => return self.buf.drain(..used).collect(),
                Decoded::Incomplete { .. } => self.fill().await,
            }
        }
    }

    /// Reads one frame: a response is returned as (status, value); a stream message is
    /// handled (and a noop answered).
    async fn step_frame(&mut self) -> Option<(u16, Vec<u8>)> {
        let bytes = self.next_frame().await;
        let Ok(Decoded::Frame(f, used)) = decode_frame(&bytes, 1 << 26) else {
            unreachable!("a whole frame")
        };
        if f.magic == Magic::ClientResponse {
            return Some((f.vbucket_or_status, f.value.to_vec()));
        }
        if let Some(reply) = self.handle(&f, used) {
            self.s.write_all(&reply).await.unwrap();
        }
        None
    }

    async fn fill(&mut self) {
        let mut chunk = [0u8; 65536];
        let n = tokio::time::timeout(TIMEOUT, self.s.read(&mut chunk))
            .await
            .expect("server sends within the timeout")
            .unwrap();
        assert!(n > 0, "server closed the DCP connection");
        self.buf.extend_from_slice(&chunk[..n]);
    }

    /// Sends STREAM_REQ for each vb from `start` (uuid 0 = no history) and checks the answers.
    pub async fn stream_all(
        &mut self,
        vbs: std::ops::Range<u16>,
        start: u64,
        uuids: &HashMap<u16, u64>,
    ) {
        for vb in vbs.clone() {
            let req = StreamRequest {
                flags: StreamFlags(0),
                start: Seqno(start),
                end: Seqno::MAX,
                vb_uuid: VbUuid(uuids.get(&vb).copied().unwrap_or(0)),
                snap_start: Seqno(start),
                snap_end: Seqno(start),
            };
            let e = req.encode();
            self.s
                .write_all(
                    &Packet::request(0x53, vb, 1000 + u32::from(vb))
                        .extras(&e)
                        .to_vec(),
                )
                .await
                .unwrap();
        }
        let mut answered = 0;
        while answered < vbs.len() {
            if let Some(status) = self.step().await {
                assert_eq!(status, 0, "stream request answered with 0x{status:x}");
                answered += 1;
            }
        }
    }

    /// Reads and handles one frame; `Some(status)` if it was a response to us.
    pub async fn step(&mut self) -> Option<u16> {
        self.step_frame().await.map(|(status, _)| status)
    }

    fn handle(&mut self, f: &sluice_proto::Frame<'_>, used: usize) -> Option<Vec<u8>> {
        let vb = f.vbucket_or_status;
        let msg = DcpMessage::decode(f).expect("valid DCP message");
        if msg == DcpMessage::Noop {
            self.noops_answered += 1;
            let mut p = Vec::new();
            Packet::response(0x5c, sluice_proto::Status::Success, f.opaque).encode_into(&mut p);
            return Some(p);
        }
        assert_eq!(msg.wire_len(), used, "wire_len matches what was sent");
        self.unacked += used;
        self.max_unacked_seen = self.max_unacked_seen.max(self.unacked);
        self.largest_message = self.largest_message.max(used);
        let last = self.last.entry(vb).or_insert(0);
        let ev = match msg {
            DcpMessage::SnapshotMarker(m) => {
                assert!(m.start <= m.end, "marker {m:?}");
                assert!(
                    m.start.0 >= *last,
                    "vb {vb}: marker {m:?} starts below {last}"
                );
                self.marker.insert(vb, m);
                Event::Marker(m)
            }
            DcpMessage::Mutation(d) | DcpMessage::Deletion(d) | DcpMessage::Expiration(d) => {
                let kind = f.opcode;
                let m = self.marker.get(&vb).expect("a marker precedes items");
                assert!(
                    d.seqno.0 > *last,
                    "vb {vb}: seqno {} after {last} (duplicate or out of order)",
                    d.seqno.0
                );
                assert!(
                    m.start <= d.seqno && d.seqno <= m.end,
                    "vb {vb}: seqno {} outside marker {m:?}",
                    d.seqno.0
                );
                *last = d.seqno.0;
                Event::Item {
                    kind,
                    key: d.key.to_vec(),
                    value: d.value.to_vec(),
                    seqno: d.seqno.0,
                }
            }
            DcpMessage::StreamEnd(r) => Event::End(r),
            other => panic!("unexpected {other:?}"),
        };
        self.events.entry(vb).or_default().push(ev);
        (self.auto_ack_at > 0 && self.unacked >= self.auto_ack_at).then(|| self.ack_packet())
    }

    fn ack_packet(&mut self) -> Vec<u8> {
        let n = std::mem::take(&mut self.unacked) as u32;
        Packet::request(0x5d, 0, 0)
            .extras(&n.to_be_bytes())
            .to_vec()
    }

    pub async fn ack(&mut self) {
        let p = self.ack_packet();
        self.s.write_all(&p).await.unwrap();
    }

    /// Reads until every vb's last seqno reaches `targets` (or the stream ended).
    pub async fn read_until(&mut self, targets: &HashMap<u16, u64>) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let done = targets.iter().all(|(vb, t)| {
                self.last.get(vb).copied().unwrap_or(0) >= *t
                    || self
                        .events
                        .get(vb)
                        .is_some_and(|e| matches!(e.last(), Some(Event::End(_))))
            });
            if done {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "streams caught up in time"
            );
            self.step().await;
        }
    }

    pub fn last_seqno(&self, vb: u16) -> u64 {
        self.last.get(&vb).copied().unwrap_or(0)
    }

    /// key → (kind opcode, value) of the newest event per key, over all vbuckets.
    pub fn final_state(&self) -> HashMap<Vec<u8>, (u8, Vec<u8>)> {
        let mut m = HashMap::new();
        for evs in self.events.values() {
            for e in evs {
                if let Event::Item {
                    kind, key, value, ..
                } = e
                {
                    m.insert(key.clone(), (*kind, value.clone()));
                }
            }
        }
        m
    }

    pub fn markers(&self) -> Vec<SnapshotMarker> {
        self.events
            .values()
            .flatten()
            .filter_map(|e| match e {
                Event::Marker(m) => Some(*m),
                _ => None,
            })
            .collect()
    }

    pub fn ends(&self) -> Vec<(u16, StreamEndReason)> {
        self.events
            .iter()
            .flat_map(|(vb, evs)| {
                evs.iter().filter_map(move |e| match e {
                    Event::End(r) => Some((*vb, *r)),
                    _ => None,
                })
            })
            .collect()
    }
}

/// vb → high seqno, via GET_ALL_VB_SEQNOS on a fresh authenticated connection.
pub async fn high_seqnos(addr: SocketAddr) -> HashMap<u16, u64> {
    let mut kv = super::kv_peer::Kv::open(addr).await;
    let a = kv.call(Packet::request(0x48, 0, 3)).await;
    assert_eq!(a.status, 0);
    a.value
        .chunks(10)
        .map(|c| {
            (
                u16::from_be_bytes([c[0], c[1]]),
                u64::from_be_bytes(c[2..10].try_into().unwrap()),
            )
        })
        .collect()
}
