//! One task per connection: read bytes, cut frames, execute them strictly in order, and write
//! the answers. Pipelined requests are executed back to back and their answers written with
//! one syscall; quiet commands add nothing unless they fail.
//!
//! A connection that negotiated clustermap notifications (with duplex) also gets a server
//! request (magic 0x82, opcode 0x01) whenever the node starts serving a newer map, between
//! answers, never inside one.
//!
//! Bounds: the input buffer holds at most one packet of the largest allowed size (before
//! authentication, of `unauth_body_bytes_max`); the output is written out whenever it passes
//! `OUT_FLUSH_BYTES`. A connection not authenticated within `auth_timeout`, or idle (nothing
//! read, no answer pending) for `idle_timeout`, is closed. One admitted into the listener's
//! reserve (`system_only`) is closed as soon as it authenticates as anyone but the cluster.
//!
//! UnorderedExecution (HELLO 0x0e): a durable write (or a persistence wait) no longer holds
//! back the requests behind it. Its wait runs as a task of this connection; the requests
//! after it are executed and answered at once, and its answer goes out when it completes,
//! matched by opaque. A request with the barrier frame info waits for all of them first. At
//! most `UNORDERED_WAITS_MAX` wait at once; one more waits for the oldest to finish.

use crate::bucket_handle::BucketHandle;
use crate::cluster_map::MapView;
use crate::exec::{self, Held, Next};
use crate::node::Node;
use crate::session::{MapPush, Port, Session};
use bytes::{Buf, BytesMut};
use sluice_engine::EngineError;
use sluice_proto::{decode_frame, Decoded, Feature};
use sluice_types::limits::PACKET_BODY_BYTES_MAX;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

const READ_CHUNK_BYTES: usize = 64 * 1024;
const OUT_FLUSH_BYTES: usize = 1024 * 1024;
/// A request whose value was evicted is retried after a disk read; a concurrent rewrite can
/// evict it again, so the retries are bounded.
const FETCH_ATTEMPTS_MAX: usize = 4;
/// Durable writes one unordered connection may have waiting at once.
const UNORDERED_WAITS_MAX: usize = 1024;

/// How often a stalled write looks for room even without a wake-up (one can be missed
/// between the refusal and the wait, and nothing wakes it for memory freed by deletes).
const ROOM_RECHECK: std::time::Duration = std::time::Duration::from_millis(10);

/// Waits until the bucket has room for a refused write again: `false` once `deadline` passed
/// without it. The write is tried again only then, so that a wake-up shared by many stalled
/// connections does not send them all into another refusal.
async fn wait_for_room(bucket: &BucketHandle, deadline: tokio::time::Instant) -> bool {
    loop {
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return false;
        }
        tokio::select! {
            _ = bucket.write_room.notified() => {}
            _ = tokio::time::sleep_until(deadline.min(now + ROOM_RECHECK)) => {}
        }
        if bucket.engine.has_room_for_writes() {
            return true;
        }
    }
}

pub async fn handle(node: Arc<Node>, stream: TcpStream, port: Port, system_only: bool) {
    let peer = stream.peer_addr().ok();
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(?peer, error = %e, "connection closed");
        return;
    }
    let (rd, wr) = stream.into_split();
    if let Err(e) = serve(node, rd, wr, port, false, system_only).await {
        tracing::debug!(?peer, error = %e, "connection closed");
    }
}

/// A connection to the TLS KV port: the handshake (within the auth timeout), then the same
/// protocol inside it.
pub async fn handle_tls(node: Arc<Node>, stream: TcpStream, port: Port, system_only: bool) {
    let peer = stream.peer_addr().ok();
    let Some(tls) = node.tls.clone() else {
        return;
    };
    let served = async {
        stream.set_nodelay(true)?;
        let stream = tls.accept(stream, node.config.auth_timeout).await?;
        let (rd, wr) = tokio::io::split(stream);
        serve(node, rd, wr, port, true, system_only).await
    };
    if let Err(e) = served.await {
        tracing::debug!(?peer, error = %e, "TLS connection closed");
    }
}

