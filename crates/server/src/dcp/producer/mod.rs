//! A producer connection's loop: the I/O around `sluice_dcp`'s decisions (the
//! [`Producer`] and its streams, the [`BackfillScheduler`], the per-vbucket [`StreamSlots`]).
//!
//! Layout: this file holds the connection and its loop; `requests` answers what the client
//! sends, and `filter` checks the collection filter a stream request names; `reads` carries
//! out the streams' actions, reads cursors and runs backfill tasks; `stats` publishes what
//! STAT `dcp` shows.
//!
//! Each pass:
//! 1. carry out the streams' actions (register cursors, request backfills, release cursors);
//! 2. read the cursors of vbuckets that changed, for streams with room in their ready queue;
//! 3. run the backfill tasks the scheduler hands out (blocking tasks, at most
//!    [`BACKFILLS_IN_FLIGHT_MAX`] at a time, in turns, within the backfill buffer);
//! 4. encode ready messages while flow control allows.
//!
//! Then it waits for whichever comes first: bytes from the client, the socket accepting
//! output, a vbucket changing, a backfill read finishing, the noop timer, or a kick.
//! Writing is always armed. Reading is armed while the unwritten output is below
//! `UNSENT_BYTES_MAX`: a client that sends requests and never reads their answers gets no
//! more than that queued for it; its requests wait in its own socket buffers (as a kernel's
//! would), and the requests read already wait in the input buffer until the output drains.
//!
//! Memory bound per connection, in bytes: the backfill buffer (`--dcp-backfill-buffer-mb`,
//! default 20 MiB, at least 8 MiB) holds queued
//! messages and the backfill chunks being read, give or take one item; the output buffer
//! adds at most `UNSENT_BYTES_MAX` plus one answer or one message; the input buffer at most
//! one read chunk and one packet.

mod filter;
mod reads;
mod requests;
mod stats;

use super::registry::ConnShared;
use super::replication_stats::now_unix_ns;
use super::stages::Stage;
use super::wake::ConnWake;
use crate::bucket_handle::BucketHandle;
use crate::node::Node;
use crate::session::Session;
use bytes::BytesMut;
use sluice_client::net::write_or_flush;
use sluice_dcp::backfill::{BackfillLimits, BackfillScheduler, StreamId};
use sluice_dcp::filter::KeyMode;
use sluice_dcp::noop::NoopAction;
use sluice_dcp::producer::Producer;
use sluice_dcp::sent_stamps::SentStamps;
use sluice_dcp::slot::StreamSlots;
use sluice_dcp::stream::StreamAction;
use sluice_dcp::stream_key::StreamKey;
use sluice_engine::{Backfill, ChangeListener, CursorId, EngineError, QueuedItem};
use sluice_proto::dcp::OpenFlags;
use sluice_proto::Feature;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinSet;

/// One backfill read returns about this much.
const BACKFILL_CHUNK_BYTES: usize = 4 * 1024 * 1024;
/// Backfill reads running at once for one connection (interleaving its vbuckets).
const BACKFILLS_IN_FLIGHT_MAX: usize = 2;
/// Backfills started (holding a storage snapshot) and not finished, per connection (see
/// `sluice_dcp::backfill` for why tens).
const BACKFILLS_OPEN_MAX: usize = 16;
/// One cursor read returns about this much.
const CURSOR_READ_BYTES: usize = 512 * 1024;
/// A stream's ready queue is topped up from its cursor while below this.
const STREAM_READY_BYTES_MAX: usize = 1024 * 1024;
/// Output is encoded while the unwritten output is below this.
const OUT_HIGH_BYTES: usize = 256 * 1024;
/// Requests are read and answered while the unwritten output is below this: the streams'
/// share (`OUT_HIGH_BYTES`) and as much again for answers.
const UNSENT_BYTES_MAX: usize = 2 * OUT_HIGH_BYTES;
/// Messages per pass = the priority's batch × this (the ratios between priorities are the
/// reference server's 50 : 5 : 1; a pass here ends in one write syscall, so it is larger).
const PASS_SCALE: usize = 20;
const STATS_EVERY: Duration = Duration::from_secs(1);
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// Documents of one output buffer timed to the socket ("sent" stage) at most; a larger
/// backlog is timed by its first this many (see `sluice_dcp::sent_stamps`).
const SENT_STAMPS_MAX: usize = 4096;

