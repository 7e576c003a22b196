//! Execution: a validated request → response bytes (appended to the connection's output),
//! plus what the connection must do next. Nothing here awaits: work that must wait (a disk
//! read, a persistence wait) is returned as a [`Next`] for the connection to carry out.
//!
//! [`execute`] checks what every command shares (authentication, a selected bucket, the
//! session's roles on it: `access`) and hands the command to its family's executor, which matches the family's enum
//! exhaustively: `kv` (documents), `session_ops` (negotiation, SASL, server queries; STAT
//! through `stats`), `vbucket_ops` (vbucket and seqno queries), `dcp_ops` (DCP_OPEN).

pub mod access;
mod collections;
mod dcp_ops;
pub mod keyspace;
mod kv;
mod respond;
pub(crate) mod session_ops;
pub mod stats;
mod subdoc;
mod vbucket_ops;

pub(crate) use kv::engine_error;
pub use respond::Responder;

use crate::node::Node;
use crate::session::{Port, Session};
use bytes::Bytes;
use keyspace::KeyBuf;
use sluice_proto::request::{validate, Command, DcpCommand, SessionCommand};
use sluice_proto::{Frame, Magic, Status};
use sluice_types::collection::QUALIFIED_KEY_BYTES_MAX;
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
    /// Hold the answer until what it waits for happened (or did not in time).
    Hold(Held),
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

/// An answer that waits: the connection writes `on_success` once the wait is over, or
/// `on_timeout` when it was not met in time. Without UnorderedExecution it holds back the
/// answers after it.
#[derive(Debug)]
pub enum Held {
    /// Until `seqno` of `vb` is persisted, at most `timeout`.
    Persistence {
        vb: VbId,
        seqno: Seqno,
        timeout: Duration,
        on_success: Vec<u8>,
        on_timeout: Vec<u8>,
    },
    /// Until the durable write is committed (`on_timeout` when aborted or unknown).
    Durability {
        write: crate::durability::DurableWrite,
        on_success: Vec<u8>,
        on_timeout: Vec<u8>,
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
    if session.bucket.as_ref().is_some_and(|b| b.is_deleted()) {
        // The bucket was deleted under this connection: Couchbase closes such connections.
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
        if let (Some(key), Some(bucket)) = (req.command.key(), &session.bucket) {
            req.vb = vbucket_of(key, bucket.engine.num_vbuckets());
        }
    }
    if !session.authenticated() && !allowed_before_auth(&req.command) {
        r.error(Status::Eaccess, "authenticate first");
        return Next::Continue;
    }
    // Roles changed (or the user was deleted) since this connection's access was worked
    // out: it is worked out again, so a revoked role stops at the next command.
    if session.port == Port::Kv
        && session.user.is_some()
        && session.access_generation != node.credentials.generation()
    {
        session_ops::recompute_access(node, session);
    }
    if needs_bucket(&req.command) && session.bucket.is_none() {
        r.error(Status::NoBucket, "select a bucket first");
        return Next::Continue;
    }
    if let Some(why) = access::refused(session, &req.command) {
        r.error(Status::Eaccess, why);
        return Next::Continue;
    }
    if session.has(sluice_proto::Feature::Collections) {
        session.refresh_manifest();
    }
    // A client that cannot see prepares and aborts is told the seqnos it can reach.
    let sync_writes = session.has(sluice_proto::Feature::SyncReplication);
    match (&req.command, &session.bucket) {
        (Command::Kv(cmd), Some(bucket)) => {
            let keyspace = session.keyspace();
            // The engine's key for the command: the client's, or the client's behind the
            // default collection's prefix (built here).
            let mut buf: KeyBuf = [0; QUALIFIED_KEY_BYTES_MAX];
            let mut qualified;
            let cmd = match cmd.key() {
                None => cmd,
                Some(wire) => match keyspace.qualify(wire, &mut buf) {
                    Ok(key) => {
                        qualified = cmd.with_key(key);
                        // A collection's maxTTL bounds every expiry written into it.
                        if let (Some(max), Some(e)) =
                            (keyspace.max_ttl_s(key), qualified.expiry_mut())
                        {
                            *e = keyspace::cap_expiry(*e, max, unix_now_s());
                        }
                        &qualified
                    }
                    Err(refusal) => {
                        keyspace::refuse(&mut r, &keyspace, refusal);
                        return Next::Continue;
                    }
                },
            };
            kv::execute(node, bucket, &req, cmd, &keyspace, r)
        }
        (Command::Vbucket(cmd), Some(bucket)) => {
            vbucket_ops::execute(bucket, req.vb, cmd, sync_writes, r)
        }
        (Command::Session(cmd), _) => session_ops::execute(node, session, cmd, r),
        (Command::Dcp(cmd), _) => dcp_ops::execute(cmd, r),
        (Command::Kv(_) | Command::Vbucket(_), None) => unreachable!("needs_bucket checked"),
    }
}

pub(crate) fn unix_now_s() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as u32)
}

/// Only negotiation and authentication, and what a client asks before either.
fn allowed_before_auth(c: &Command<'_>) -> bool {
    matches!(
        c,
        Command::Session(
            SessionCommand::Hello { .. }
                | SessionCommand::SaslListMechs
                | SessionCommand::SaslAuth { .. }
                | SessionCommand::SaslStep { .. }
                | SessionCommand::GetErrorMap { .. }
                | SessionCommand::Noop
                | SessionCommand::Version
                | SessionCommand::Quit
        )
    )
}

/// Commands on the bucket's documents or vbuckets, and opening a DCP stream of them.
fn needs_bucket(c: &Command<'_>) -> bool {
    match c {
        Command::Kv(_) | Command::Vbucket(_) | Command::Dcp(DcpCommand::Open { .. }) => true,
        Command::Session(_) | Command::Dcp(_) => false,
    }
}
