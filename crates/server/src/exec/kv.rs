//! Document commands: gets, stores, deletes, counters, append/prepend, touch, GET_META,
//! SET / ADD / DEL_WITH_META, FLUSH.

use super::keyspace::{self, KeyBuf, KeyRefusal, Keyspace};
use super::{Held, Next, Responder};
use crate::bucket_handle::BucketHandle;
use crate::durability::{DurableWrite, TrackError};
use crate::node::Node;
use bytes::Bytes;
use sluice_engine::{
    ArithmeticRequest, ConflictResolution, EngineError, Mutation, StoreKind, StoreRequest,
    WithMetaKind, WithMetaRequest,
};
use sluice_proto::request::{KvCommand, Request, StoreOp, WithMetaOp, WithMetaOptions};
use sluice_proto::{DurabilityLevel, Status};
use sluice_types::collection::QUALIFIED_KEY_BYTES_MAX;
use sluice_types::{Cas, Datatype, ItemMeta, VbId};
use std::time::{Duration, Instant};

/// How long a durable write waits when the client gave no timeout.
const DURABILITY_TIMEOUT_DEFAULT: Duration = Duration::from_secs(10);

/// Executes `cmd`, the command of `req` (whose header gives the vbucket, CAS, datatype and
/// frame infos).
pub fn execute(
    node: &Node,
    handle: &BucketHandle,
    req: &Request<'_>,
    cmd: &KvCommand<'_>,
    keyspace: &Keyspace,
    mut r: Responder<'_>,
) -> Next {
    let bucket = &handle.engine;
    let vb = req.vb;
    let cas = req.cas;
    if node.is_fenced() && fenced_out(handle, vb, cmd) {
        engine_error(&mut r, &EngineError::NotMyVbucket, handle);
        return Next::Continue;
    }
    // The bucket's minimum raises what the client asked for (a plain write becomes a
    // SyncWrite), as Couchbase's `durabilityMinLevel` does; reads are not raised.
    let asked = req.frame_infos.durability;
    let min = match cmd.is_mutation() {
        true => handle.durability_min(),
        false => None,
    };
    let d = match asked.map(|(level, _)| level).max(min) {
        None => None,
        Some(level) => {
            if level != DurabilityLevel::Majority && !bucket.config.is_persistent() {
                r.error(
                    Status::DurabilityInvalidLevel,
                    "an ephemeral bucket cannot persist",
                );
                return Next::Continue;
            }
            let timeout = asked
                .and_then(|(_, timeout_ms)| timeout_ms)
                .map(|t| Duration::from_millis(u64::from(t)))
                .unwrap_or(DURABILITY_TIMEOUT_DEFAULT);
            Some(Durable {
                level,
                deadline: Instant::now() + timeout,
            })
        }
    };
    let level = d.map(|d| d.level);
    let outcome: Result<Next, EngineError> = match cmd {
        // Answered under the vbucket's lock, straight from the stored value: the common
        // read never clones (and so never bumps the reference count of) the value.
        KvCommand::Get { key, with_key } => bucket
            .read(vb, key, |meta, value| {
                send_document(
                    &mut r,
                    meta,
                    value,
                    with_key.then(|| keyspace.wire_key(key)),
                );
            })
            .map(|()| Next::Continue),
        KvCommand::GetAndTouch { key, expiry } => bucket.touch(vb, key, *expiry).map(|(doc, _)| {
            send_document(&mut r, &doc.meta, &doc.value, None);
            Next::Continue
        }),
        KvCommand::Touch { key, expiry } => bucket.touch(vb, key, *expiry).map(|(doc, _)| {
            let p = r.packet(Status::Success).cas(doc.meta.cas.0);
            r.success(p);
            Next::Continue
        }),
        KvCommand::GetReplica { key } => bucket.get_replica(vb, key).map(|doc| {
            send_document(&mut r, &doc.meta, &doc.value, None);
            Next::Continue
        }),
        KvCommand::Store {
            op,
            key,
            value,
            flags,
            expiry,
        } => {
            let sr = StoreRequest {
                kind: match op {
                    StoreOp::Set => StoreKind::Set,
                    StoreOp::Add => StoreKind::Add,
                    StoreOp::Replace => StoreKind::Replace,
                },
                key,
                value,
                flags: *flags,
                expiry_wire: *expiry,
                datatype: req.datatype,
                cas,
                preserve_ttl: req.frame_infos.preserve_ttl,
                durability: level,
                macros: &[],
                access_deleted: false,
                store_deleted: false,
            };
            mutate(handle, vb, d, &mut r, || {
                bucket.store(vb, &sr).map(|m| (m, ()))
            })
            .map(|done| answer(req, cmd, &mut r, done, |()| Vec::new()))
        }
        KvCommand::Delete { key } => mutate(handle, vb, d, &mut r, || {
            bucket.delete(vb, key, cas, level).map(|m| (m, ()))
        })
        .map(|done| answer(req, cmd, &mut r, done, |()| Vec::new())),
        KvCommand::Arithmetic {
            increment,
            key,
            delta,
            initial,
            expiry,
        } => {
            let ar = ArithmeticRequest {
                key,
                increment: *increment,
                delta: *delta,
                initial: *initial,
                expiry_wire: *expiry,
                cas,
                durability: level,
            };
            mutate(handle, vb, d, &mut r, || {
                bucket.arithmetic(vb, &ar).map(|(value, m)| (m, value))
            })
            .map(|done| answer(req, cmd, &mut r, done, |v: u64| v.to_be_bytes().to_vec()))
        }
        KvCommand::Concat { append, key, value } => mutate(handle, vb, d, &mut r, || {
            bucket
                .concat(vb, key, *append, value, cas, level)
                .map(|m| (m, ()))
        })
        .map(|done| answer(req, cmd, &mut r, done, |()| Vec::new())),
        KvCommand::WithMeta {
            op,
            key,
            value,
            meta,
        } => {
            // Couchbase's XDCR writes with meta without durability; a bucket's minimum
            // level is not applied to them either (see the README).
            if asked.is_some() {
                r.error(
                    Status::NotSupported,
                    "durability with *_WITH_META is not supported",
                );
                return Next::Continue;
            }
            // As in Couchbase: a last-write-wins bucket takes versions only from senders that
            // say they know it, with FORCE_ACCEPT_WITH_META_OPS (XDCR sets it on every write
            // to one), and a revision bucket refuses the flag. It does not skip conflict
            // resolution: only SKIP_CONFLICT_RESOLUTION does.
            let forced = meta
                .options
                .has(WithMetaOptions::FORCE_ACCEPT_WITH_META_OPS);
            let lww = bucket.config.conflict_resolution == ConflictResolution::LastWriteWins;
            if forced != lww {
                r.error(
                    Status::Einval,
                    if lww {
                        "this bucket resolves conflicts by last write wins: *_WITH_META needs FORCE_ACCEPT_WITH_META_OPS"
                    } else {
                        "FORCE_ACCEPT_WITH_META_OPS is for last-write-wins buckets; this bucket resolves conflicts by revision"
                    },
                );
                return Next::Continue;
            }
            let wr = WithMetaRequest {
                kind: match op {
                    WithMetaOp::Set => WithMetaKind::Set,
                    WithMetaOp::Add => WithMetaKind::Add,
                    WithMetaOp::Delete if meta.options.has(WithMetaOptions::IS_EXPIRATION) => {
                        WithMetaKind::Expire
                    }
                    WithMetaOp::Delete => WithMetaKind::Delete,
                },
                key,
                value,
                datatype: req.datatype,
                flags: meta.flags,
                expiry: meta.expiry,
                rev_seqno: meta.rev_seqno,
                cas: Cas(meta.cas),
                cas_check: cas,
                check_conflicts: meta.options.check_conflicts(),
                regenerate_cas: meta.options.has(WithMetaOptions::REGENERATE_CAS),
            };
            bucket
                .store_with_meta(vb, &wr)
                .map(|m| finish_mutation(req, cmd, None, &mut r, m, &[]))
        }
        KvCommand::GetMeta { key, want_datatype } => bucket.get_meta(vb, key).map(|g| {
            let m = g.meta;
            let mut extras = Vec::with_capacity(21);
            extras.extend_from_slice(&u32::from(m.deleted).to_be_bytes());
            extras.extend_from_slice(&m.flags.to_be_bytes());
            extras.extend_from_slice(&m.expiry.0.to_be_bytes());
            extras.extend_from_slice(&m.rev_seqno.to_be_bytes());
            if *want_datatype {
                extras.push(m.datatype.0);
            }
            let p = r.packet(Status::Success).cas(m.cas.0).extras(&extras);
            r.send(p);
            Next::Continue
        }),
        KvCommand::GetLocked { key, lock_s } => bucket.get_locked(vb, key, *lock_s).map(|doc| {
            send_document(&mut r, &doc.meta, &doc.value, None);
            Next::Continue
        }),
        KvCommand::Unlock { key } => bucket.unlock(vb, key, cas).map(|()| {
            let p = r.packet(Status::Success);
            r.success(p);
            Next::Continue
        }),
        KvCommand::Subdoc(s) => super::subdoc::execute(handle, req, cmd, s, d, &mut r),
        KvCommand::Observe { keys } => match observe(bucket, keys, keyspace) {
            Ok(Ok(body)) => {
                let p = r.packet(Status::Success).value(&body);
                r.send(p);
                Ok(Next::Continue)
            }
            Ok(Err(refusal)) => {
                keyspace::refuse(&mut r, keyspace, refusal);
                Ok(Next::Continue)
            }
            Err(e) => Err(e),
        },
        KvCommand::GetRandom { collection } => match keyspace.collection(*collection) {
            Ok(cid) => bucket
                .random_document(rand::random(), cid)
                .map(|(key, doc)| {
                    send_document(&mut r, &doc.meta, &doc.value, Some(keyspace.wire_key(&key)));
                    Next::Continue
                }),
            Err(refusal) => {
                keyspace::refuse(&mut r, keyspace, refusal);
                Ok(Next::Continue)
            }
        },
        KvCommand::CollectionsManifest => {
            let json = handle.manifest().to_json().to_string();
            let p = r
                .packet(Status::Success)
                .value(json.as_bytes())
                .datatype(if r.json { Datatype::JSON } else { 0 });
            r.send(p);
            Ok(Next::Continue)
        }
        KvCommand::CollectionsGetId { path, scope_only } => {
            super::collections::get_id(&handle.manifest(), path, *scope_only, &mut r);
            Ok(Next::Continue)
        }
        KvCommand::Flush { delay } => {
            if *delay > 0 {
                let p = r.packet(Status::Success);
                r.success(p);
                return Next::FlushAfter(Duration::from_secs(u64::from(*delay)));
            }
            bucket.flush_all().map(|_| {
                let p = r.packet(Status::Success);
                r.success(p);
                Next::Continue
            })
        }
    };
    match outcome {
        Ok(next) => next,
        Err(EngineError::NeedsFetch) => Next::Fetch {
            vb,
            key: Bytes::copy_from_slice(cmd.key().expect("document commands name a key")),
        },
        Err(EngineError::TempFail)
            if bucket.frees_room_by_itself() && !node.config.write_stall.is_zero() =>
        {
            Next::Stall
        }
        Err(EngineError::KeyNotFound)
            if r.quiet
                && matches!(
                    cmd,
                    KvCommand::Get { .. }
                        | KvCommand::GetAndTouch { .. }
                        | KvCommand::GetMeta { .. }
                ) =>
        {
            Next::Continue
        }
        Err(e) => {
            engine_error(&mut r, &e, handle);
            Next::Continue
        }
    }
}

