//! What a [`DcpStream`](super::DcpStream) delivers to the application, in stream order.

use bytes::Bytes;
use sluice_proto::dcp::{SnapshotFlags, StreamEndReason};
use sluice_types::{Cas, Datatype, DurabilityLevel, FailoverEntry, Seqno, VbId, VbState};

/// One document change as the producer sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DcpItem {
    pub vb: VbId,
    pub key: Bytes,
    /// Empty for deletions and expirations, and for mutations on a no-value stream.
    pub value: Bytes,
    pub cas: Cas,
    pub seqno: Seqno,
    pub rev_seqno: u64,
    /// Mutations only (0 otherwise).
    pub flags: u32,
    /// Mutations only: absolute unix seconds, 0 = never.
    pub expiry: u32,
    /// Describes `value` as sent (JSON, and SNAPPY if HELLO negotiated it).
    pub datatype: Datatype,
    /// Deletions and expirations: when the document was deleted (0 when the producer does
    /// not know, e.g. deletes still in memory).
    pub delete_time: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DcpEvent {
    /// The producer accepted the request for `vb` (again, after a stream end, rollback or
    /// takeover): its changes follow, from the client's position. `failover_log` is the
    /// producer's history of `vb`, newest entry first; a replica stores it, so that its
    /// history and the producer's agree. Delivered even when nothing follows, so an
    /// application can act on the acceptance itself (a replica acks what it holds).
    StreamOpened {
        vb: VbId,
        failover_log: Vec<FailoverEntry>,
    },
    Mutation(DcpItem),
    Deletion(DcpItem),
    /// A document removed because its expiry passed (only a deletion to clients that did not
    /// ask for the expiry opcode).
    Expiration(DcpItem),
    /// Every item until the next marker of `vb` has a seqno in `start..=end`. A consumer
    /// that must not expose partial snapshots applies the items once the next marker (or a
    /// stream end) arrives.
    SnapshotMarker {
        vb: VbId,
        start: Seqno,
        end: Seqno,
        flags: SnapshotFlags,
    },
    /// The stream of `vb` ended. With `ok` (end seqno reached) or `closed` (the client
    /// closed it) nothing more comes for it; with any other reason the client has already
    /// asked for it again from its position.
    StreamEnd {
        vb: VbId,
        reason: StreamEndReason,
    },
    /// The producer does not share the client's history of `vb` past `to`: the application
    /// must discard what it holds of `vb` above `to`. The client has already moved its
    /// position to `to` and asked again; changes after `to` follow.
    Rollback {
        vb: VbId,
        to: Seqno,
    },
    /// Takeover ([`DcpStream::takeover`](super::DcpStream::takeover)): the producer hands
    /// `vb` over. First `pending` (the producer stops taking writes next), then, once
    /// everything was sent, `active`: the application now owns the vbucket. The client
    /// answers the producer when the application asks for the next event, i.e. after it has
    /// handled this one.
    VbucketState {
        vb: VbId,
        state: VbState,
    },
    /// A SyncWrite's prepare (only with [`DcpOptions::sync_writes`](super::DcpOptions)):
    /// the document it would commit, not visible until its commit.
    Prepare {
        item: DcpItem,
        /// A durable delete.
        deleted: bool,
        level: DurabilityLevel,
    },
    /// The commit (at `seqno`) of the prepare at `prepared` of `key`: its document is now
    /// the key's committed version.
    Commit {
        vb: VbId,
        key: Bytes,
        prepared: Seqno,
        seqno: Seqno,
    },
    /// The abort (at `seqno`) of the prepare at `prepared` of `key`.
    Abort {
        vb: VbId,
        key: Bytes,
        prepared: Seqno,
        seqno: Seqno,
    },
}

impl DcpEvent {
    pub fn vb(&self) -> VbId {
        match self {
            DcpEvent::Mutation(i)
            | DcpEvent::Deletion(i)
            | DcpEvent::Expiration(i)
            | DcpEvent::Prepare { item: i, .. } => i.vb,
            DcpEvent::StreamOpened { vb, .. }
            | DcpEvent::SnapshotMarker { vb, .. }
            | DcpEvent::StreamEnd { vb, .. }
            | DcpEvent::Rollback { vb, .. }
            | DcpEvent::VbucketState { vb, .. }
            | DcpEvent::Commit { vb, .. }
            | DcpEvent::Abort { vb, .. } => *vb,
        }
    }

    /// The document change, for mutations, deletions and expirations.
    pub fn item(&self) -> Option<&DcpItem> {
        match self {
            DcpEvent::Mutation(i) | DcpEvent::Deletion(i) | DcpEvent::Expiration(i) => Some(i),
            _ => None,
        }
    }
}
