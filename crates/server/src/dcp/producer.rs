//! A producer connection's loop: the I/O around `sluice_dcp::producer::Producer`.
//!
//! Each pass:
//! 1. carry out the streams' actions (register cursors, start backfills, release cursors);
//! 2. read the cursors of vbuckets that changed, for streams with room in their ready queue;
//! 3. start backfill reads (blocking tasks), at most [`BACKFILLS_IN_FLIGHT_MAX`] at a time,
//!    rotating over the connection's backfilling vbuckets, and only while the connection's
//!    queued bytes are under the backfill buffer;
//! 4. encode ready messages while flow control allows.
//!
//! Then it waits for whichever comes first: bytes from the client, the socket accepting
//! output, a vbucket changing, a backfill read finishing, the noop timer, or a kick.
//! Reading and writing are both always armed, so a client that writes while it is not
//! reading cannot deadlock the connection.
//!
//! Memory bound per connection, in bytes: the backfill buffer (`--dcp-backfill-buffer-mb`,
//! default 20 MiB, at least 8 MiB) holds queued
//! messages and the backfill chunks being read, give or take one item; the output buffer
//! adds at most twice `OUT_HIGH_BYTES` plus one message.

use super::registry::{ConnShared, ConnStats, StreamStats};
use super::wake::ConnWake;
use crate::exec::{self, Next, Responder};
use crate::node::Node;
use crate::session::Session;
use bytes::{Buf, BytesMut};
use sluice_cluster::NodeId;
use sluice_dcp::change::{Change, ChangeKind};
use sluice_dcp::control::{self, ControlError, Priority};
use sluice_dcp::noop::NoopAction;
use sluice_dcp::producer::Producer;
use sluice_dcp::stream::{ActiveStream, StreamAction, StreamState};
use sluice_dcp::stream_request::{decide_stream_request, ConnView, Refused, VbView};
use sluice_engine::{Backfill, ChangeListener, CursorId, EngineError, QueueOp, QueuedItem};
use sluice_proto::dcp::OpenFlags;
use sluice_proto::request::{validate, Command};
use sluice_proto::{decode_frame, Decoded, Feature, Frame, Magic, Opcode, Status};
use sluice_types::limits::PACKET_BODY_BYTES_MAX;
use sluice_types::{Datatype, Seqno, VbId, VbState};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::task::JoinSet;

/// One backfill read returns about this much.
const BACKFILL_CHUNK_BYTES: usize = 4 * 1024 * 1024;
/// Backfill reads running at once for one connection (interleaving its vbuckets).
const BACKFILLS_IN_FLIGHT_MAX: usize = 2;
/// Backfills started (holding a storage snapshot) and not finished, per connection. The
/// reference server settled on tens (a single one per connection cut index throughput 4×).
const BACKFILLS_OPEN_MAX: usize = 16;
/// One cursor read returns about this much.
const CURSOR_READ_BYTES: usize = 512 * 1024;
/// A stream's ready queue is topped up from its cursor while below this.
const STREAM_READY_BYTES_MAX: usize = 1024 * 1024;
/// Output is encoded while the unwritten output is below this.
const OUT_HIGH_BYTES: usize = 256 * 1024;
/// Messages per pass = the priority's batch × this (the ratios between priorities are the
/// reference server's 50 : 5 : 1; a pass here ends in one write syscall, so it is larger).
const PASS_SCALE: usize = 20;
const STATS_EVERY: Duration = Duration::from_secs(1);
const READ_CHUNK_BYTES: usize = 64 * 1024;

enum BackfillDone {
    Started {
        vb: VbId,
        stream_id: u64,
        result: Result<Backfill, EngineError>,
    },
    Chunk {
        vb: VbId,
        stream_id: u64,
        backfill: Backfill,
        items: Result<Vec<Arc<QueuedItem>>, EngineError>,
    },
}