/// A fenced node (cut off from a majority of the voters, which may have promoted the
/// replicas) serves nothing from its active vbuckets: not a write, which could be lost, nor
/// a read, which could be stale. A replica read is what it is, and says so.
fn fenced_out(handle: &BucketHandle, vb: VbId, cmd: &KvCommand<'_>) -> bool {
    match cmd {
        KvCommand::GetReplica { .. } => false,
        // Read any vbucket, whatever the header says.
        KvCommand::GetRandom { .. } | KvCommand::Observe { .. } => true,
        // Answered from the manifest, which a fenced node may serve.
        KvCommand::CollectionsManifest | KvCommand::CollectionsGetId { .. } => false,
        _ => handle.engine.vb_state(vb).ok() == Some(sluice_types::VbState::Active),
    }
}

/// OBSERVE's answer: `u16 vbucket, u16 key_len, key, u8 state, u64 cas` per key (state
/// 0x00 in memory only, 0x01 persisted, 0x80 not found, 0x81 deleted but not persisted).
/// A key whose vbucket is neither active nor replica here fails the whole request. Each key is qualified as a single command's would be; one that names no document of
/// the bucket refuses the whole request.
fn observe(
    bucket: &sluice_engine::Bucket,
    keys: &[(u16, &[u8])],
    keyspace: &Keyspace,
) -> Result<Result<Vec<u8>, KeyRefusal>, EngineError> {
    use sluice_engine::Observed;
    let mut body = Vec::new();
    for (vb, wire) in keys {
        let mut buf: KeyBuf = [0; QUALIFIED_KEY_BYTES_MAX];
        let key = match keyspace.qualify(wire, &mut buf) {
            Ok(k) => k,
            Err(refusal) => return Ok(Err(refusal)),
        };
        let (state, cas) = match bucket.observe(VbId(*vb), key)? {
            Observed::NotPersisted(c) => (0x00, c.0),
            Observed::Persisted(c) => (0x01, c.0),
            Observed::NotFound => (0x80, 0),
            Observed::Deleted(c) => (0x81, c.0),
        };
        body.extend_from_slice(&vb.to_be_bytes());
        body.extend_from_slice(&(wire.len() as u16).to_be_bytes());
        body.extend_from_slice(wire);
        body.push(state);
        body.extend_from_slice(&cas.to_be_bytes());
    }
    Ok(Ok(body))
}

