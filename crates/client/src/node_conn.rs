//! One pipelined connection to one node, shared by every task of a cluster client.
//!
//! A caller takes an in-flight permit, gives its encoded request (with a fresh opaque) to the
//! writer task and waits for its answer; the reader task hands each answer to whoever sent
//! the request with that opaque. So requests from many callers travel back to back on the
//! socket, the writer coalesces whatever is queued into one write, and reads never wait for
//! writes (a server blocked on writing answers would otherwise stop reading requests).
//!
//! ```text
//!  callers ──permit──▶ mpsc (≤ in-flight max) ──▶ writer ──▶ socket ──▶ server
//!     ▲                                              │ registers opaque → waiter
//!     └──────────── oneshot ◀── reader (by opaque) ◀─┴──────── socket ◀─┘
//! ```
//!
//! Bounds: at most `in_flight_max` requests between permit and answer (the permit travels
//! with the waiter and is released when the answer arrives or the connection dies); the
//! writer sends once it has `WRITE_BATCH_BYTES` (plus at most one request) buffered; the read
//! buffer is the one [`Connection`](crate::connection) uses.
//!
//! When either task fails, the connection is dead: every waiter gets the error, later calls
//! fail at once, and the owner replaces it. Dropping the last handle stops both tasks.

use crate::stream::ClientStream;
use bytes::BytesMut;
use sluice_proto::encode::Packet;
use sluice_proto::Feature;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::client::Client;
use crate::connection::{take_response, READ_CHUNK_BYTES};
use crate::error::ClientError;
use crate::response::Response;

/// The writer sends once this much is buffered, rather than draining the queue further.
const WRITE_BATCH_BYTES: usize = 64 * 1024;

/// Why a request sent on a node connection got no answer.
#[derive(Debug, Clone)]
pub(crate) enum CallError {
    /// The connection failed (or was already dead); the request may or may not have been
    /// executed if it had been written.
    Lost(Arc<ClientError>),
    /// No answer (or no in-flight permit) before the deadline.
    Timeout,
}

type Reply = Result<Response, Arc<ClientError>>;

/// A request on its way to the socket, and who waits for its answer.
struct Submit {
    frame: Vec<u8>,
    opaque: u32,
    waiter: Waiter,
}

struct Waiter {
    reply: oneshot::Sender<Reply>,
    /// Released with the waiter: when the answer arrives or the connection dies.
    _permit: OwnedSemaphorePermit,
}

/// What the reader and writer share: who waits for which opaque, and whether the
/// connection is dead (then with the error every later caller gets).
#[derive(Default)]
struct Pending {
    waiters: HashMap<u32, Waiter>,
    dead: Option<Arc<ClientError>>,
}

pub(crate) struct NodeConn {
    addr: String,
    submit: mpsc::Sender<Submit>,
    permits: Arc<Semaphore>,
    next_opaque: AtomicU32,
    pending: Arc<Mutex<Pending>>,
    /// MutationSeqno was negotiated: mutations answer with a token.
    seqno_tokens: bool,
    /// Collections was negotiated: every key carries its collection's id.
    collections: bool,
    reader: JoinHandle<()>,
    writer: JoinHandle<()>,
}

impl std::fmt::Debug for NodeConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeConn")
            .field("addr", &self.addr)
            .field("dead", &self.is_dead())
            .finish()
    }
}

impl Drop for NodeConn {
    fn drop(&mut self) {
        self.reader.abort();
        self.writer.abort();
    }
}

impl NodeConn {
    /// Takes over a bootstrapped connection (nothing may be in flight on it).
    pub(crate) fn start(client: Client, addr: String, in_flight_max: usize) -> NodeConn {
        assert_eq!(client.in_flight(), 0, "a node connection starts idle");
        assert!(
            in_flight_max > 0,
            "a node connection needs an in-flight slot"
        );
        let seqno_tokens = client.has_feature(Feature::MutationSeqno);
        let collections = client.has_feature(Feature::Collections);
        let (stream, read_buf) = client.into_parts();
        let (submit, queue) = mpsc::channel(in_flight_max);
        let pending = Arc::new(Mutex::new(Pending::default()));
        // A socket splits into owned halves; TLS shares one stream between its halves.
        let (reader, writer) = match stream {
            ClientStream::Plain(s) => {
                let (rd, wr) = s.into_split();
                (
                    tokio::spawn(read_loop(rd, read_buf, pending.clone())),
                    tokio::spawn(write_loop(wr, queue, pending.clone())),
                )
            }
            ClientStream::Tls(s) => {
                let (rd, wr) = tokio::io::split(*s);
                (
                    tokio::spawn(read_loop(rd, read_buf, pending.clone())),
                    tokio::spawn(write_loop(wr, queue, pending.clone())),
                )
            }
        };
        NodeConn {
            addr,
            submit,
            permits: Arc::new(Semaphore::new(in_flight_max)),
            next_opaque: AtomicU32::new(1),
            pending,
            seqno_tokens,
            collections,
            reader,
            writer,
        }
    }

    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    pub(crate) fn seqno_tokens(&self) -> bool {
        self.seqno_tokens
    }