struct Conn {
    node: Arc<Node>,
    session: Session,
    producer: Producer,
    shared: Arc<ConnShared>,
    wake: Arc<ConnWake>,
    /// Stream identity per vbucket, so results for a closed stream are not fed to a new one.
    stream_ids: HashMap<VbId, u64>,
    next_stream_id: u64,
    cursors: HashMap<VbId, CursorId>,
    /// Backfills between reads, and the order they take turns in.
    backfills: HashMap<VbId, Backfill>,
    backfill_turns: VecDeque<VbId>,
    /// Backfills to start: (vb, after).
    backfill_starts: VecDeque<(VbId, sluice_types::Seqno)>,
    in_flight: JoinSet<BackfillDone>,
    actions: VecDeque<(VbId, StreamAction)>,
    /// vbuckets with a takeover stream (few; the rest need no per-pass look).
    takeovers: BTreeSet<VbId>,
    backfill_buffer_bytes: usize,
    snappy: bool,
}

pub async fn run(
    node: Arc<Node>,
    session: Session,
    mut rd: OwnedReadHalf,
    mut wr: OwnedWriteHalf,
    mut inbuf: BytesMut,
    name: String,
    flags: OpenFlags,
) -> std::io::Result<()> {
    let shared = node.dcp.register(&name);
    let wake = Arc::new(ConnWake::new(node.bucket.num_vbuckets()));
    let listener: Arc<dyn ChangeListener> = wake.clone();
    node.bucket.add_change_listener(&listener);
    tracing::info!(name, ?flags, "DCP producer connection opened");
    let snappy = session.has(Feature::Snappy);
    let mut conn = Conn {
        producer: Producer::new(name.clone(), flags, Instant::now()),
        node: node.clone(),
        session,
        shared: shared.clone(),
        wake: wake.clone(),
        stream_ids: HashMap::new(),
        next_stream_id: 1,
        cursors: HashMap::new(),
        backfills: HashMap::new(),
        backfill_turns: VecDeque::new(),
        backfill_starts: VecDeque::new(),
        in_flight: JoinSet::new(),
        actions: VecDeque::new(),
        takeovers: BTreeSet::new(),
        // At least two chunks, or no backfill read could ever start.
        backfill_buffer_bytes: node
            .config
            .dcp_backfill_buffer_bytes
            .max(2 * BACKFILL_CHUNK_BYTES),
        snappy,
    };
    let result = conn.serve(&mut rd, &mut wr, &mut inbuf).await;
    conn.release_all();
    node.durability.connection_closed(shared.id);
    node.dcp.unregister(shared.id);
    tracing::info!(name, "DCP producer connection closed");
    result
}