/// A backfill task's result, for the stream that asked for it.
enum BackfillDone {
    Started {
        key: StreamKey,
        stream: StreamId,
        result: Result<Backfill, EngineError>,
    },
    Chunk {
        key: StreamKey,
        stream: StreamId,
        backfill: Backfill,
        items: Result<Vec<Arc<QueuedItem>>, EngineError>,
    },
}

struct Conn {
    node: Arc<Node>,
    /// The bucket the connection selected before DCP_OPEN: the one it streams.
    bucket: Arc<BucketHandle>,
    session: Session,
    producer: Producer,
    shared: Arc<ConnShared>,
    wake: Arc<ConnWake>,
    /// Per stream key: the current stream's id, its cursor, whether it is a takeover.
    slots: StreamSlots<CursorId>,
    backfills: BackfillScheduler<Backfill, StreamKey>,
    /// The backfill tasks the scheduler handed out, running on the blocking pool.
    in_flight: JoinSet<BackfillDone>,
    /// Stream actions not carried out yet.
    actions: VecDeque<(StreamKey, StreamAction)>,
    /// How values go out: compressed or not, with or without their xattrs.
    form: ValueForm,
    /// Another member's replication or rebalance: its changes' stages are timed
    /// (`super::stages`).
    timed: bool,
}

/// What the consumer negotiated for the values it receives.
#[derive(Debug, Clone, Copy)]
pub(super) struct ValueForm {
    /// HELLO SNAPPY: compressed values go out as stored.
    pub snappy: bool,
    /// DCP_OPEN IncludeXattrs: values keep their xattr section.
    pub xattrs: bool,
}

pub async fn run<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    node: Arc<Node>,
    session: Session,
    mut rd: R,
    mut wr: W,
    mut inbuf: BytesMut,
    name: String,
    flags: OpenFlags,
) -> std::io::Result<()> {
    let bucket = session
        .bucket
        .clone()
        .expect("DCP_OPEN is refused before SELECT_BUCKET");
    let shared = node.dcp.register(&name, session.tls);
    let wake = Arc::new(ConnWake::new(bucket.engine.num_vbuckets()));
    let listener: Arc<dyn ChangeListener> = wake.clone();
    bucket.engine.add_change_listener(&listener);
    tracing::info!(name, ?flags, "DCP producer connection opened");
    let form = ValueForm {
        snappy: session.has(Feature::Snappy),
        xattrs: flags.contains(OpenFlags::INCLUDE_XATTRS),
    };
    let mut producer = Producer::new(name.clone(), flags, Instant::now());
    // Another member's replication takes the vbucket as stored; other consumers read
    // collections as they negotiated.
    producer.collections = match (session.is_cluster(), session.has(Feature::Collections)) {
        (true, _) => KeyMode::Raw,
        (false, true) => KeyMode::Aware,
        (false, false) => KeyMode::Legacy,
    };
    let timed = session.is_cluster();
    if timed {
        producer.sent_stamps = Some(SentStamps::new(SENT_STAMPS_MAX));
    }
    let mut conn = Conn {
        producer,
        node: node.clone(),
        bucket: bucket.clone(),
        session,
        shared: shared.clone(),
        wake: wake.clone(),
        slots: StreamSlots::default(),
        backfills: BackfillScheduler::new(BackfillLimits::new(
            BACKFILL_CHUNK_BYTES,
            BACKFILLS_IN_FLIGHT_MAX,
            BACKFILLS_OPEN_MAX,
            node.config.dcp_backfill_buffer_bytes,
        )),
        in_flight: JoinSet::new(),
        actions: VecDeque::new(),
        form,
        timed,
    };
    let result = conn.serve(&mut rd, &mut wr, &mut inbuf).await;
    conn.release_all();
    bucket.durability.connection_closed(shared.id);
    node.dcp.unregister(shared.id);
    tracing::info!(name, "DCP producer connection closed");
    result
}

