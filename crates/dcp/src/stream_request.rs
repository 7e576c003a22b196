//! Deciding a DCP_STREAM_REQ: accept it with a `(start, end]` range, or refuse it with a status
//! (or a rollback point). Follows the reference producer's validation order (protocol.md §4.3),
//! so a client sees the same answer it would from Couchbase Server.

use crate::filter::{FilterError, StreamValue};
use crate::rollback::{decide, ProducerHistory, RollbackDecision};
use sluice_proto::dcp::{StreamFlags, StreamRequest};
use sluice_proto::Status;
use sluice_types::{FailoverLog, Seqno, VbState};

/// The vbucket's side of the decision.
#[derive(Debug, Clone, Copy)]
pub struct VbView<'a> {
    pub state: VbState,
    pub high_seqno: Seqno,
    pub purge_seqno: Seqno,
    pub persisted_seqno: Seqno,
    pub failover: &'a FailoverLog,
}

/// The connection's side of the decision.
#[derive(Debug, Clone, Copy, Default)]
pub struct ConnView {
    /// A live stream of this key (vbucket, and stream id if any) exists on the connection.
    pub stream_exists: bool,
    /// `enable_stream_id` is on: the request must name a stream id.
    pub stream_ids: bool,
    pub noop_enabled: bool,
    /// The connection asked for xattrs (which needs noops, as on the reference server).
    pub wants_xattrs: bool,
}

/// An accepted request: stream everything after `start` up to `end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepted {
    pub start: Seqno,
    pub end: Seqno,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    Status(Status, &'static str),
    Rollback(Seqno),
}

/// `value_sent`: the request had a JSON value; `value`: it, parsed
/// ([`crate::filter::FilterRequest::parse`]).
pub fn decide_stream_request(
    req: &StreamRequest,
    value_sent: bool,
    value: &Result<StreamValue, FilterError>,
    vb: &VbView<'_>,
    conn: &ConnView,
) -> Result<Accepted, Refused> {
    let flags = req.flags;
    if flags.unknown_bits() != 0 || flags.contains(StreamFlags::NO_VALUE) {
        return Err(Refused::Status(
            Status::Einval,
            "unknown or removed stream flags",
        ));
    }
    let alive = match vb.state {
        VbState::Active => true,
        VbState::Replica => !flags.contains(StreamFlags::ACTIVE_VB_ONLY),
        _ => false,
    };
    if !alive {
        return Err(Refused::Status(
            Status::NotMyVbucket,
            "vbucket is not in a streamable state",
        ));
    }
    if flags.contains(StreamFlags::TAKEOVER) && vb.state != VbState::Active {
        return Err(Refused::Status(
            Status::NotMyVbucket,
            "only an active vbucket can be taken over",
        ));
    }
    let mut req = *req;
    if flags.contains(StreamFlags::FROM_LATEST) {
        req.start = vb.high_seqno;
        req.snap_start = vb.high_seqno;
        req.snap_end = vb.high_seqno;
        if req.vb_uuid.0 == 0 {
            req.vb_uuid = vb
                .failover
                .entries()
                .first()
                .map_or(req.vb_uuid, |e| e.uuid);
        }
    }
    if !conn.noop_enabled && (conn.wants_xattrs || value_sent) {
        return Err(Refused::Status(
            Status::NotSupported,
            "enable noops (DCP_CONTROL enable_noop) to use xattrs or stream filters",
        ));
    }
    let Ok(value) = value else {
        return Err(Refused::Status(
            Status::Einval,
            "the stream value is {\"collections\":[hex ids]} or {\"scope\":hex id}, with an optional \"sid\"",
        ));
    };
    match (value.sid, conn.stream_ids) {
        (Some(_), false) => {
            return Err(Refused::Status(
                Status::DcpStreamIdInvalid,
                "a stream id needs DCP_CONTROL enable_stream_id on the connection",
            ))
        }
        (None, true) => {
            return Err(Refused::Status(
                Status::DcpStreamIdInvalid,
                "this connection enabled stream ids: the request needs a \"sid\" (1..65535)",
            ))
        }
        _ => {}
    }
    if req.start > req.end {
        return Err(Refused::Status(
            Status::Erange,
            "start seqno is above end seqno",
        ));
    }
    if !(req.snap_start <= req.start && req.start <= req.snap_end) {
        return Err(Refused::Status(
            Status::Erange,
            "snapshot range must hold the start seqno (snap_start <= start <= snap_end)",
        ));
    }
    if conn.stream_exists {
        return Err(Refused::Status(
            Status::KeyEexists,
            "a stream for this vbucket (and stream id) is already open on this connection",
        ));
    }
    let history = ProducerHistory {
        high_seqno: vb.high_seqno,
        purge_seqno: vb.purge_seqno,
        failover: vb.failover,
    };
    if let RollbackDecision::RollbackTo(seqno) = decide(&req, None, &history) {
        return Err(Refused::Rollback(seqno));
    }
    let mut end = req.end;
    if flags.contains(StreamFlags::TO_LATEST) {
        end = vb.high_seqno;
    }
    if flags.contains(StreamFlags::DISK_ONLY) {
        end = vb.persisted_seqno;
    }
    if req.start > end {
        return Err(Refused::Status(
            Status::Erange,
            "start seqno is above end seqno",
        ));
    }
    if req.start > vb.high_seqno {
        return Err(Refused::Status(
            Status::Erange,
            "start seqno is above the vbucket's high seqno",
        ));
    }
    Ok(Accepted {
        start: req.start,
        end,
    })
}