/// Answers a read with the document adapted to what the client negotiated: xattrs stripped
/// (plain reads never return them), Snappy inflated unless negotiated, JSON bit only if
/// negotiated.
fn send_document(r: &mut Responder<'_>, meta: &ItemMeta, stored: &Bytes, key: Option<&[u8]>) {
    let mut dt = meta.datatype;
    let inflated;
    let mut value: &[u8] = stored;
    if dt.is_snappy() && (!r.snappy || dt.is_xattr()) {
        match sluice_engine::inflate(value) {
            Ok(v) => inflated = v,
            Err(_) => {
                r.error(Status::Einternal, "stored value does not decompress");
                return;
            }
        }
        value = &inflated;
        dt = dt.without(Datatype::SNAPPY);
    }
    if dt.is_xattr() {
        let body = sluice_subdoc::xattr::body_offset(value).unwrap_or(0);
        value = &value[body..];
        dt = dt.without(Datatype::XATTR);
    }
    if !r.json {
        dt = dt.without(Datatype::JSON);
    }
    let flags = meta.flags.to_be_bytes();
    let mut p = r
        .packet(Status::Success)
        .cas(meta.cas.0)
        .datatype(dt.0)
        .extras(&flags)
        .value(value);
    if let Some(k) = key {
        p = p.key(k);
    }
    r.send(p);
}

