//! Sub-document commands: read the document, run each path through `sluice_subdoc`, and
//! answer in the single- or multi-path layout. A mutation stores the new body under the CAS
//! it read; when another writer got there first and the client gave no CAS, it reads again
//! and retries, as Couchbase does.
//!
//! Virtual xattrs (`$document`, `$vbucket`) are served to lookups. Stored xattrs are kept
//! unchanged by every body mutation; reading and writing them through paths is not built
//! yet (see the README), so such paths answer NOT_SUPPORTED.

use super::kv::{finish_mutation, mutate, Durable};
use super::{Next, Responder};
use crate::bucket_handle::BucketHandle;
use sluice_engine::{EngineError, StoreKind, StoreRequest};
use sluice_proto::request::{KvCommand, Request, SubdocCommand, SubdocOp, SubdocSpec};
use sluice_proto::Status;
use sluice_subdoc::{Component, Document, LookupOp, Mutation, MutationOp, Path, SubdocError};
use sluice_types::{Cas, Datatype, ItemMeta};

/// How many times a mutation without a client CAS re-reads after losing a race.
const CAS_RETRIES_MAX: usize = 100;

/// A stored document split into its parts.
struct Current {
    meta: ItemMeta,
    /// The xattr section as stored (length prefix included), if any.
    xattrs: Option<Vec<u8>>,
    body: Vec<u8>,
}

/// A path that failed: which spec, and the status it gets.
struct PathFailure {
    index: usize,
    status: Status,
}

pub fn execute(
    handle: &BucketHandle,
    req: &Request<'_>,
    kv: &KvCommand<'_>,
    cmd: &SubdocCommand<'_>,
    d: Option<Durable>,
    r: &mut Responder<'_>,
) -> Result<Next, EngineError> {
    use sluice_proto::request::DocFlags;
    let unsupported = DocFlags::ACCESS_DELETED
        | DocFlags::CREATE_AS_DELETED
        | DocFlags::REVIVE
        | DocFlags::REPLICA_READ;
    if cmd.doc_flags.has(unsupported) {
        r.error(
            Status::NotSupported,
            "deleted-document access, create-as-deleted, revive and replica reads are not built yet",
        );
        return Ok(Next::Continue);
    }
    if cmd.is_mutation() {
        mutation(handle, req, kv, cmd, d, r)
    } else {
        lookup(handle, req, cmd, r)
    }
}

fn read(handle: &BucketHandle, req: &Request<'_>, key: &[u8]) -> Result<Current, EngineError> {
    let (meta, stored) = handle
        .engine
        .read(req.vb, key, |meta, value| (*meta, value.clone()))?;
    let value = match meta.datatype.is_snappy() {
        true => sluice_engine::inflate(&stored)?,
        false => stored.to_vec(),
    };
    let (xattrs, body) = match meta.datatype.is_xattr() {
        true => {
            let end = value
                .get(..4)
                .and_then(|b| b.try_into().ok())
                .map(|b: [u8; 4]| 4 + u32::from_be_bytes(b) as usize)
                .filter(|&end| end <= value.len())
                .ok_or(EngineError::Invalid("stored xattr section is malformed"))?;
            let (x, b) = value.split_at(end);
            (Some(x.to_vec()), b.to_vec())
        }
        false => (None, value),
    };
    Ok(Current { meta, xattrs, body })
}

fn lookup(
    handle: &BucketHandle,
    req: &Request<'_>,
    cmd: &SubdocCommand<'_>,
    r: &mut Responder<'_>,
) -> Result<Next, EngineError> {
    let cur = read(handle, req, cmd.key)?;
    let json = cur.meta.datatype.is_json();
    // Parsed once, for every body path of the command.
    let doc = match json {
        true => Document::parse(&cur.body),
        false => Err(SubdocError::DocNotJson),
    };
    let results: Vec<Result<Option<Vec<u8>>, Status>> = cmd
        .specs
        .iter()
        .map(|spec| lookup_one(handle, &cur, &doc, spec))
        .collect();
    if !cmd.multi {
        let result = results.into_iter().next().expect("one spec");
        match result {
            Ok(value) => {
                let dt = if r.json && cmd.specs[0].op == SubdocOp::Get {
                    Datatype::JSON
                } else {
                    0
                };
                let p = r
                    .packet(Status::Success)
                    .cas(cur.meta.cas.0)
                    .datatype(dt)
                    .value(value.as_deref().unwrap_or_default());
                r.send(p);
            }
            Err(status) => r.error(status, ""),
        }
        return Ok(Next::Continue);
    }
    let mut body = Vec::new();
    let mut all_ok = true;
    for result in &results {
        let (status, value) = match result {
            Ok(v) => (Status::Success, v.as_deref().unwrap_or_default()),
            Err(s) => {
                all_ok = false;
                (*s, &[][..])
            }
        };
        body.extend_from_slice(&status.code().to_be_bytes());
        body.extend_from_slice(&(value.len() as u32).to_be_bytes());
        body.extend_from_slice(value);
    }
    let status = match all_ok {
        true => Status::Success,
        false => Status::SubdocMultiPathFailure,
    };
    let p = r.packet(status).cas(cur.meta.cas.0).value(&body);
    r.send(p);
    Ok(Next::Continue)
}