/// Writes `out` and flushes it: a TLS stream may hold records back until flushed (a socket
/// flushes at once).
async fn send<W: AsyncWrite + Unpin>(wr: &mut W, out: &[u8]) -> std::io::Result<()> {
    wr.write_all(out).await?;
    wr.flush().await
}

/// When the connection is closed for want of authentication or of activity, if nothing
/// happens before: the auth deadline until it authenticates, then the idle one (none while
/// answers are pending).
fn quiet_deadline(
    node: &Node,
    session: &Session,
    accepted: tokio::time::Instant,
    last_read: tokio::time::Instant,
    waiting: bool,
) -> Option<tokio::time::Instant> {
    if !session.authenticated() {
        return Some(accepted + node.config.auth_timeout);
    }
    match waiting {
        true => None,
        false => node.config.idle_timeout.map(|idle| last_read + idle),
    }
}

async fn serve<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    node: Arc<Node>,
    mut rd: R,
    mut wr: W,
    port: Port,
    tls: bool,
    system_only: bool,
) -> std::io::Result<()> {
    let mut session = Session::new(port, node.config.value_bytes_max, node.bucket.clone());
    session.tls = tls;
    let mut inbuf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let mut out: Vec<u8> = Vec::with_capacity(READ_CHUNK_BYTES);
    // The map pushes follow the selected bucket's map: `maps` watches `maps_of`'s.
    let mut maps_of = node.bucket.clone();
    let mut maps = maps_of.watch_cluster_map();
    // Answers of unordered waits (see the module doc), each the bytes to write.
    let mut waits: JoinSet<Vec<u8>> = JoinSet::new();
    let accepted = tokio::time::Instant::now();
    let mut last_read = accepted;
    // One timer for the connection's life, armed at the auth deadline and moved on only when
    // it fires early (the idle deadline moved with the reads since): reads never touch it,
    // so the timer wheel sees one entry per idle period, not one per request.
    let quiet_timer = tokio::time::sleep_until(accepted + node.config.auth_timeout);
    tokio::pin!(quiet_timer);
    loop {
        loop {
            let body_max = match session.authenticated() {
                true => PACKET_BODY_BYTES_MAX,
                false => node.config.unauth_body_bytes_max,
            };
            let (used, next) = match decode_frame(&inbuf, body_max) {
                Err(e) => {
                    tracing::debug!(error = %e, "protocol error: disconnecting");
                    send(&mut wr, &out).await?;
                    return Ok(());
                }
                Ok(Decoded::Incomplete { needed }) => {
                    inbuf.reserve(needed.saturating_sub(inbuf.len()));
                    break;
                }
                Ok(Decoded::Frame(frame, used)) => {
                    if !waits.is_empty() && has_barrier(&frame) {
                        drain(&mut waits, &mut out).await;
                    }
                    let answered = out.len();
                    let mut next = exec::execute(&node, &mut session, &frame, &mut out);
                    if system_only && session.authenticated() && !session.is_cluster() {
                        // The reserve is the cluster's: no answer, not even the login's.
                        tracing::info!(user = ?session.user,
                            "a connection in the cluster's reserve logged in as a user: closed");
                        node.connections_rejected.fetch_add(1, Ordering::Relaxed);
                        out.truncate(answered);
                        send(&mut wr, &out).await?;
                        return Ok(());
                    }
                    let mut fetches = 1;
                    let mut stall_until = None;
                    loop {
                        match next {
                            Next::Fetch { vb, key } if fetches < FETCH_ATTEMPTS_MAX => {
                                fetches += 1;
                                let bucket = selected(&session).engine.clone();
                                let fetched =
                                    tokio::task::spawn_blocking(move || bucket.fetch(vb, &key))
                                        .await
                                        .map_err(std::io::Error::other)?;
                                if let Err(e) = fetched {
                                    tracing::warn!(error = %e, "reading an evicted value failed");
                                }
                            }
                            Next::Stall => {
                                let deadline = match stall_until {
                                    Some(d) => d,
                                    None => {
                                        // Answers before this one go out now; this one waits.
                                        send(&mut wr, &out).await?;
                                        out.clear();
                                        let d =
                                            tokio::time::Instant::now() + node.config.write_stall;
                                        stall_until = Some(d);
                                        d
                                    }
                                };
                                if !wait_for_room(&selected(&session), deadline).await {
                                    break;
                                }
                            }
                            _ => break,
                        }
                        next = exec::execute(&node, &mut session, &frame, &mut out);
                    }
                    match next {
                        // Evicted again on every attempt (memory pressure): ask for a retry.
                        Next::Fetch { .. } => {
                            let mut r = exec::Responder::new(
                                &mut out,
                                frame.opcode,
                                frame.opaque,
                                &session,
                            );
                            r.error(sluice_proto::Status::Etmpfail, "value not resident; retry");
                            next = Next::Continue;
                        }
                        // No room came in time: the refusal it would have had at once.
                        Next::Stall => {
                            let mut r = exec::Responder::new(
                                &mut out,
                                frame.opcode,
                                frame.opaque,
                                &session,
                            );
                            let bucket = selected(&session);
                            exec::engine_error(&mut r, &EngineError::TempFail, &bucket);
                            next = Next::Continue;
                        }
                        _ => {}
                    }
                    (used, next)
                }
            };
            inbuf.advance(used);
            match next {
                Next::Continue => {}
                Next::Close => {
                    send(&mut wr, &out).await?;
                    return Ok(());
                }
                Next::Fetch { .. } | Next::Stall => unreachable!("answered above"),
                Next::Hold(held) => {
                    let answer = held_answer(selected(&session), held);
                    if session.has(Feature::UnorderedExecution) {
                        make_room(&mut waits, &mut wr, &mut out).await?;
                        waits.spawn(answer);
                    } else {
                        // Answers before this one go out now; this one waits its turn.
                        send(&mut wr, &out).await?;
                        out.clear();
                        out.extend_from_slice(&answer.await);
                    }
                }
                Next::DcpProducer { name, flags } => {
                    drain(&mut waits, &mut out).await;
                    send(&mut wr, &out).await?;
                    return crate::dcp::producer::run(node, session, rd, wr, inbuf, name, flags)
                        .await;
                }
                Next::FlushAfter(delay) => {
                    let bucket = selected(&session).engine.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        let _ = tokio::task::spawn_blocking(move || bucket.flush_all()).await;
                    });
                }
            }
            if out.len() >= OUT_FLUSH_BYTES {
                send(&mut wr, &out).await?;
                out.clear();
            }
        }
        if !out.is_empty() {
            send(&mut wr, &out).await?;
            out.clear();
            if out.capacity() > 4 * OUT_FLUSH_BYTES {
                out.shrink_to(READ_CHUNK_BYTES);
            }
        }
        if inbuf.capacity() - inbuf.len() < 4096 {
            inbuf.reserve(READ_CHUNK_BYTES);
        }
        // `read_buf` is cancel safe: a map change wakes the loop without losing bytes. Only a
        // session that asked for map pushes waits on the map: each wait registers with the
        // watch, a lock every connection shares, and a closed loop of small requests waits
        // once per request (memaslap's gets spent about 2 % of the connection threads there).
        let wants_maps = session.map_push().is_some();
        if let Some(bucket) = session
            .bucket
            .as_ref()
            .filter(|b| !Arc::ptr_eq(b, &maps_of))
        {
            maps_of = bucket.clone();
            maps = maps_of.watch_cluster_map();
        }
        let quiet = quiet_deadline(&node, &session, accepted, last_read, !waits.is_empty());
        tokio::select! {
            read = rd.read_buf(&mut inbuf) => {
                if read? == 0 {
                    return Ok(());
                }
                last_read = tokio::time::Instant::now();
            }
            _ = &mut quiet_timer, if quiet.is_some() => {
                let deadline = quiet.unwrap_or(accepted);
                if deadline > tokio::time::Instant::now() {
                    quiet_timer.as_mut().reset(deadline);
                } else {
                    let why = match session.authenticated() {
                        true => "idle for longer than the idle timeout",
                        false => "not authenticated within the auth timeout",
                    };
                    tracing::debug!(why, "closing the connection");
                    return Ok(());
                }
            }
            changed = maps.changed(), if wants_maps => {
                if changed.is_ok() {
                    let view = maps.borrow_and_update().clone();
                    push_map(&mut session, &maps_of.name, &view, &mut out);
                }
            }
            Some(done) = waits.join_next(), if !waits.is_empty() => collect(done, &mut out),
        }
    }
}