    pub(crate) fn collections(&self) -> bool {
        self.collections
    }

    pub(crate) fn is_dead(&self) -> bool {
        lock(&self.pending).dead.is_some()
    }

    /// Sends `packet` (its opaque is replaced) and waits for the answer until `deadline`.
    /// Cancel-safe: a dropped call's answer is discarded when it arrives.
    pub(crate) async fn call(
        &self,
        packet: Packet<'_>,
        deadline: Instant,
    ) -> Result<Response, CallError> {
        if let Some(e) = lock(&self.pending).dead.clone() {
            return Err(CallError::Lost(e));
        }
        let permit = tokio::time::timeout_at(deadline, self.permits.clone().acquire_owned())
            .await
            .map_err(|_| CallError::Timeout)?
            .expect("the semaphore is never closed");
        let opaque = self.next_opaque.fetch_add(1, Ordering::Relaxed);
        let mut frame = Vec::with_capacity(64 + packet.key.len() + packet.value.len());
        Packet { opaque, ..packet }.encode_into(&mut frame);
        let (reply, answer) = oneshot::channel();
        let waiter = Waiter {
            reply,
            _permit: permit,
        };
        // The permit bounds the queue: it never holds more than `in_flight_max` requests.
        if self
            .submit
            .try_send(Submit {
                frame,
                opaque,
                waiter,
            })
            .is_err()
        {
            return Err(CallError::Lost(Arc::new(ClientError::Closed)));
        }
        match tokio::time::timeout_at(deadline, answer).await {
            Err(_) => Err(CallError::Timeout),
            Ok(Ok(Ok(resp))) => Ok(resp),
            Ok(Ok(Err(e))) => Err(CallError::Lost(e)),
            // The tasks were stopped with the waiter in hand.
            Ok(Err(_)) => Err(CallError::Lost(Arc::new(ClientError::Closed))),
        }
    }
}

fn lock(pending: &Mutex<Pending>) -> std::sync::MutexGuard<'_, Pending> {
    // A panic while holding this lock leaves consistent state (plain inserts and removes).
    pending.lock().unwrap_or_else(|p| p.into_inner())
}

/// Marks the connection dead and fails every waiter with `error`.
fn kill(pending: &Mutex<Pending>, error: ClientError) {
    let mut p = lock(pending);
    let error = p.dead.get_or_insert_with(|| Arc::new(error)).clone();
    for (_, w) in p.waiters.drain() {
        let _ = w.reply.send(Err(error.clone()));
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut wr: W,
    mut queue: mpsc::Receiver<Submit>,
    pending: Arc<Mutex<Pending>>,
) {
    let mut buf: Vec<u8> = Vec::with_capacity(WRITE_BATCH_BYTES);
    // Ends when every handle is gone (the owner dropped the connection).
    while let Some(first) = queue.recv().await {
        buf.clear();
        let mut next = Some(first);
        while let Some(s) = next.take() {
            {
                let mut p = lock(&pending);
                if let Some(e) = p.dead.clone() {
                    let _ = s.waiter.reply.send(Err(e));
                } else {
                    // Registered before the bytes leave, so the reader always finds it.
                    let previous = p.waiters.insert(s.opaque, s.waiter);
                    debug_assert!(previous.is_none(), "opaques are unique among in-flight");
                    buf.extend_from_slice(&s.frame);
                }
            }
            if buf.len() < WRITE_BATCH_BYTES {
                next = queue.try_recv().ok();
            }
        }
        if buf.is_empty() {
            continue;
        }
        // Flushed too: TLS holds records back until then (a socket flushes at once).
        if let Err(e) = send(&mut wr, &buf).await {
            kill(&pending, ClientError::Io(e));
            return;
        }
        // Don't keep a large request's buffer around.
        if buf.capacity() > 4 * WRITE_BATCH_BYTES {
            buf = Vec::with_capacity(WRITE_BATCH_BYTES);
        }
    }
}

async fn send<W: AsyncWrite + Unpin>(wr: &mut W, buf: &[u8]) -> std::io::Result<()> {
    wr.write_all(buf).await?;
    wr.flush().await
}

async fn read_loop<R: AsyncRead + Unpin>(
    mut rd: R,
    mut buf: BytesMut,
    pending: Arc<Mutex<Pending>>,
) {
    buf.reserve(READ_CHUNK_BYTES);
    let error = loop {
        match take_response(&mut buf) {
            Err(e) => break e,
            Ok(Some(resp)) => {
                // A caller that gave up leaves its waiter here until the answer comes, so
                // an opaque nobody waits for means the stream is out of step.
                let waiter = lock(&pending).waiters.remove(&resp.opaque);
                match waiter {
                    Some(w) => {
                        let _ = w.reply.send(Ok(resp));
                    }
                    None => {
                        break ClientError::Unexpected("a response to no request in flight");
                    }
                }
            }
            Ok(None) => match rd.read_buf(&mut buf).await {
                Ok(0) => break ClientError::Closed,
                Ok(_) => {}
                Err(e) => break ClientError::Io(e),
            },
        }
    };
    kill(&pending, error);
}