fn lookup_one(
    handle: &BucketHandle,
    cur: &Current,
    doc: &Result<Document, SubdocError>,
    spec: &SubdocSpec<'_>,
) -> Result<Option<Vec<u8>>, Status> {
    let path = Path::parse(spec.path).map_err(status_of)?;
    if spec.flags.xattr() {
        return xattr_lookup(handle, cur, spec.op, &path);
    }
    if spec.op == SubdocOp::GetDoc {
        return match path.is_root() {
            true => Ok(Some(cur.body.clone())),
            false => Err(Status::SubdocPathEinval),
        };
    }
    let op = lookup_op(spec.op).ok_or(Status::SubdocInvalidCombo)?;
    let doc = doc.as_ref().map_err(|e| status_of(*e))?;
    doc.lookup(op, &path).map_err(status_of)
}

/// A lookup of an xattr path: virtual ones are built from the document's metadata.
fn xattr_lookup(
    handle: &BucketHandle,
    cur: &Current,
    op: SubdocOp,
    path: &Path,
) -> Result<Option<Vec<u8>>, Status> {
    let Some(Component::Key(name)) = path.components().first() else {
        return Err(Status::SubdocPathEinval);
    };
    let lookup = lookup_op(op).ok_or(Status::SubdocXattrInvalidFlagCombo)?;
    let attr = match name.as_str() {
        "$document" => document_vattr(cur),
        "$vbucket" => vbucket_vattr(handle),
        n if n.starts_with('$') => return Err(Status::SubdocXattrUnknownVattr),
        _ => {
            // No stored xattrs can exist yet (nothing writes them), so a user or system
            // xattr is always absent.
            return Err(Status::SubdocPathEnoent);
        }
    };
    let doc = Document::parse(&attr).map_err(status_of)?;
    let rest = Path::of(path.components()[1..].to_vec());
    doc.lookup(lookup, &rest).map_err(status_of)
}

/// `$document`: the metadata Couchbase exposes as a virtual xattr.
fn document_vattr(cur: &Current) -> Vec<u8> {
    let m = &cur.meta;
    let mut datatype = Vec::new();
    if m.datatype.is_json() {
        datatype.push("json");
    }
    if m.datatype.is_xattr() {
        datatype.push("xattr");
    }
    if m.datatype.is_snappy() {
        datatype.push("snappy");
    }
    if datatype.is_empty() {
        datatype.push("raw");
    }
    serde_json::to_vec(&serde_json::json!({
        "CAS": format!("0x{:016x}", m.cas.0),
        "seqno": format!("0x{:016x}", m.seqno.0),
        "revid": m.rev_seqno.to_string(),
        "exptime": m.expiry.0,
        "value_bytes": cur.body.len(),
        "datatype": datatype,
        "deleted": m.deleted,
        "flags": m.flags,
        // The CAS is a hybrid logical clock in nanoseconds.
        "last_modified": (m.cas.0 / 1_000_000_000).to_string(),
    }))
    .expect("a JSON value serialises")
}

/// `$vbucket`: the vbucket's hybrid logical clock.
fn vbucket_vattr(handle: &BucketHandle) -> Vec<u8> {
    let _ = handle;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    serde_json::to_vec(&serde_json::json!({
        "HLC": {"now": now.to_string(), "mode": "real"}
    }))
    .expect("a JSON value serialises")
}

