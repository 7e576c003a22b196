//! Execution: a validated request → response bytes (appended to the connection's output),
//! plus what the connection must do next. Nothing here awaits: work that must wait (a disk
//! read, a persistence wait) is returned as a [`Next`] for the connection to carry out.

mod kv;
mod respond;
mod session_ops;
pub mod stats;
mod vbucket_ops;

pub(crate) use kv::engine_error;
pub use respond::Responder;

use crate::node::Node;
use crate::session::{Port, Session};
use bytes::Bytes;
use sluice_proto::request::{validate, Command};
use sluice_proto::{Frame, Magic, Status};
use sluice_types::{vbucket_of, Seqno, VbId};
use std::time::Duration;

/// What the connection does after a request was executed.
#[derive(Debug)]
pub enum Next {
    Continue,
    /// Close the connection (after writing what is already in the output).
    Close,
    /// Read the key's value from disk, then execute the same request again.
    Fetch {
        vb: VbId,
        key: Bytes,
    },
    /// Hold the answer until `seqno` of `vb` is persisted: then write `on_success`, or
    /// `on_timeout` after `timeout`.
    AwaitPersistence {
        vb: VbId,
        seqno: Seqno,
        timeout: Duration,
        on_success: Vec<u8>,
        on_timeout: Vec<u8>,
    },
    /// Hold the answer until the durable write is acknowledged enough (persisted here and/or
    /// held by replicas): then write `on_success`, or `on_timeout` after its timeout.
    AwaitDurability {
        write: crate::durability::DurableWrite,
        on_success: Vec<u8>,
        on_timeout: Vec<u8>,
    },
    /// The write was refused for want of memory that the bucket frees by itself (the
    /// flusher persisting, the pager evicting): wait for room, then execute it again.
    Stall,
    /// FLUSH with a delay: flush the bucket later.
    FlushAfter(Duration),
    /// DCP_OPEN succeeded: the connection becomes a DCP producer.
    DcpProducer {
        name: String,
        flags: sluice_proto::dcp::OpenFlags,
    },
}

/// Executes one client frame.
pub fn execute(node: &Node, session: &mut Session, frame: &Frame<'_>, out: &mut Vec<u8>) -> Next {
    if frame.magic == Magic::ServerResponse && session.has(sluice_proto::Feature::Duplex) {
        // The answer to a clustermap push: nothing to do with it.
        return Next::Continue;
    }
    if !matches!(frame.magic, Magic::ClientRequest | Magic::AltClientRequest) {
        // Responses or server requests from a client: the stream is not what we expect.
        return Next::Close;
    }
    let mut r = Responder::new(out, frame.opcode, frame.opaque, session);
    let mut req = match validate(frame, &session.validate_ctx()) {
        Ok(req) => req,
        Err(status) => {
            r.error(status, "invalid request");
            return Next::Continue;
        }
    };
    r.quiet = req.quiet;
    if session.port == Port::Memcached {
        // Plain memcached clients know nothing of vbuckets (they send 0): route by key here.
        if let Some(key) = req.command.key() {
            req.vb = vbucket_of(key, node.bucket.num_vbuckets());
        }
    }
    if !session.authenticated() && !allowed_before_auth(&req.command) {
        r.error(Status::Eaccess, "authenticate first");
        return Next::Continue;
    }
    if needs_bucket(&req.command) && !session.bucket_selected {
        r.error(Status::NoBucket, "select a bucket first");
        return Next::Continue;
    }
    match &req.command {
        Command::Hello { .. }
        | Command::SaslListMechs
        | Command::SaslAuth { .. }
        | Command::SaslStep { .. }
        | Command::SelectBucket { .. }
        | Command::ListBuckets
        | Command::GetErrorMap { .. }
        | Command::GetClusterConfig { .. }
        | Command::Noop
        | Command::Version
        | Command::Verbosity
        | Command::Quit => session_ops::execute(node, session, &req, r),
        Command::Stat { group } => stats::execute(node, group, r),
        Command::GetAllVbSeqnos { .. }
        | Command::ObserveSeqno { .. }
        | Command::GetFailoverLog
        | Command::GetVbucket
        | Command::SeqnoPersistence { .. } => vbucket_ops::execute(node, &req, r),
        Command::Flush { .. }
        | Command::Get { .. }
        | Command::GetReplica { .. }
        | Command::GetAndTouch { .. }
        | Command::Touch { .. }
        | Command::Store { .. }
        | Command::Delete { .. }
        | Command::Arithmetic { .. }
        | Command::Concat { .. }
        | Command::GetMeta { .. } => kv::execute(node, &req, r),
        Command::DcpOpen { name, flags } => crate::dcp::open::execute(name, *flags, r),
        Command::DcpControl { .. }
        | Command::DcpStreamReq { .. }
        | Command::DcpCloseStream
        | Command::DcpBufferAck { .. }
        | Command::DcpSeqnoAck { .. } => {
            r.error(Status::Einval, "not a DCP connection: send DCP_OPEN first");
            Next::Continue
        }
    }
}

fn allowed_before_auth(c: &Command<'_>) -> bool {
    matches!(
        c,
        Command::Hello { .. }
            | Command::SaslListMechs
            | Command::SaslAuth { .. }
            | Command::SaslStep { .. }
            | Command::GetErrorMap { .. }
            | Command::Noop
            | Command::Version
            | Command::Quit
    )
}

fn needs_bucket(c: &Command<'_>) -> bool {
    c.key().is_some()
        || matches!(
            c,
            Command::Flush { .. }
                | Command::GetAllVbSeqnos { .. }
                | Command::ObserveSeqno { .. }
                | Command::GetFailoverLog
                | Command::GetVbucket
                | Command::SeqnoPersistence { .. }
                | Command::DcpOpen { .. }
        )
}