impl Conn {
    async fn serve<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
        &mut self,
        rd: &mut R,
        wr: &mut W,
        inbuf: &mut BytesMut,
    ) -> std::io::Result<()> {
        let mut out: Vec<u8> = Vec::with_capacity(OUT_HIGH_BYTES);
        let mut written = 0usize;
        let wake = self.wake.clone();
        let shared = self.shared.clone();
        let notified = wake.notify.notified();
        tokio::pin!(notified);
        let kicked = shared.kick.notified();
        tokio::pin!(kicked);
        let mut next_stats = Instant::now();
        // Written but maybe not sent: a TLS stream buffers records it could not send yet,
        // and sends them only when written to or flushed again. A socket is always flushed,
        // so on cleartext this stays false and costs no extra turn of the loop.
        let mut unflushed = false;
        let buffers = self.session.tls;
        loop {
            // Requests read already (with DCP_OPEN, or held back while the output was full)
            // are answered while there is room for their answers.
            if !self.handle_input(inbuf, &mut out, written + UNSENT_BYTES_MAX) {
                wr.write_all(&out[written..]).await?;
                wr.flush().await?;
                return Ok(());
            }
            self.pump(&mut out);
            let now = Instant::now();
            if now >= next_stats {
                self.publish_stats();
                next_stats = now + STATS_EVERY;
                if self.bucket.is_deleted() {
                    tracing::info!(name = %self.producer.name, bucket = %self.bucket.name,
                        "DCP connection closed: its bucket was deleted");
                    return Ok(());
                }
                if !self.still_allowed() {
                    tracing::info!(name = %self.producer.name, user = ?self.session.user,
                        "DCP connection closed: its user lost the DCP role on the bucket (or was deleted)");
                    return Ok(());
                }
            }
            let noop_at = self.producer.noop.next_deadline();
            let deadline = noop_at.map_or(next_stats, |d| d.min(next_stats));
            if inbuf.capacity() - inbuf.len() < 4096 {
                inbuf.reserve(READ_CHUNK_BYTES);
            }
            tokio::select! {
                _ = &mut kicked => return Ok(()),
                n = rd.read_buf(inbuf), if out.len() - written < UNSENT_BYTES_MAX => {
                    if n? == 0 {
                        return Ok(());
                    }
                }
                // One cancel-safe step: a write while output is unsent, then a flush.
                n = write_or_flush(wr, &out[written..]), if written < out.len() || unflushed => {
                    let n = n?;
                    unflushed = buffers && n > 0;
                    written += n;
                    if let Some(stamps) = self.producer.sent_stamps.as_mut() {
                        let stages = &self.node.replication.stages;
                        stages.record_all(Stage::Sent, stamps.written(written), now_unix_ns());
                    }
                    if written == out.len() {
                        out.clear();
                        written = 0;
                        if let Some(stamps) = self.producer.sent_stamps.as_mut() {
                            stamps.rebase();
                        }
                    }
                }
                _ = &mut notified => {
                    notified.set(wake.notify.notified());
                }
                Some(done) = self.in_flight.join_next(), if !self.in_flight.is_empty() => {
                    match done {
                        Ok(done) => self.on_backfill_done(done),
                        Err(e) => return Err(std::io::Error::other(e)),
                    }
                }
                _ = tokio::time::sleep_until(deadline.into()) => {
                    match self.producer.noop.tick(Instant::now()) {
                        NoopAction::Nothing => {}
                        NoopAction::SendNoop => self.producer.encode_noop(&mut out),
                        NoopAction::Disconnect => {
                            tracing::info!(name = %self.producer.name,
                                "DCP consumer did not answer a noop in time: disconnecting");
                            return Ok(());
                        }
                    }
                }
            }
        }
    }
}

impl Conn {
    /// Whether the connection's user may still stream the bucket, checked once a second:
    /// roles changed (or the user deleted) since it opened are worked out again, and a user
    /// who lost `data_dcp_reader` has the connection closed, as Couchbase closes a DCP
    /// connection whose privileges were revoked (a KV connection is refused command by
    /// command instead).
    fn still_allowed(&mut self) -> bool {
        if self.session.user.is_some()
            && self.session.access_generation != self.node.credentials.generation()
        {
            crate::exec::session_ops::recompute_access(&self.node, &mut self.session);
        }
        self.session.access.dcp
    }
}