fn mutation(
    handle: &BucketHandle,
    req: &Request<'_>,
    kv: &KvCommand<'_>,
    cmd: &SubdocCommand<'_>,
    d: Option<Durable>,
    r: &mut Responder<'_>,
) -> Result<Next, EngineError> {
    if cmd
        .specs
        .iter()
        .any(|s| s.flags.xattr() || s.flags.expand_macros())
    {
        r.error(
            Status::NotSupported,
            "writing xattrs through sub-document paths is not built yet",
        );
        return Ok(Next::Continue);
    }
    if cmd
        .specs
        .iter()
        .any(|s| s.op == SubdocOp::ReplaceBodyWithXattr)
    {
        r.error(
            Status::NotSupported,
            "replace_body_with_xattr needs xattrs, not built yet",
        );
        return Ok(Next::Continue);
    }
    let deletes_doc = cmd.specs.iter().any(|s| s.op == SubdocOp::DeleteDoc);
    if deletes_doc && cmd.specs.len() > 1 {
        r.error(
            Status::SubdocInvalidCombo,
            "delete_doc is the only body operation of its command",
        );
        return Ok(Next::Continue);
    }
    let bucket = &handle.engine;
    let level = d.map(|d| d.level);
    if deletes_doc {
        return mutate(handle, req.vb, d, r, || {
            bucket
                .delete(req.vb, cmd.key, req.cas, level)
                .map(|m| (m, ()))
        })
        .map(|done| match done {
            None => Next::Continue,
            Some((m, (), wait)) => finish_mutation(req, kv, wait, r, m, &[]),
        });
    }
    for _ in 0..CAS_RETRIES_MAX {
        let cur = match read(handle, req, cmd.key) {
            Ok(cur) => Some(cur),
            Err(EngineError::KeyNotFound) => None,
            Err(e) => return Err(e),
        };
        let creating = cur.is_none();
        match &cur {
            None if !cmd.doc_flags.mkdoc() && !cmd.doc_flags.add() => {
                return Err(EngineError::KeyNotFound)
            }
            Some(_) if cmd.doc_flags.add() => return Err(EngineError::KeyExists),
            None if req.cas.0 != 0 => return Err(EngineError::KeyNotFound),
            _ => {}
        }
        let (body, results) = match apply_all(cur.as_ref(), cmd) {
            Ok(out) => out,
            Err(f) => {
                answer_failure(cmd, f, r);
                return Ok(Next::Continue);
            }
        };
        let mut value = cur
            .as_ref()
            .and_then(|c| c.xattrs.clone())
            .unwrap_or_default();
        let datatype = match value.is_empty() {
            true => Datatype(0),
            false => Datatype(Datatype::XATTR),
        };
        value.extend_from_slice(&body);
        let sr = StoreRequest {
            kind: if creating {
                StoreKind::Add
            } else {
                StoreKind::Replace
            },
            key: cmd.key,
            value: &value,
            flags: cur.as_ref().map_or(0, |c| c.meta.flags),
            expiry_wire: cmd.expiry.unwrap_or(0),
            datatype,
            // The client's CAS is checked by the store itself (it may be a lock's CAS, which
            // the document read does not show); without one, the CAS that was read.
            cas: match req.cas {
                Cas(0) => cur.as_ref().map_or(Cas(0), |c| c.meta.cas),
                given => given,
            },
            preserve_ttl: req.frame_infos.preserve_ttl,
            durability: level,
        };
        let outcome = mutate(handle, req.vb, d, r, || {
            bucket.store(req.vb, &sr).map(|m| (m, ()))
        });
        match outcome {
            // Another writer changed (or created) the document since it was read.
            Err(EngineError::KeyExists) if req.cas.0 == 0 => continue,
            Err(EngineError::KeyNotFound) if req.cas.0 == 0 && !creating => continue,
            Err(e) => return Err(e),
            Ok(None) => return Ok(Next::Continue),
            Ok(Some((m, (), wait))) => {
                let value = encode_results(cmd, &results);
                return Ok(finish_mutation(req, kv, wait, r, m, &value));
            }
        }
    }
    r.error(
        Status::Etmpfail,
        "the document kept changing under the sub-document mutation; retry",
    );
    Ok(Next::Continue)
}

/// The new body, and the values specs returned (counters) with their index.
type Applied = (Vec<u8>, Vec<(usize, Vec<u8>)>);

