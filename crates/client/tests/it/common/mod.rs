//! Test helpers: a scripted in-test server and a real memcached started per test.
#![allow(dead_code)] // each test file uses a different subset

pub mod memcached;

use sluice_proto::encode::Packet;
use sluice_proto::{decode_frame, Decoded, Status};
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A request as the scripted server saw it.
#[derive(Debug, Clone)]
pub struct Req {
    pub opcode: u8,
    pub vb: u16,
    pub opaque: u32,
    pub cas: u64,
    pub extras: Vec<u8>,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

/// What the script does after a request.
pub enum Reply {
    /// Write these bytes (zero or more packets, or garbage).
    Bytes(Vec<u8>),
    /// Write these bytes, then close the connection.
    BytesThenClose(Vec<u8>),
    /// Close the connection.
    Close,
}

/// Accepts one connection and answers each request with `script(request)`.
pub async fn scripted_server<F>(mut script: F) -> SocketAddr
where
    F: FnMut(Req) -> Reply + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut buf = Vec::new();
        loop {
            let req = match decode_frame(&buf, 1 << 20).unwrap() {
                Decoded::Frame(f, used) => {
                    let req = Req {
                        opcode: f.opcode,
                        vb: f.vbucket_or_status,
                        opaque: f.opaque,
                        cas: f.cas,
                        extras: f.extras.to_vec(),
                        key: f.key.to_vec(),
                        value: f.value.to_vec(),
                    };
                    buf.drain(..used);
                    req
                }
                Decoded::Incomplete { .. } => {
                    let mut chunk = [0u8; 4096];
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    continue;
                }
            };
            match script(req) {
                Reply::Bytes(b) => {
                    if sock.write_all(&b).await.is_err() {
                        return;
                    }
                }
                Reply::BytesThenClose(b) => {
                    let _ = sock.write_all(&b).await;
                    return;
                }
                Reply::Close => return,
            }
        }
    });
    addr
}

/// A response to `req` with `status`, echoing its opcode and opaque.
pub fn answer(req: &Req, status: Status) -> Packet<'static> {
    Packet::response(req.opcode, status, req.opaque)
}
pub mod dcp_node;
