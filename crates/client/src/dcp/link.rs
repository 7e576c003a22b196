//! The socket side of a DCP connection: one task that reads and writes at the same time.
//!
//! Why a task: the producer's DCP_NOOP must be answered within one noop interval or the
//! producer hangs up, and that must not depend on how fast the application calls
//! `next()`. The task answers noops itself, decodes everything else and hands it over in
//! order; the application side sends its requests (stream requests, acks) back through it.
//!
//! Memory: the hand-over queue is unbounded in messages but bounded in bytes by flow
//! control. The producer stops once the unacked bytes reach the window, and the client acks
//! only what it has delivered, so at most window + one message sits in the queue, plus the
//! read buffer (one frame and one read chunk).

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use sluice_proto::dcp::DcpMessage;
use sluice_proto::encode::Packet;
use sluice_proto::{decode_frame, Decoded, Magic, Opcode, Status};
use sluice_types::limits::PACKET_BODY_BYTES_MAX;
use sluice_types::VbId;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::error::DcpError;
use crate::net::write_or_flush;
use crate::stream::ClientStream;

const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Something the producer sent, other than a noop.
#[derive(Debug)]
pub(crate) enum Inbound {
    /// A producer message for a stream; `wire_len` is what flow control counted for it.
    Message {
        vb: VbId,
        opaque: u32,
        msg: DcpMessage,
        wire_len: usize,
    },
    /// The answer to one of our requests (the status sits where requests have the vbucket).
    Response {
        opcode: u8,
        status: u16,
        opaque: u32,
        value: Bytes,
    },
}

/// The application's end of the task.
pub(crate) struct Link {
    inbound: mpsc::UnboundedReceiver<Result<Inbound, DcpError>>,
    outbound: mpsc::UnboundedSender<Vec<u8>>,
}

impl Link {
    /// Starts the task on `stream`; `pending` holds bytes already read past the bootstrap.
    pub(crate) fn spawn(stream: ClientStream, pending: BytesMut, dead_after: Duration) -> Link {
        let (in_tx, in_rx) = mpsc::unbounded_channel();
        let (out_tx, out_rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let result = match stream {
                // A socket splits without a lock; TLS (a member's stream when the cluster
                // encrypts its data) through tokio's split.
                ClientStream::Plain(tcp) => {
                    let (rd, wr) = tcp.into_split();
                    run(rd, wr, pending, dead_after, &in_tx, out_rx).await
                }
                ClientStream::Tls(tls) => {
                    let (rd, wr) = tokio::io::split(*tls);
                    run(rd, wr, pending, dead_after, &in_tx, out_rx).await
                }
            };
            if let Err(e) = result {
                let _ = in_tx.send(Err(e));
            }
        });
        Link {
            inbound: in_rx,
            outbound: out_tx,
        }
    }

    /// Queues bytes to send; fails only once the connection is gone (the next `recv`
    /// then reports why).
    pub(crate) fn send(&self, bytes: Vec<u8>) {
        let _ = self.outbound.send(bytes);
    }

    /// The next thing the producer sent, in order. Cancel-safe.
    pub(crate) async fn recv(&mut self) -> Result<Inbound, DcpError> {
        match self.inbound.recv().await {
            Some(r) => r,
            // The task ended after reporting its error, which was already delivered.
            None => Err(DcpError::Closed),
        }
    }
}

/// Runs until the connection fails (the error is returned), the application drops its
/// end (`Ok`), or the producer sends something undecodable.
///
/// What was written is flushed before more is taken: a TLS stream may hold records back
/// until flushed (a socket's flush does nothing).
async fn run<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    mut rd: R,
    mut wr: W,
    mut buf: BytesMut,
    dead_after: Duration,
    inbound: &mpsc::UnboundedSender<Result<Inbound, DcpError>>,
    mut outbound: mpsc::UnboundedReceiver<Vec<u8>>,
) -> Result<(), DcpError> {
    let mut out: Vec<u8> = Vec::new();
    let mut written = 0usize;
    let mut unflushed = false;
    let mut last_heard = Instant::now();
    loop {
        if !drain_frames(&mut buf, inbound, &mut out)? {
            return Ok(());
        }
        if buf.capacity() - buf.len() < READ_CHUNK_BYTES / 4 {
            buf.reserve(READ_CHUNK_BYTES);
        }
        tokio::select! {
            n = rd.read_buf(&mut buf) => {
                if n? == 0 {
                    return Err(DcpError::Closed);
                }
                last_heard = Instant::now();
            }
            // Writes what is queued, then (all written) one flush per burst.
            n = write_or_flush(&mut wr, &out[written..]), if written < out.len() || unflushed => {
                let n = n?;
                if written == out.len() {
                    unflushed = false;
                } else if n == 0 {
                    return Err(DcpError::Closed);
                } else {
                    written += n;
                    unflushed = true;
                    if written == out.len() {
                        out.clear();
                        written = 0;
                    }
                }
            }
            bytes = outbound.recv() => match bytes {
                Some(b) => out.extend_from_slice(&b),
                None => return Ok(()),
            },
            _ = tokio::time::sleep_until(last_heard + dead_after) => {
                return Err(DcpError::DeadConnection(dead_after));
            }
        }
    }
}

/// Hands every complete frame in `buf` over (or answers it, for noops). `false`: the
/// application is gone.
fn drain_frames(
    buf: &mut BytesMut,
    inbound: &mpsc::UnboundedSender<Result<Inbound, DcpError>>,
    out: &mut Vec<u8>,
) -> Result<bool, DcpError> {
    loop {
        let (item, used) = match decode_frame(buf, PACKET_BODY_BYTES_MAX)? {
            Decoded::Incomplete { needed } => {
                buf.reserve(needed.saturating_sub(buf.len()));
                return Ok(true);
            }
            Decoded::Frame(f, used) => match f.magic {
                Magic::ClientRequest if f.opcode == Opcode::DcpNoop.byte() => {
                    // Answered here, at once: the producer disconnects a consumer that
                    // leaves a noop unanswered for a whole interval.
                    Packet::response(Opcode::DcpNoop.byte(), Status::Success, f.opaque)
                        .encode_into(out);
                    (None, used)
                }
                Magic::ClientRequest => {
                    let msg = DcpMessage::decode(&f)?;
                    let item = Inbound::Message {
                        vb: VbId(f.vbucket_or_status),
                        opaque: f.opaque,
                        msg,
                        wire_len: used,
                    };
                    (Some(item), used)
                }
                Magic::ClientResponse | Magic::AltClientResponse => {
                    let item = Inbound::Response {
                        opcode: f.opcode,
                        status: f.vbucket_or_status,
                        opaque: f.opaque,
                        value: Bytes::copy_from_slice(f.value),
                    };
                    (Some(item), used)
                }
                other => {
                    return Err(
                        sluice_proto::dcp::DecodeError::UnsupportedMagic(other.byte()).into(),
                    )
                }
            },
        };
        let _ = buf.split_to(used);
        if let Some(item) = item {
            if inbound.send(Ok(item)).is_err() {
                return Ok(false);
            }
        }
    }
}