/// Runs every spec on the body in order; the first failure stops everything.
fn apply_all(cur: Option<&Current>, cmd: &SubdocCommand<'_>) -> Result<Applied, PathFailure> {
    let mut doc: Option<Document> = None;
    let mut results = Vec::new();
    for (index, spec) in cmd.specs.iter().enumerate() {
        let fail = |status| PathFailure { index, status };
        let path = Path::parse(spec.path).map_err(|e| fail(status_of(e)))?;
        if spec.op == SubdocOp::SetDoc {
            if !path.is_root() {
                return Err(fail(Status::SubdocPathEinval));
            }
            doc =
                Some(Document::parse(spec.value).map_err(|_| fail(Status::SubdocValueCantinsert))?);
            continue;
        }
        let op = mutation_op(spec.op).ok_or_else(|| fail(Status::SubdocInvalidCombo))?;
        let d = match doc.as_mut() {
            Some(d) => d,
            None => {
                let fresh = match cur {
                    Some(c) if c.meta.datatype.is_json() => Document::parse(&c.body),
                    Some(_) => Err(SubdocError::DocNotJson),
                    None => Ok(Document::empty_for(op, &path)),
                };
                doc.insert(fresh.map_err(|e| fail(status_of(e)))?)
            }
        };
        let m = Mutation {
            op,
            path: &path,
            value: spec.value,
            mkdir_p: spec.flags.mkdir_p(),
        };
        if let Some(v) = d.apply(&m).map_err(|e| fail(status_of(e)))? {
            results.push((index, v));
        }
    }
    let body = match doc {
        Some(d) => d.into_bytes(),
        None => cur.map(|c| c.body.clone()).unwrap_or_default(),
    };
    Ok((body, results))
}

/// The path lookup a wire operation names (None for whole-document and mutation ops).
fn lookup_op(op: SubdocOp) -> Option<LookupOp> {
    Some(match op {
        SubdocOp::Get => LookupOp::Get,
        SubdocOp::Exists => LookupOp::Exists,
        SubdocOp::GetCount => LookupOp::Count,
        _ => return None,
    })
}

/// The path mutation a wire operation names (None for whole-document and lookup ops).
fn mutation_op(op: SubdocOp) -> Option<MutationOp> {
    Some(match op {
        SubdocOp::DictAdd => MutationOp::DictAdd,
        SubdocOp::DictUpsert => MutationOp::DictUpsert,
        SubdocOp::Delete => MutationOp::Delete,
        SubdocOp::Replace => MutationOp::Replace,
        SubdocOp::ArrayPushLast => MutationOp::ArrayPushLast,
        SubdocOp::ArrayPushFirst => MutationOp::ArrayPushFirst,
        SubdocOp::ArrayInsert => MutationOp::ArrayInsert,
        SubdocOp::ArrayAddUnique => MutationOp::ArrayAddUnique,
        SubdocOp::Counter => MutationOp::Counter,
        _ => return None,
    })
}

/// A failed mutation: the path's status for a single path; SUBDOC_MULTI_PATH_FAILURE with
/// `u8 index, u16 status` for a multi-path command.
fn answer_failure(cmd: &SubdocCommand<'_>, f: PathFailure, r: &mut Responder<'_>) {
    if !cmd.multi {
        r.error(f.status, "");
        return;
    }
    let mut body = vec![f.index as u8];
    body.extend_from_slice(&f.status.code().to_be_bytes());
    let p = r.packet(Status::SubdocMultiPathFailure).value(&body);
    r.send(p);
}

/// What a successful mutation returns: the counter's value for a single path; for a
/// multi-path command, `u8 index, u16 status, u32 length, value` for each spec that
/// returned one.
fn encode_results(cmd: &SubdocCommand<'_>, results: &[(usize, Vec<u8>)]) -> Vec<u8> {
    if !cmd.multi {
        return results.first().map(|(_, v)| v.clone()).unwrap_or_default();
    }
    let mut body = Vec::new();
    for (index, v) in results {
        body.push(*index as u8);
        body.extend_from_slice(&Status::Success.code().to_be_bytes());
        body.extend_from_slice(&(v.len() as u32).to_be_bytes());
        body.extend_from_slice(v);
    }
    body
}

fn status_of(e: SubdocError) -> Status {
    match e {
        SubdocError::PathEnoent => Status::SubdocPathEnoent,
        SubdocError::PathMismatch => Status::SubdocPathMismatch,
        SubdocError::PathEinval => Status::SubdocPathEinval,
        SubdocError::PathE2big => Status::SubdocPathE2big,
        SubdocError::DocE2deep => Status::SubdocDocE2deep,
        SubdocError::ValueCantInsert => Status::SubdocValueCantinsert,
        SubdocError::DocNotJson => Status::SubdocDocNotJson,
        SubdocError::NumErange => Status::SubdocNumErange,
        SubdocError::DeltaEinval => Status::SubdocDeltaEinval,
        SubdocError::PathEexists => Status::SubdocPathEexists,
        SubdocError::ValueEtoodeep => Status::SubdocValueEtoodeep,
    }
}
