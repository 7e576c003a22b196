//! What a [`DcpStream`] does with each thing the producer sends: stream messages become
//! events (moving the vbucket's position as they are delivered), answers to stream requests
//! start streams or negotiate rollbacks, and stream ends finish or re-request vbuckets.

use bytes::Bytes;
use sluice_proto::body::failover_log;
use sluice_proto::dcp::message::DcpDocument;
use sluice_proto::dcp::{DcpMessage, StreamEndReason, StreamFlags};
use sluice_proto::encode::Packet;
use sluice_proto::{Opcode, Status};
use sluice_types::{Seqno, VbId, VbUuid};

use super::error::DcpError;
use super::event::{DcpEvent, DcpItem};
use super::failover;
use super::link::Inbound;
use super::options::RollbackMode;
use super::position::DcpPosition;
use super::stream::{DcpStream, Pending, VbStream, ROLLBACKS_IN_A_ROW_MAX};

impl DcpStream {
    pub(super) fn handle(&mut self, inbound: Inbound) -> Result<Option<DcpEvent>, DcpError> {
        match inbound {
            Inbound::Message {
                vb,
                opaque,
                msg,
                wire_len,
            } => {
                let event = self.on_message(vb, opaque, msg);
                // Counted whether delivered or dropped: the producer counted it either way.
                self.consumed(wire_len);
                Ok(event)
            }
            Inbound::Response {
                opcode,
                status,
                opaque,
                value,
            } => match self.pending.remove(&opaque) {
                Some(Pending::StreamRequest(vb)) => {
                    self.on_stream_request_answer(vb, opaque, opcode, status, &value)
                }
                Some(Pending::FailoverLog { vb, rollback_to }) => {
                    Ok(Some(self.on_failover_log(vb, rollback_to, status, &value)))
                }
                Some(Pending::CloseStream(vb)) => {
                    // KEY_ENOENT: the stream ended by itself meanwhile; its STREAM_END
                    // is (or was) delivered either way.
                    tracing::debug!(%vb, status, "DCP_CLOSE_STREAM answered");
                    Ok(None)
                }
                None => {
                    tracing::debug!(opcode, opaque, "answer to no pending request; ignored");
                    Ok(None)
                }
            },
        }
    }

    fn on_message(&mut self, vb: VbId, opaque: u32, msg: DcpMessage) -> Option<DcpEvent> {
        let current = self
            .vbs
            .get(&vb)
            .is_some_and(|e| e.state == VbStream::Streaming { opaque });
        if !current {
            // A leftover of a stream this client no longer follows.
            tracing::debug!(%vb, opaque, ?msg, "message for no current stream; dropped");
            return None;
        }
        let pos = self
            .positions
            .get_mut(vb)
            .expect("streamed vbuckets have positions");
        let item = |d: DcpDocument| DcpItem {
            vb,
            key: d.key,
            value: d.value,
            cas: d.cas,
            seqno: d.seqno,
            rev_seqno: d.rev_seqno,
            flags: d.flags,
            expiry: d.expiry,
            datatype: d.datatype,
            delete_time: d.delete_time,
        };
        match msg {
            DcpMessage::SnapshotMarker(m) => {
                pos.on_marker(m.start, m.end);
                Some(DcpEvent::SnapshotMarker {
                    vb,
                    start: m.start,
                    end: m.end,
                    flags: m.flags,
                })
            }
            DcpMessage::Mutation(d) => {
                pos.on_seqno(d.seqno);
                Some(DcpEvent::Mutation(item(d)))
            }
            DcpMessage::Deletion(d) => {
                pos.on_seqno(d.seqno);
                Some(DcpEvent::Deletion(item(d)))
            }
            DcpMessage::Expiration(d) => {
                pos.on_seqno(d.seqno);
                Some(DcpEvent::Expiration(item(d)))
            }
            DcpMessage::SeqnoAdvanced(seqno) => {
                // Nothing for this client up to `seqno`: moving there loses nothing.
                pos.on_seqno(seqno);
                None
            }
            DcpMessage::StreamEnd(reason) => {
                self.on_stream_end(vb, reason);
                Some(DcpEvent::StreamEnd { vb, reason })
            }
            DcpMessage::SetVbucketState(state) => {
                self.vb_state_answers.push(opaque);
                Some(DcpEvent::VbucketState { vb, state })
            }
            DcpMessage::Noop => None,
            DcpMessage::SystemEvent(e) => {
                // Only collection-aware connections get them; this client's are not.
                pos.on_seqno(e.seqno);
                None
            }
            DcpMessage::Prepare(p) => {
                pos.on_seqno(p.doc.seqno);
                Some(DcpEvent::Prepare {
                    item: item(p.doc),
                    deleted: p.deleted,
                    level: p.level,
                })
            }
            DcpMessage::Commit(c) => {
                pos.on_seqno(c.seqno);
                Some(DcpEvent::Commit {
                    vb,
                    key: c.key,
                    prepared: c.prepared_seqno,
                    seqno: c.seqno,
                })
            }
            DcpMessage::Abort(c) => {
                pos.on_seqno(c.seqno);
                Some(DcpEvent::Abort {
                    vb,
                    key: c.key,
                    prepared: c.prepared_seqno,
                    seqno: c.seqno,
                })
            }
        }
    }

