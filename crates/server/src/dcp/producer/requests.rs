//! What the client sends on a producer connection: DCP_CONTROL, stream requests and closes,
//! buffer and seqno acknowledgements, the answers to our noops and takeover state changes,
//! and the session and vbucket queries any connection may ask.

use super::Conn;
use crate::exec::{self, Next, Responder};
use bytes::{Buf, BytesMut};
use sluice_cluster::NodeId;
use sluice_dcp::control::{self, ControlError};
use sluice_dcp::filter::FilterRequest;
use sluice_dcp::stream::{ActiveStream, StreamState};
use sluice_dcp::stream_key::StreamKey;
use sluice_dcp::stream_request::{decide_stream_request, ConnView, Refused, VbView};
use sluice_proto::body::failover_log;
use sluice_proto::dcp::{OpenFlags, StreamFlags};
use sluice_proto::request::{validate, Command, DcpCommand, SessionCommand, VbucketCommand};
use sluice_proto::{decode_frame, Decoded, Frame, Magic, Opcode, Status};
use sluice_types::limits::PACKET_BODY_BYTES_MAX;
use sluice_types::{Seqno, VbId};
use std::time::Instant;

impl Conn {
    /// Executes the complete frames in `inbuf` while `out` is shorter than `out_max`.
    /// `false`: close the connection.
    pub(super) fn handle_input(
        &mut self,
        inbuf: &mut BytesMut,
        out: &mut Vec<u8>,
        out_max: usize,
    ) -> bool {
        loop {
            if out.len() >= out_max {
                // The rest waits in `inbuf` until the client has read its answers.
                return true;
            }
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
        if answered_as_anywhere(&req.command) {
            // Session and vbucket queries are answered as on any connection.
            return !matches!(
                exec::execute(&self.node, &mut self.session, frame, out),
                Next::Close
            );
        }
        let mut r = Responder::new(out, frame.opcode, frame.opaque, &self.session);
        match &req.command {
            Command::Dcp(cmd) => {
                let sid = req.frame_infos.stream_id;
                self.dcp_request(req.vb, sid, frame.opaque, cmd, r)
            }
            Command::Kv(_) | Command::Session(_) | Command::Vbucket(_) => {
                r.error(
                    Status::NotSupported,
                    "document commands are not served on a DCP connection",
                );
            }
        }
        true
    }

    /// A DCP request of the consumer on this producer connection, for `vb` (the header's)
    /// and stream id `sid` (the request's stream-id frame info, if any).
    fn dcp_request(
        &mut self,
        vb: VbId,
        sid: Option<u16>,
        opaque: u32,
        cmd: &DcpCommand<'_>,
        mut r: Responder<'_>,
    ) {
        match cmd {
            DcpCommand::Control { key, value } => {
                match control::parse(key, value)
                    .and_then(|setting| self.producer.apply(setting, Instant::now()))
                {
                    Ok(()) => {
                        let p = r.packet(Status::Success);
                        r.send(p);
                    }
                    Err(e) => {
                        let (ControlError::Invalid(why) | ControlError::NotSupported(why)) = &e;
                        r.error(e.status(), why);
                    }
                }
            }
            DcpCommand::StreamReq { req, value } => self.stream_request(vb, opaque, req, value, r),
            DcpCommand::CloseStream => self.close_stream(vb, sid, r),
            DcpCommand::BufferAck { bytes } => self.producer.flow.on_ack(*bytes),
            DcpCommand::SeqnoAck {
                in_memory,
                persisted,
            } => self.on_seqno_ack(vb, *in_memory, *persisted),
            DcpCommand::Open { .. } => {
                r.error(Status::Einval, "this connection is already a DCP producer");
            }
        }
    }

    /// CLOSE_STREAM of `vb`'s stream `sid`: the id is required exactly when the connection
    /// enabled stream ids (DCP_STREAMID_INVALID otherwise, as on Couchbase); an id this
    /// vbucket has no live stream under is DCP_STREAMID_INVALID too when the vbucket has
    /// other streams, else KEY_ENOENT.
    fn close_stream(&mut self, vb: VbId, sid: Option<u16>, mut r: Responder<'_>) {
        let sid = sid.filter(|s| *s != 0);
        match (sid, self.producer.stream_ids()) {
            (Some(_), false) => {
                return r.error(
                    Status::DcpStreamIdInvalid,
                    "a stream id needs DCP_CONTROL enable_stream_id on the connection",
                )
            }
            (None, true) => {
                return r.error(
                    Status::DcpStreamIdInvalid,
                    "this connection enabled stream ids: CLOSE_STREAM needs the stream's id",
                )
            }
            _ => {}
        }
        let key = StreamKey { vb, sid };
        let others = self.producer.has_any_stream_of(vb);
        match self.producer.stream(key).map(|s| s.state()) {
            Some(state) if state != StreamState::Dead => {
                let actions = self.producer.stream_mut(key).expect("found").close();
                self.push_actions(key, actions);
                self.producer.schedule(key);
                let p = r.packet(Status::Success);
                r.send(p);
            }
            None if sid.is_some() && others => r.error(
                Status::DcpStreamIdInvalid,
                "no stream with this id on this vbucket",
            ),
            _ => r.error(Status::KeyEnoent, "no stream for this vbucket"),
        }
    }

    /// A replica's DCP_SEQNO_ACKNOWLEDGED: counted for the node its `consumer_name` gives,
    /// under the vbucket's current uuid. Other consumers' acks mean nothing here (no answer
    /// is sent on success, as the protocol says). Only the cluster identity's acks count:
    /// anyone else could name a replica node and complete durable writes it never held.
    fn on_seqno_ack(&mut self, vb: VbId, in_memory: Seqno, persisted: Option<Seqno>) {
        if !self.session.is_cluster() {
            tracing::warn!(name = self.producer.name, %vb, user = ?self.session.user,
                "seqno ack from a connection that is not the cluster's replication: ignored");
            return;
        }
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
        self.bucket.durability.ack(
            &self.bucket,
            self.shared.id,
            vb,
            NodeId(node_id),
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
        if sreq.flags.contains(StreamFlags::TAKEOVER) && !self.session.is_cluster() {
            // A takeover makes this copy dead: only a rebalance of this cluster may ask.
            r.error(
                Status::Eaccess,
                "takeover streams are only for the cluster's own rebalance",
            );
            return;
        }
        // The value is read once: its stream id and what a collection-aware consumer asked
        // for (checked against the manifest here; its syntax is `decide_stream_request`'s).
        let parsed = FilterRequest::parse(value);
        let filter = match self.stream_filter(&parsed) {
            Ok(f) => f,
            Err((status, why)) => {
                let uid = self.bucket.manifest().uid();
                match status {
                    Status::UnknownCollection | Status::UnknownScope => {
                        r.unknown_collection(status, uid, why)
                    }
                    _ => r.error(status, why),
                }
                return;
            }
        };
        let key = StreamKey {
            vb,
            sid: parsed.as_ref().ok().and_then(|v| v.sid),
        };
        let info = match self.bucket.engine.stream_info(vb) {
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
            stream_exists: self.producer.has_stream(key),
            stream_ids: self.producer.stream_ids(),
            noop_enabled: self.producer.noop.enabled(),
            wants_xattrs: self.producer.flags.contains(OpenFlags::INCLUDE_XATTRS),
        };
        match decide_stream_request(sreq, !value.is_empty(), &parsed, &view, &conn) {
            Err(Refused::Rollback(seqno)) => {
                let v = seqno.0.to_be_bytes();
                let p = r.packet(Status::Rollback).value(&v);
                r.send(p);
            }
            Err(Refused::Status(status, why)) => r.error(status, why),
            Ok(accepted) => {
                let v = failover_log::to_vec(info.failover.entries());
                let p = r.packet(Status::Success).value(&v);
                r.send(p);
                let mut stream = ActiveStream::new(
                    vb,
                    opaque,
                    accepted.start,
                    accepted.end,
                    self.producer.stream_options(),
                );
                if let Some(f) = filter {
                    stream = stream.with_filter(f);
                }
                if let Some(sid) = key.sid {
                    stream = stream.with_stream_id(sid);
                }
                let takeover = sreq.flags.contains(StreamFlags::TAKEOVER);
                if takeover {
                    tracing::info!(%vb, name = %self.producer.name, "takeover stream requested");
                    stream = stream.with_takeover();
                }
                // A finished stream's leftovers (its cursor, its backfill) go before the new
                // one starts.
                let (_, old_cursor) = self.slots.open(key, takeover);
                if let Some(c) = old_cursor {
                    self.bucket.engine.release_stream_cursor(vb, c);
                }
                self.backfills.cancel(key);
                let actions = stream.start();
                self.producer.add_stream(stream);
                self.push_actions(key, actions);
                self.producer.schedule(key);
            }
        }
    }

    fn on_vb_state_answer(&mut self, opaque: u32, status: u16) {
        let Some(key) = self
            .producer
            .streams()
            .find(|s| s.opaque == opaque && s.state() == StreamState::TakeoverWait)
            .map(|s| s.key())
        else {
            tracing::debug!(opaque, "SET_VBUCKET_STATE answer for no waiting takeover");
            return;
        };
        let mut stream = self.producer.stream_mut(key).expect("found");
        let actions = if status == Status::Success.code() {
            stream.on_vb_state_ack()
        } else {
            tracing::warn!(vb = %key.vb, status, "the consumer refused the takeover's state change");
            stream.on_state_changed()
        };
        drop(stream);
        self.push_actions(key, actions);
        self.producer.schedule(key);
    }
}

/// Session and vbucket queries a producer connection answers as any connection does; the
/// other commands but DCP's are refused there.
fn answered_as_anywhere(c: &Command<'_>) -> bool {
    match c {
        Command::Session(s) => matches!(
            s,
            SessionCommand::Stat { .. }
                | SessionCommand::GetClusterConfig { .. }
                | SessionCommand::GetErrorMap { .. }
                | SessionCommand::Noop
                | SessionCommand::Version
                | SessionCommand::Quit
        ),
        Command::Vbucket(v) => matches!(
            v,
            VbucketCommand::GetFailoverLog
                | VbucketCommand::GetAllVbSeqnos { .. }
                | VbucketCommand::GetVbucket
                | VbucketCommand::ObserveSeqno { .. }
        ),
        Command::Kv(_) | Command::Dcp(_) => false,
    }
}