/// The bucket the command just executed ran on: a fetch, a stall, a hold or a delayed flush
/// only follows a command on the selected bucket.
fn selected(session: &Session) -> Arc<BucketHandle> {
    session
        .bucket
        .clone()
        .expect("only commands on the selected bucket fetch, stall, hold or flush")
}

/// The answer a held request ends with, once what it waits for happened or timed out.
async fn held_answer(bucket: Arc<BucketHandle>, held: Held) -> Vec<u8> {
    match held {
        Held::Persistence {
            vb,
            seqno,
            timeout,
            on_success,
            on_timeout,
        } => {
            let done = crate::durability::wait_persisted(&bucket, vb, seqno, timeout).await;
            if done {
                on_success
            } else {
                on_timeout
            }
        }
        Held::Durability {
            write,
            on_success,
            on_timeout,
        } => {
            let outcome = crate::durability::wait(&bucket, write).await;
            if outcome == crate::durability::WriteOutcome::Committed {
                on_success
            } else {
                on_timeout
            }
        }
    }
}

/// Whether the request carries the barrier frame info: everything before it completes first.
fn has_barrier(frame: &sluice_proto::Frame<'_>) -> bool {
    sluice_proto::frame_info::parse_frame_infos(frame.framing_extras).is_ok_and(|f| f.barrier)
}