/// A durable write's level and when it gives up.
#[derive(Debug, Clone, Copy)]
pub(super) struct Durable {
    pub level: DurabilityLevel,
    pub deadline: Instant,
}

/// A mutation done: its token, what the command returns beside it, and for a durable write
/// its wait.
pub(super) type Done<T> = (Mutation, T, Option<DurableWrite>);

/// Runs the engine call `f`; with durability, as a SyncWrite tracked from the moment its
/// prepare exists. `Ok(None)`: refused before anything was written, and answered here.
pub(super) fn mutate<T>(
    handle: &BucketHandle,
    vb: VbId,
    d: Option<Durable>,
    r: &mut Responder<'_>,
    f: impl FnOnce() -> Result<(Mutation, T), EngineError>,
) -> Result<Option<Done<T>>, EngineError> {
    let Some(Durable { level, deadline }) = d else {
        return f().map(|(m, x)| Some((m, x, None)));
    };
    match handle.durability.write(handle, vb, level, deadline, f) {
        Ok(((m, x), outcome)) => Ok(Some((
            m,
            x,
            Some(DurableWrite {
                vb,
                seqno: m.seqno,
                level,
                deadline,
                outcome,
            }),
        ))),
        Err(TrackError::Engine(e)) => Err(e),
        Err(e @ TrackError::Impossible(_)) => {
            r.error(Status::DurabilityImpossible, &e.to_string());
            Ok(None)
        }
        Err(e @ TrackError::Moving) => {
            r.error(Status::Etmpfail, &e.to_string());
            Ok(None)
        }
    }
}

/// Answers a mutation that `mutate` made (nothing to do if it answered already).
fn answer<T>(
    req: &Request<'_>,
    cmd: &KvCommand<'_>,
    r: &mut Responder<'_>,
    done: Option<Done<T>>,
    value: impl FnOnce(T) -> Vec<u8>,
) -> Next {
    match done {
        None => Next::Continue,
        Some((m, x, wait)) => finish_mutation(req, cmd, wait, r, m, &value(x)),
    }
}

/// The answer to a mutation: CAS, and mutation token extras when negotiated. A durable
/// write's answer is held until its outcome: SUCCESS once committed, SYNC_WRITE_AMBIGUOUS
/// when aborted at its timeout or when the outcome is unknown.
pub(super) fn finish_mutation(
    req: &Request<'_>,
    cmd: &KvCommand<'_>,
    durable: Option<DurableWrite>,
    r: &mut Responder<'_>,
    m: Mutation,
    value: &[u8],
) -> Next {
    finish_mutation_as(Status::Success, req, cmd, durable, r, m, value)
}