impl Conn {
    async fn serve(
        &mut self,
        rd: &mut OwnedReadHalf,
        wr: &mut OwnedWriteHalf,
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
        // Frames already read along with DCP_OPEN.
        if !self.handle_input(inbuf, &mut out) {
            wr.write_all(&out).await?;
            return Ok(());
        }
        loop {
            self.pump(&mut out);
            let now = Instant::now();
            if now >= next_stats {
                self.publish_stats();
                next_stats = now + STATS_EVERY;
            }
            let noop_at = self.producer.noop.next_deadline();
            let deadline = noop_at.map_or(next_stats, |d| d.min(next_stats));
            if inbuf.capacity() - inbuf.len() < 4096 {
                inbuf.reserve(READ_CHUNK_BYTES);
            }
            tokio::select! {
                _ = &mut kicked => return Ok(()),
                n = rd.read_buf(inbuf) => {
                    if n? == 0 {
                        return Ok(());
                    }
                    if !self.handle_input(inbuf, &mut out) {
                        wr.write_all(&out[written..]).await?;
                        return Ok(());
                    }
                }
                n = wr.write(&out[written..]), if written < out.len() => {
                    written += n?;
                    if written == out.len() {
                        out.clear();
                        written = 0;
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

    /// Executes every complete frame in `inbuf`. `false`: close the connection.
    fn handle_input(&mut self, inbuf: &mut BytesMut, out: &mut Vec<u8>) -> bool {
        loop {
            match decode_frame(inbuf, PACKET_BODY_BYTES_MAX) {
                Err(e) => {
                    tracing::debug!(error = %e, "protocol error on a DCP connection");
                    return false;
                }
                Ok(Decoded::Incomplete { needed }) => {
                    inbuf.reserve(needed.saturating_sub(inbuf.len()));
                    return true;
                }
                Ok(Decoded::Frame(frame, used)) => {
                    let keep = self.handle_frame(&frame, out);
                    inbuf.advance(used);
                    if !keep {
                        return false;
                    }
                }
            }
        }
    }

    fn handle_frame(&mut self, frame: &Frame<'_>, out: &mut Vec<u8>) -> bool {
        if frame.magic == Magic::ClientResponse {
            // The consumer's answers to our requests: noops, and SET_VBUCKET_STATE during a
            // takeover (matched by the stream's opaque).
            if frame.opcode == Opcode::DcpNoop as u8 {
                self.producer.noop.on_response();
            } else if frame.opcode == Opcode::DcpSetVbucketState as u8 {
                self.on_vb_state_answer(frame.opaque, frame.vbucket_or_status);
            }
            return true;
        }
        if !matches!(frame.magic, Magic::ClientRequest | Magic::AltClientRequest) {
            return false;
        }
        let req = match validate(frame, &self.session.validate_ctx()) {
            Ok(req) => req,
            Err(status) => {
                Responder::new(out, frame.opcode, frame.opaque, &self.session)
                    .error(status, "invalid request");
                return true;
            }
        };
        let delegated = matches!(
            req.command,
            Command::Stat { .. }
                | Command::GetFailoverLog
                | Command::GetAllVbSeqnos { .. }
                | Command::GetVbucket
                | Command::ObserveSeqno { .. }
                | Command::GetClusterConfig { .. }
                | Command::GetErrorMap { .. }
                | Command::Noop
                | Command::Version
                | Command::Quit
        );
        if delegated {
            // Session and vbucket queries are answered as on any connection.
            return !matches!(
                exec::execute(&self.node, &mut self.session, frame, out),
                Next::Close
            );
        }
        let mut r = Responder::new(out, frame.opcode, frame.opaque, &self.session);
        match &req.command {
            Command::DcpControl { key, value } => {
                match control::parse(key, value) {
                    Ok(setting) => {
                        self.producer.apply(setting, Instant::now());
                        let p = r.packet(Status::Success);
                        r.send(p);
                    }
                    Err(e) => {
                        let (ControlError::Invalid(why) | ControlError::NotSupported(why)) = &e;
                        r.error(e.status(), why);
                    }
                }
                true
            }
            Command::DcpStreamReq { req: sreq, value } => {
                self.stream_request(req.vb, frame.opaque, sreq, value, r);
                true
            }
            Command::DcpCloseStream => {
                let vb = req.vb;
                match self.producer.stream_mut(vb) {
                    Some(s) if s.state() != StreamState::Dead => {
                        let actions = s.close();
                        self.push_actions(vb, actions);
                        self.producer.schedule(vb);
                        let p = r.packet(Status::Success);
                        r.send(p);
                    }
                    _ => r.error(Status::KeyEnoent, "no stream for this vbucket"),
                }
                true
            }
            Command::DcpBufferAck { bytes } => {
                self.producer.flow.on_ack(*bytes);
                true
            }
            Command::DcpSeqnoAck {
                in_memory,
                persisted,
            } => {
                self.on_seqno_ack(req.vb, Seqno(*in_memory), persisted.map(Seqno));
                true
            }
            Command::DcpOpen { .. } => {
                r.error(Status::Einval, "this connection is already a DCP producer");
                true
            }
            _ => {
                r.error(
                    Status::NotSupported,
                    "document commands are not served on a DCP connection",
                );
                true
            }
        }
    }

    /// A replica's DCP_SEQNO_ACKNOWLEDGED: counted for the node its `consumer_name` gives,
    /// under the vbucket's current uuid. Other consumers' acks mean nothing here (no answer
    /// is sent on success, as the protocol says).
    fn on_seqno_ack(&mut self, vb: VbId, in_memory: Seqno, persisted: Option<Seqno>) {
        let Some(node_id) = self
            .producer
            .consumer_name
            .as_deref()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            tracing::debug!(name = self.producer.name, %vb,
                "seqno ack from a consumer without a node consumer_name: ignored");
            return;
        };
        let Ok(vb_uuid) = self.node.bucket.vb_uuid(vb) else {
            return;
        };
        self.node.durability.ack(
            self.shared.id,
            vb,
            NodeId(node_id),
            vb_uuid,
            in_memory,
            persisted,
        );
    }

    fn stream_request(
        &mut self,
        vb: VbId,
        opaque: u32,
        sreq: &sluice_proto::dcp::StreamRequest,
        value: &[u8],
        mut r: Responder<'_>,
    ) {
        let info = match self.node.bucket.stream_info(vb) {
            Ok(info) => info,
            Err(_) => {
                r.error(Status::NotMyVbucket, "no such vbucket");
                return;
            }
        };
        let view = VbView {
            state: info.state,
            high_seqno: info.high_seqno,
            purge_seqno: info.purge_seqno,
            persisted_seqno: info.persisted_seqno,
            failover: &info.failover,
        };
        let conn = ConnView {
            stream_exists: self.producer.has_stream(vb),
            noop_enabled: self.producer.noop.enabled(),
            wants_xattrs: self.producer.flags.contains(OpenFlags::INCLUDE_XATTRS),
        };
        match decide_stream_request(sreq, value, &view, &conn) {
            Err(Refused::Rollback(seqno)) => {
                let v = seqno.0.to_be_bytes();
                let p = r.packet(Status::Rollback).value(&v);
                r.send(p);
            }
            Err(Refused::Status(status, why)) => r.error(status, why),
            Ok(accepted) => {
                let mut v = Vec::with_capacity(16 * info.failover.entries().len());
                for e in info.failover.entries() {
                    v.extend_from_slice(&e.uuid.0.to_be_bytes());
                    v.extend_from_slice(&e.seqno.0.to_be_bytes());
                }
                let p = r.packet(Status::Success).value(&v);
                r.send(p);
                // A finished stream's leftovers (its cursor) go before the new one starts.
                if let Some(c) = self.cursors.remove(&vb) {
                    self.node.bucket.release_stream_cursor(vb, c);
                }
                self.backfills.remove(&vb);
                let mut stream = ActiveStream::new(
                    vb,
                    opaque,
                    accepted.start,
                    accepted.end,
                    self.producer.stream_options(),
                );
                if sreq
                    .flags
                    .contains(sluice_proto::dcp::StreamFlags::TAKEOVER)
                {
                    tracing::info!(%vb, name = %self.producer.name, "takeover stream requested");
                    stream = stream.with_takeover();
                    self.takeovers.insert(vb);
                }
                let actions = stream.start();
                self.producer.add_stream(stream);
                self.stream_ids.insert(vb, self.next_stream_id);
                self.next_stream_id += 1;
                self.push_actions(vb, actions);
                self.producer.schedule(vb);
            }
        }
    }

    fn on_vb_state_answer(&mut self, opaque: u32, status: u16) {
        let Some(vb) = self
            .producer
            .streams()
            .find(|s| s.opaque == opaque && s.state() == StreamState::TakeoverWait)
            .map(|s| s.vb)
        else {
            tracing::debug!(opaque, "SET_VBUCKET_STATE answer for no waiting takeover");
            return;
        };
        let stream = self.producer.stream_mut(vb).expect("found");
        let actions = if status == Status::Success.code() {
            stream.on_vb_state_ack()
        } else {
            tracing::warn!(%vb, status, "the consumer refused the takeover's state change");
            stream.on_state_changed()
        };
        self.push_actions(vb, actions);
        self.producer.schedule(vb);
    }

    fn push_actions(&mut self, vb: VbId, actions: Vec<StreamAction>) {
        self.actions.extend(actions.into_iter().map(|a| (vb, a)));
    }

    fn pump(&mut self, out: &mut Vec<u8>) {
        self.run_actions();
        // Takeover streams that sent everything read so far look at their cursor again
        // (a write may not have woken them: the last one may predate the read).
        self.takeovers
            .retain(|vb| self.producer.stream(*vb).is_some_and(|s| s.is_takeover()));
        for &vb in &self.takeovers {
            let s = self.producer.stream(vb).expect("kept above");
            if s.takeover_reading() && !s.has_ready() {
                self.wake.mark_dirty(vb);
            }
        }
        self.read_cursors();
        self.schedule_backfills();
        if out.len() < OUT_HIGH_BYTES {
            self.producer
                .fill(out, PASS_SCALE, OUT_HIGH_BYTES, Instant::now());
        }
    }

    fn run_actions(&mut self) {
        while let Some((vb, action)) = self.actions.pop_front() {
            match action {
                StreamAction::RegisterCursor { after } => {
                    let registered = if self.cursors.contains_key(&vb) {
                        // Ephemeral: the backfill registered it with its scan, after exactly
                        // the seqno the backfill ended at.
                        self.wake.watch(vb, true);
                        true
                    } else {
                        match self.node.bucket.stream_cursor(vb, after) {
                            Ok(Some(c)) => {
                                self.cursors.insert(vb, c);
                                self.wake.watch(vb, true);
                                true
                            }
                            Ok(None) => false,
                            Err(_) => {
                                self.stream_failed(vb);
                                continue;
                            }
                        }
                    };
                    if let Some(s) = self.producer.stream_mut(vb) {
                        let next = s.on_cursor(registered);
                        self.push_actions(vb, next);
                    }
                }
                StreamAction::Backfill { after } => {
                    self.backfill_starts.push_back((vb, after));
                }
                StreamAction::SetVbucketDead => {
                    // From here on writes to the vbucket get NOT_MY_VBUCKET; what was
                    // written before is still in the cursor's way, and is sent next.
                    if let Err(e) = self.node.bucket.set_vbucket_state(vb, VbState::Dead) {
                        tracing::warn!(%vb, error = %e, "takeover: cannot set the vbucket dead");
                        self.stream_failed(vb);
                        continue;
                    }
                    tracing::info!(%vb, "takeover: vbucket dead here, sending the rest");
                    self.wake.mark_dirty(vb);
                }
                StreamAction::ReleaseCursor => {
                    self.wake.watch(vb, false);
                    if let Some(c) = self.cursors.remove(&vb) {
                        self.node.bucket.release_stream_cursor(vb, c);
                    }
                    self.backfills.remove(&vb);
                    self.backfill_turns.retain(|v| *v != vb);
                    self.backfill_starts.retain(|(v, _)| *v != vb);
                }
            }
            self.producer.schedule(vb);
        }
    }

    fn stream_failed(&mut self, vb: VbId) {
        if let Some(s) = self.producer.stream_mut(vb) {
            let actions = s.on_state_changed();
            self.push_actions(vb, actions);
            self.producer.schedule(vb);
        }
    }

    fn read_cursors(&mut self) {
        let mut queued = self.producer.ready_bytes();
        for vb in self.wake.take_dirty() {
            if queued >= self.backfill_buffer_bytes {
                // Nothing more is read until the client drains: look again later.
                self.wake.mark_dirty(vb);
                continue;
            }
            let Some(&cursor) = self.cursors.get(&vb) else {
                continue;
            };
            let Some(stream) = self.producer.stream_mut(vb) else {
                continue;
            };
            if !matches!(
                stream.state(),
                StreamState::InMemory | StreamState::TakeoverSend
            ) {
                continue;
            }
            if !stream.wants_more(STREAM_READY_BYTES_MAX) {
                self.wake.mark_dirty(vb);
                continue;
            }
            match self
                .node
                .bucket
                .read_stream_cursor(vb, cursor, CURSOR_READ_BYTES)
            {
                Ok(Some(chunks)) => {
                    let before = stream.ready_bytes();
                    let mut any = false;
                    let mut actions = Vec::new();
                    for chunk in &chunks {
                        let items: Vec<Change> = chunk
                            .items
                            .iter()
                            .map(|i| to_change(i, self.snappy))
                            .collect();
                        any |= !items.is_empty();
                        actions.extend(stream.on_memory_chunk(
                            chunk.checkpoint_id,
                            chunk.snap_end,
                            &items,
                        ));
                    }
                    queued += stream.ready_bytes().saturating_sub(before);
                    if any {
                        // There may be more than one read's worth.
                        self.wake.mark_dirty(vb);
                    } else if stream.takeover_reading() && !stream.has_ready() {
                        // A takeover stream that has sent everything moves to its next step.
                        actions.extend(stream.on_drained());
                    }
                    self.push_actions(vb, actions);
                    self.producer.schedule(vb);
                }
                Ok(None) => {
                    self.cursors.remove(&vb);
                    self.wake.watch(vb, false);
                    let actions = stream.on_cursor_dropped();
                    self.push_actions(vb, actions);
                    self.producer.schedule(vb);
                }
                Err(_) => self.stream_failed(vb),
            }
        }
        if !self.actions.is_empty() {
            self.run_actions();
        }
    }

    fn schedule_backfills(&mut self) {
        // Starting reads changes no ready queue: what is queued is counted once.
        let queued = self.producer.ready_bytes();
        while self.in_flight.len() < BACKFILLS_IN_FLIGHT_MAX {
            // Every started backfill holds a storage snapshot until it is done: start a new
            // one only while few are open (the rest wait their turn, in request order).
            let open = self.backfills.len() + self.in_flight.len();
            let start = if open < BACKFILLS_OPEN_MAX {
                self.backfill_starts.pop_front()
            } else {
                None
            };
            if let Some((vb, after)) = start {
                let Some(&stream_id) = self.stream_ids.get(&vb) else {
                    continue;
                };
                let bucket = self.node.bucket.clone();
                self.in_flight
                    .spawn_blocking(move || BackfillDone::Started {
                        vb,
                        stream_id,
                        result: sluice_engine::run_as_batch(|| bucket.backfill(vb, after)),
                    });
                continue;
            }
            // Chunks in flight count against the buffer too: queued plus arriving bytes stay
            // within it (give or take one item).
            let arriving = (self.in_flight.len() + 1) * BACKFILL_CHUNK_BYTES;
            if queued + arriving > self.backfill_buffer_bytes {
                return;
            }
            let Some(vb) = self.backfill_turns.pop_front() else {
                return;
            };
            let (Some(mut backfill), Some(&stream_id)) =
                (self.backfills.remove(&vb), self.stream_ids.get(&vb))
            else {
                continue;
            };
            self.in_flight.spawn_blocking(move || {
                // Disk scans yield the CPU to request handling (as persistence does).
                let items =
                    sluice_engine::run_as_batch(|| backfill.next_chunk(BACKFILL_CHUNK_BYTES));
                BackfillDone::Chunk {
                    vb,
                    stream_id,
                    backfill,
                    items,
                }
            });
        }
    }

    fn current(&self, vb: VbId, stream_id: u64) -> bool {
        self.stream_ids.get(&vb) == Some(&stream_id)
            && self
                .producer
                .stream(vb)
                .is_some_and(|s| s.state() == StreamState::Backfilling)
    }

    fn on_backfill_done(&mut self, done: BackfillDone) {
        match done {
            BackfillDone::Started {
                vb,
                stream_id,
                result,
            } => {
                if !self.current(vb, stream_id) {
                    if let Ok(Backfill {
                        cursor: Some(c), ..
                    }) = result
                    {
                        self.node.bucket.release_stream_cursor(vb, c);
                    }
                    return;
                }
                let stream = self.producer.stream_mut(vb).expect("current");
                match result {
                    Ok(mut backfill) => {
                        stream.on_backfill_begin(backfill.end);
                        if let Some(c) = backfill.cursor.take() {
                            // Ephemeral: the cursor was registered with the scan; it is read
                            // once the backfill is done.
                            self.cursors.insert(vb, c);
                        }
                        self.backfills.insert(vb, backfill);
                        self.backfill_turns.push_back(vb);
                    }
                    Err(e) => {
                        tracing::warn!(%vb, error = %e, "backfill could not start");
                        let actions = stream.on_backfill_failed();
                        self.push_actions(vb, actions);
                    }
                }
                self.producer.schedule(vb);
            }
            BackfillDone::Chunk {
                vb,
                stream_id,
                backfill,
                items,
            } => {
                if !self.current(vb, stream_id) {
                    return;
                }
                let snappy = self.snappy;
                let stream = self.producer.stream_mut(vb).expect("current");
                match items {
                    Ok(items) if items.is_empty() => {
                        let actions = stream.on_backfill_end();
                        self.push_actions(vb, actions);
                    }
                    Ok(items) => {
                        let changes: Vec<Change> =
                            items.iter().map(|i| to_change(i, snappy)).collect();
                        stream.on_backfill_items(&changes);
                        self.backfills.insert(vb, backfill);
                        self.backfill_turns.push_back(vb);
                    }
                    Err(e) => {
                        tracing::warn!(%vb, error = %e, "backfill read failed");
                        let actions = stream.on_backfill_failed();
                        self.push_actions(vb, actions);
                    }
                }
                self.producer.schedule(vb);
            }
        }
    }

    fn release_all(&mut self) {
        for (vb, c) in self.cursors.drain() {
            self.node.bucket.release_stream_cursor(vb, c);
        }
        self.in_flight.abort_all();
    }

    fn publish_stats(&self) {
        let highs: HashMap<VbId, u64> = self
            .node
            .bucket
            .vb_seqnos(None)
            .into_iter()
            .map(|(vb, s)| (vb, s.0))
            .collect();
        let p = &self.producer;
        let mut stats = ConnStats {
            name: p.name.clone(),
            priority: match p.priority {
                Priority::High => "high",
                Priority::Medium => "medium",
                Priority::Low => "low",
            },
            flow_window: p.flow.window().unwrap_or(0) as u64,
            unacked_bytes: p.flow.unacked() as u64,
            backfill_bytes_buffered: p.ready_bytes() as u64,
            backfills_running: (self.backfills.len() + self.in_flight.len()) as u64,
            paused_reason: if !p.flow.can_send() {
                "flow_control_window_full"
            } else if p.ready_bytes() >= self.backfill_buffer_bytes {
                "backfill_buffer_full"
            } else {
                ""
            },
            ..Default::default()
        };
        stats.bytes_sent = p.bytes_sent;
        stats.items_sent = p.items_sent;
        for s in p.streams() {
            let high = highs.get(&s.vb).copied().unwrap_or(0);
            stats.streams.push(StreamStats {
                vb: s.vb.0,
                state: s.state().name(),
                opaque: s.opaque,
                last_sent_seqno: s.last_read().0,
                end_seqno: s.end_seqno().0,
                items_remaining: high.saturating_sub(s.last_read().0),
                items_sent: s.counters.items_sent,
                bytes_sent: s.counters.bytes_sent,
                ready_bytes: s.ready_bytes() as u64,
                backfills: s.counters.backfills,
                cursor_drops: s.counters.cursor_drops,
            });
        }
        *self.shared.stats.lock() = stats;
    }
}

fn to_change(item: &QueuedItem, snappy_ok: bool) -> Change {
    let mut meta = item.meta;
    let mut value = item.value.clone();
    if meta.datatype.is_snappy() && !snappy_ok && !value.is_empty() {
        match sluice_engine::inflate(&value) {
            Ok(v) => {
                value = bytes::Bytes::from(v);
                meta.datatype = meta.datatype.without(Datatype::SNAPPY);
            }
            Err(e) => tracing::warn!(error = %e, "stored value does not inflate; sent as is"),
        }
    }
    Change {
        key: item.key.clone(),
        value,
        meta,
        kind: match item.op {
            QueueOp::Mutation => ChangeKind::Mutation,
            QueueOp::Deletion => ChangeKind::Deletion,
            QueueOp::Expiration => ChangeKind::Expiration,
        },
    }
}