fn collect(done: Result<Vec<u8>, tokio::task::JoinError>, out: &mut Vec<u8>) {
    match done {
        Ok(answer) => out.extend_from_slice(&answer),
        Err(e) => tracing::error!(error = %e, "a durable write's wait failed; no answer sent"),
    }
}

/// Waits for every unordered wait, appending their answers.
async fn drain(waits: &mut JoinSet<Vec<u8>>, out: &mut Vec<u8>) {
    while let Some(done) = waits.join_next().await {
        collect(done, out);
    }
}

/// Keeps the unordered waits under their bound: at the bound, what is answered goes out and
/// the next wait to finish is awaited.
async fn make_room<W: AsyncWrite + Unpin>(
    waits: &mut JoinSet<Vec<u8>>,
    wr: &mut W,
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    if waits.len() < UNORDERED_WAITS_MAX {
        return Ok(());
    }
    send(wr, out).await?;
    out.clear();
    if let Some(done) = waits.join_next().await {
        collect(done, out);
    }
    Ok(())
}

/// Tells a client that asked for it about a map newer than any it has seen here.
fn push_map(session: &mut Session, bucket: &str, view: &MapView, out: &mut Vec<u8>) {
    let Some(mode) = session.map_push() else {
        return;
    };
    let version = view.version();
    if session.map_sent.is_some_and(|seen| seen >= version) {
        return;
    }
    let mut extras = [0u8; 16];
    extras[..8].copy_from_slice(&version.epoch.to_be_bytes());
    extras[8..].copy_from_slice(&version.rev.to_be_bytes());
    let mut p = sluice_proto::encode::Packet::server_request(0x01, 0)
        .extras(&extras)
        .key(bucket.as_bytes());
    if mode == MapPush::Full {
        p = p
            .datatype(sluice_types::Datatype::JSON)
            .value(&view.bucket_json);
    }
    p.encode_into(out);
    session.map_seen(version);
}
