//! What the cluster client is told and tells: its options, the operations of a batch and
//! their results, and its counters.

use bytes::Bytes;
use sluice_proto::request::{WithMeta, WithMetaOp};
use sluice_proto::Opcode;
use sluice_types::{Cas, FailoverEntry, VbId};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::options::ConnectOptions;
use crate::results::{DocMeta, GetResult, MutationResult, StoreOptions};

/// How a [`ClusterClient`](crate::ClusterClient) connects, waits and retries.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// The handshake of every node connection; must name a bucket.
    pub connect: ConnectOptions,
    /// From the first attempt of an operation to its last answer, retries included.
    pub operation_timeout: Duration,
    /// One connection's handshake, or one GET_CLUSTER_CONFIG during a refresh.
    pub connect_timeout: Duration,
    /// Retries after the first attempt.
    pub retries_max: u32,
    /// The first backoff when a retry would meet the same map; doubles per retry.
    pub retry_backoff_min: Duration,
    pub retry_backoff_max: Duration,
    /// Requests awaiting an answer on one node's connection (at least 1).
    pub node_in_flight_max: usize,
    /// Operations of one batch call running at once (at least 1).
    pub batch_in_flight_max: usize,
}

impl ClusterOptions {
    pub fn new(connect: ConnectOptions) -> ClusterOptions {
        ClusterOptions {
            connect,
            operation_timeout: Duration::from_millis(2500),
            connect_timeout: Duration::from_millis(1000),
            retries_max: 16,
            retry_backoff_min: Duration::from_millis(1),
            retry_backoff_max: Duration::from_millis(100),
            node_in_flight_max: 1024,
            batch_in_flight_max: 4096,
        }
    }

    /// A Sluice cluster with credentials and a bucket, default timings.
    pub fn sluice(username: &str, password: &str, bucket: &str) -> ClusterOptions {
        ClusterOptions::new(ConnectOptions::sluice(username, password, bucket))
    }

    /// The pause before retry number `retry` (1-based) when the map did not change.
    pub(crate) fn backoff(&self, retry: u32) -> Duration {
        let doubled = self
            .retry_backoff_min
            .saturating_mul(1u32 << retry.saturating_sub(1).min(20));
        doubled.min(self.retry_backoff_max)
    }
}

/// One operation of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Get {
        key: Bytes,
    },
    /// GET_META: the key's metadata (a deleted key's tombstone too); KEY_ENOENT if none.
    GetMeta {
        key: Bytes,
    },
    /// GET_REPLICA from replica `index` (0-based) of the key's vbucket.
    GetReplica {
        key: Bytes,
        index: u8,
    },
    Set {
        key: Bytes,
        value: Bytes,
        options: StoreOptions,
    },
    /// Stores only if the key holds no document (KEY_EEXISTS otherwise).
    Add {
        key: Bytes,
        value: Bytes,
        options: StoreOptions,
    },
    /// A non-zero `cas` must match.
    Delete {
        key: Bytes,
        cas: Cas,
    },
    /// SET / ADD / DEL_WITH_META: a version made elsewhere, stored with its own metadata
    /// if it wins the target's conflict resolution (KEY_EEXISTS if it loses).
    WithMeta {
        op: WithMetaOp,
        key: Bytes,
        /// Empty for a deletion; for a document with xattrs, the xattr section first.
        value: Bytes,
        meta: WithMeta,
        /// The value's datatype bits as stored at the source (JSON, XATTR).
        datatype: u8,
    },
    /// GET_FAILOVER_LOG of a vbucket, from its active copy: what a replicator checks its
    /// checkpoints against. Routed by the vbucket, not a key.
    FailoverLog {
        vb: VbId,
    },
}

/// The answer to an [`Op`]: a document for the reads, a mutation for the writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    Document(GetResult),
    Mutation(MutationResult),
    Meta(DocMeta),
    /// Newest entry first.
    FailoverLog(Vec<FailoverEntry>),
}