    /// `ok` (end reached), `closed` (asked for), `filter_empty` and `lost_privileges`
    /// (asking again cannot help) end the vbucket. The other reasons mean the producer
    /// dropped the stream for its own reasons (too slow, state change, backfill failure,
    /// its own rollback, disconnect): the data is still wanted, so the client asks again
    /// from the position of the last delivered event, which is exactly what it holds;
    /// a rollback, if needed, is then negotiated as usual.
    fn on_stream_end(&mut self, vb: VbId, reason: StreamEndReason) {
        if reason == StreamEndReason::Closed && self.takeovers.remove(&vb) {
            // Closed to be asked for again as a takeover (DcpStream::takeover).
            self.request_with(vb, StreamFlags::TAKEOVER);
            return;
        }
        match reason {
            StreamEndReason::Ok
            | StreamEndReason::Closed
            | StreamEndReason::FilterEmpty
            | StreamEndReason::LostPrivileges => self.finish(vb),
            StreamEndReason::StateChanged
            | StreamEndReason::Disconnected
            | StreamEndReason::TooSlow
            | StreamEndReason::BackfillFailed
            | StreamEndReason::Rollback => {
                let pos = self.positions.get(vb).copied();
                // Debug, not info: a producer under memory pressure ends slow streams by
                // the thousand, and the application sees each as a StreamEnd event anyway.
                tracing::debug!(%vb, reason = reason.name(), ?pos,
                    "DCP stream ended by the producer; requesting it again from its position");
                self.request(vb);
            }
        }
    }

    fn on_stream_request_answer(
        &mut self,
        vb: VbId,
        opaque: u32,
        opcode: u8,
        status: u16,
        value: &Bytes,
    ) -> Result<Option<DcpEvent>, DcpError> {
        let expected = self
            .vbs
            .get(&vb)
            .is_some_and(|e| e.state == VbStream::Requested { opaque });
        if opcode != Opcode::DcpStreamReq.byte() || !expected {
            self.finish(vb);
            return Err(DcpError::Unexpected(
                "answer does not match the stream request",
            ));
        }
        let Some(status) = Status::from_u16(status) else {
            self.finish(vb);
            return Err(DcpError::StreamRequestUnknownStatus { vb, code: status });
        };
        match status {
            Status::Success => {
                let Some(log) = failover_log::decode(value) else {
                    self.finish(vb);
                    return Err(DcpError::Unexpected(
                        "stream request accepted without a valid failover log",
                    ));
                };
                let pos = self
                    .positions
                    .get_mut(vb)
                    .expect("requested vbuckets have positions");
                pos.vb_uuid = log[0].uuid;
                let e = self.vbs.get_mut(&vb).expect("requested");
                e.state = VbStream::Streaming { opaque };
                e.rollbacks = 0;
                if self.takeovers.contains(&vb) {
                    // A takeover asked for while this request was on its way.
                    self.close_stream(vb);
                }
                Ok(Some(DcpEvent::StreamOpened {
                    vb,
                    failover_log: log,
                }))
            }
            Status::Rollback => {
                let to = match value.as_ref().try_into() {
                    Ok(b) => Seqno(u64::from_be_bytes(b)),
                    Err(_) => {
                        self.finish(vb);
                        return Err(DcpError::Unexpected("ROLLBACK without a u64 seqno"));
                    }
                };
                let e = self.vbs.get_mut(&vb).expect("requested");
                e.rollbacks += 1;
                if e.rollbacks > ROLLBACKS_IN_A_ROW_MAX {
                    let count = e.rollbacks;
                    self.finish(vb);
                    return Err(DcpError::RollbackLoop { vb, count });
                }
                tracing::info!(%vb, to = to.0, "producer asked for a rollback");
                if self.opts.rollback == RollbackMode::Report {
                    e.state = VbStream::Parked;
                    return Ok(Some(DcpEvent::Rollback { vb, to }));
                }
                if to == Seqno::ZERO {
                    self.positions.insert(DcpPosition::zero(vb));
                    self.request(vb);
                    return Ok(Some(DcpEvent::Rollback { vb, to }));
                }
                // The uuid to ask with is the producer's branch holding `to`: ask for its
                // current log rather than trusting one seen earlier.
                e.state = VbStream::FetchingLog;
                let opaque = self.take_opaque();
                self.link
                    .send(Packet::request(Opcode::GetFailoverLog.byte(), vb.0, opaque).to_vec());
                self.pending.insert(
                    opaque,
                    Pending::FailoverLog {
                        vb,
                        rollback_to: to,
                    },
                );
                Ok(None)
            }
            other => {
                self.finish(vb);
                Err(DcpError::StreamRequest { vb, status: other })
            }
        }
    }

    fn on_failover_log(&mut self, vb: VbId, to: Seqno, status: u16, value: &Bytes) -> DcpEvent {
        let log = (status == Status::Success.code())
            .then(|| failover_log::decode(value))
            .flatten();
        let uuid = match &log {
            Some(log) => failover::uuid_covering(log, to),
            None => {
                // Asking with no history costs at most one more rollback, to 0.
                tracing::warn!(%vb, status, "no failover log after a rollback; asking with uuid 0");
                VbUuid(0)
            }
        };
        self.positions.insert(DcpPosition::at(vb, uuid, to));
        self.request(vb);
        DcpEvent::Rollback { vb, to }
    }
}