/// [`finish_mutation`] with a success status of its own (SUBDOC_SUCCESS_DELETED).
pub(super) fn finish_mutation_as(
    status: Status,
    req: &Request<'_>,
    cmd: &KvCommand<'_>,
    durable: Option<DurableWrite>,
    r: &mut Responder<'_>,
    m: Mutation,
    value: &[u8],
) -> Next {
    let mut extras = [0u8; 16];
    let extras: &[u8] = if r.mutation_seqno {
        extras[..8].copy_from_slice(&m.vb_uuid.0.to_be_bytes());
        extras[8..].copy_from_slice(&m.seqno.0.to_be_bytes());
        &extras
    } else {
        &[]
    };
    let cas = if r.memcached && matches!(cmd, KvCommand::Delete { .. }) {
        0
    } else {
        m.cas.0
    };
    let p = r.packet(status).cas(cas).extras(extras).value(value);
    let Some(write) = durable else {
        r.success(p);
        return Next::Continue;
    };
    debug_assert_eq!(write.vb, req.vb);
    let mut on_success = Vec::new();
    if !r.quiet {
        p.encode_into(&mut on_success);
    }
    let mut on_timeout = Vec::new();
    r.fork(&mut on_timeout).error(
        Status::SyncWriteAmbiguous,
        "durability timeout: the outcome is unknown",
    );
    Next::Hold(Held::Durability {
        write,
        on_success,
        on_timeout,
    })
}

/// Maps an engine error onto the wire.
pub fn engine_error(r: &mut Responder<'_>, e: &EngineError, bucket: &BucketHandle) {
    let (status, context): (Status, &str) = match e {
        EngineError::NotMyVbucket => {
            let view = bucket.cluster_map();
            if r.map_known.is_some_and(|known| known >= view.version()) {
                let p = r.packet(Status::NotMyVbucket);
                r.send(p);
                return;
            }
            let dt = if r.json { Datatype::JSON } else { 0 };
            let p = r
                .packet(Status::NotMyVbucket)
                .datatype(dt)
                .value(&view.bucket_json);
            r.send(p);
            return;
        }
        EngineError::KeyNotFound => (Status::KeyEnoent, ""),
        EngineError::KeyExists => (Status::KeyEexists, ""),
        EngineError::Locked => (
            Status::Locked,
            "the document is locked; only a request with the lock's CAS may change it",
        ),
        EngineError::NotLocked => (Status::NotLocked, "the document is not locked"),
        EngineError::NotStored => (Status::NotStored, ""),
        EngineError::DeltaBadValue => (Status::DeltaBadval, "the value is not a number"),
        EngineError::TooBig => (
            Status::E2big,
            "the value is larger than the item size limit",
        ),
        EngineError::Invalid(why) => (Status::Einval, why),
        EngineError::XattrInvalid(why) => (Status::XattrEinval, why),
        EngineError::TempFail => (
            Status::Etmpfail,
            "no memory for writes now (quota, or persistence behind); retry",
        ),
        EngineError::WritesRefused(_) => (
            Status::Einternal,
            "the bucket refuses writes after a storage failure (see the server log)",
        ),
        EngineError::NeedsFetch => (Status::Etmpfail, "value not resident"),
        EngineError::Storage(_) => (Status::Einternal, "storage error (see the server log)"),
        EngineError::UnknownUuid => (Status::KeyEnoent, "unknown vbucket uuid"),
        EngineError::NotPersisted(_) => (Status::Etmpfail, "not persisted yet"),
        EngineError::SeqnoNotIncreasing { .. } => (Status::Erange, "seqno does not increase"),
        EngineError::SyncWriteInProgress => (
            Status::SyncWriteInProgress,
            "a durable write of this key is in progress; retry",
        ),
        EngineError::SyncWriteReCommitInProgress => (
            Status::SyncWriteReCommitInProgress,
            "a durable write of this key is being re-committed by its new active; retry",
        ),
        EngineError::NoSuchPrepare(_) | EngineError::Pending(_) => (
            Status::Einternal,
            "durable write state (see the server log)",
        ),
    };
    if let EngineError::Storage(msg) | EngineError::WritesRefused(msg) = e {
        tracing::warn!(error = %msg, "request failed on storage");
    }
    r.error(status, context);
}