/// Counters since the client was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClusterStats {
    pub operations: u64,
    pub retries: u64,
    pub not_my_vbucket: u64,
    /// Connections that failed to open or died.
    pub connection_failures: u64,
    /// Newer maps installed after the bootstrap.
    pub map_updates: u64,
    /// GET_CLUSTER_CONFIG requests sent to refresh the map.
    pub config_fetches: u64,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) operations: AtomicU64,
    pub(crate) retries: AtomicU64,
    pub(crate) not_my_vbucket: AtomicU64,
    pub(crate) connection_failures: AtomicU64,
    pub(crate) map_updates: AtomicU64,
    pub(crate) config_fetches: AtomicU64,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> ClusterStats {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ClusterStats {
            operations: get(&self.operations),
            retries: get(&self.retries),
            not_my_vbucket: get(&self.not_my_vbucket),
            connection_failures: get(&self.connection_failures),
            map_updates: get(&self.map_updates),
            config_fetches: get(&self.config_fetches),
        }
    }
}

pub(crate) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Borrowed form of [`Op`], for the single-operation calls.
#[derive(Clone, Copy)]
pub(crate) enum OpRef<'a> {
    Get(&'a [u8]),
    GetMeta(&'a [u8]),
    GetReplica(&'a [u8], u8),
    Set(&'a [u8], &'a [u8], StoreOptions),
    Add(&'a [u8], &'a [u8], StoreOptions),
    Delete(&'a [u8], Cas),
    WithMeta(WithMetaOp, &'a [u8], &'a [u8], WithMeta, u8),
    FailoverLog(VbId),
}

impl Op {
    /// The key the operation is on (empty for [`Op::FailoverLog`]).
    pub fn key(&self) -> &Bytes {
        static NO_KEY: Bytes = Bytes::new();
        match self {
            Op::FailoverLog { .. } => &NO_KEY,
            Op::Get { key }
            | Op::GetMeta { key }
            | Op::GetReplica { key, .. }
            | Op::Set { key, .. }
            | Op::Add { key, .. }
            | Op::Delete { key, .. }
            | Op::WithMeta { key, .. } => key,
        }
    }

    pub(crate) fn as_ref(&self) -> OpRef<'_> {
        match self {
            Op::Get { key } => OpRef::Get(key),
            Op::GetMeta { key } => OpRef::GetMeta(key),
            Op::GetReplica { key, index } => OpRef::GetReplica(key, *index),
            Op::Set {
                key,
                value,
                options,
            } => OpRef::Set(key, value, *options),
            Op::Add {
                key,
                value,
                options,
            } => OpRef::Add(key, value, *options),
            Op::Delete { key, cas } => OpRef::Delete(key, *cas),
            Op::WithMeta {
                op,
                key,
                value,
                meta,
                datatype,
            } => OpRef::WithMeta(*op, key, value, *meta, *datatype),
            Op::FailoverLog { vb } => OpRef::FailoverLog(*vb),
        }
    }
}

impl OpRef<'_> {
    pub(crate) fn key(&self) -> &[u8] {
        match self {
            OpRef::Get(k)
            | OpRef::GetMeta(k)
            | OpRef::GetReplica(k, _)
            | OpRef::Set(k, _, _)
            | OpRef::Add(k, _, _)
            | OpRef::Delete(k, _)
            | OpRef::WithMeta(_, k, ..) => k,
            OpRef::FailoverLog(_) => &[],
        }
    }

    pub(crate) fn opcode(&self) -> Opcode {
        match self {
            OpRef::Get(_) => Opcode::Get,
            OpRef::GetMeta(_) => Opcode::GetMeta,
            OpRef::GetReplica(..) => Opcode::GetReplica,
            OpRef::Set(..) => Opcode::Set,
            OpRef::Add(..) => Opcode::Add,
            OpRef::Delete(..) => Opcode::Delete,
            OpRef::WithMeta(op, ..) => op.opcode(),
            OpRef::FailoverLog(_) => Opcode::GetFailoverLog,
        }
    }
}

pub(crate) fn into_document(r: OpResult) -> GetResult {
    match r {
        OpResult::Document(d) => d,
        OpResult::Mutation(_) | OpResult::Meta(_) | OpResult::FailoverLog(_) => {
            unreachable!("a read answers with a document")
        }
    }
}

pub(crate) fn into_mutation(r: OpResult) -> MutationResult {
    match r {
        OpResult::Mutation(m) => m,
        OpResult::Document(_) | OpResult::Meta(_) | OpResult::FailoverLog(_) => {
            unreachable!("a write answers with a mutation")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let o = ClusterOptions::sluice("u", "p", "b");
        let ms = |r| o.backoff(r).as_millis();
        assert_eq!(
            [ms(1), ms(2), ms(3), ms(7), ms(8), ms(40)],
            [1, 2, 4, 64, 100, 100]
        );
    }
}
