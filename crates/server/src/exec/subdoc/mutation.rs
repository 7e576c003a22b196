//! Sub-document mutations: apply every spec in order to the body or the xattrs, then store
//! the result under the CAS that was read. A spec that fails stops everything and nothing
//! is stored; when another writer got in between and the client gave no CAS, read again
//! and retry, as Couchbase does.
//!
//! Deleted documents (what transactions stage inserts in):
//! - with access-deleted, the current version may be a tombstone; a mutation of it leaves a
//!   tombstone (its xattrs change, it keeps no body: SUBDOC_DELETED_DOCUMENT_CANT_HAVE_VALUE)
//!   and answers SUBDOC_SUCCESS_DELETED;
//! - with create-as-deleted, a document that does not exist is created as such a tombstone;
//! - with revive, the tombstone becomes a live document again (SUBDOC_CAN_ONLY_REVIVE_
//!   DELETED_DOCUMENTS if it is live);
//! - REPLACE_BODY_WITH_XATTR sets the body to an xattr's value, as the xattrs stand at that
//!   spec (a commit copies the staged body out before it removes the staging xattr).
//!
//! Macros (`${Mutation.CAS}`, `${Mutation.seqno}`, `${Mutation.value_crc32c}`) go in as
//! placeholders of their final length; the checksum is filled in here once the body is
//! final, the CAS and seqno by the engine as it writes (`StoreRequest::macros`).

use super::lookup::{document_macro, document_vattr};
use super::{mutation_op, read, status_of, Current, ReadFrom};
use crate::bucket_handle::BucketHandle;
use crate::exec::kv::{finish_mutation, finish_mutation_as, mutate, Durable};
use crate::exec::{Next, Responder};
use sluice_engine::{EngineError, MacroField, MacroSlot, StoreKind, StoreRequest};
use sluice_proto::request::{DocFlags, KvCommand, Request, SubdocCommand, SubdocOp};
use sluice_proto::Status;
use sluice_subdoc::{
    xattr, Component, Document, LookupOp, Macro, Mutation, Path, Placeholders, SubdocError, Xattrs,
};
use sluice_types::{Cas, Datatype};

/// How many times a mutation without a client CAS re-reads after losing a race.
const CAS_RETRIES_MAX: usize = 100;

/// The most bytes a document's xattrs may take (Couchbase's limit).
const XATTR_BYTES_MAX: usize = 1 << 20;

/// A path that failed: which spec, and the status it gets.
struct PathFailure {
    index: usize,
    status: Status,
}

/// What the specs made: the new xattr section and body, the values specs returned
/// (counters) with their index, and the macros placed.
struct Applied {
    section: Vec<u8>,
    body: Vec<u8>,
    results: Vec<(usize, Vec<u8>)>,
    macros: Option<Placeholders>,
}

pub(super) fn execute(
    handle: &BucketHandle,
    req: &Request<'_>,
    kv: &KvCommand<'_>,
    cmd: &SubdocCommand<'_>,
    d: Option<Durable>,
    r: &mut Responder<'_>,
) -> Result<Next, EngineError> {
    let deletes_doc = cmd.specs.iter().any(|s| s.op == SubdocOp::DeleteDoc);
    if deletes_doc && cmd.specs.len() > 1 {
        r.error(
            Status::SubdocInvalidCombo,
            "delete_doc is the only operation of its command",
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
    let access_deleted = cmd.doc_flags.has(DocFlags::ACCESS_DELETED);
    let create_as_deleted = cmd.doc_flags.has(DocFlags::CREATE_AS_DELETED);
    let revive = cmd.doc_flags.has(DocFlags::REVIVE);
    for _ in 0..CAS_RETRIES_MAX {
        let from = match access_deleted {
            true => ReadFrom::LiveOrDeleted,
            false => ReadFrom::Live,
        };
        let cur = match read(handle, req, cmd.key, from) {
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
            Some(c) if revive && !c.meta.deleted => {
                r.error(
                    Status::SubdocCanOnlyReviveDeletedDocuments,
                    "revive applies to a deleted document; this one is live",
                );
                return Ok(Next::Continue);
            }
            _ => {}
        }
        // What the specs start from: the current version, or for a document created as
        // deleted an empty tombstone (no body, so body paths find no JSON).
        let base = match (&cur, create_as_deleted) {
            (None, true) => Some(Current::empty_tombstone()),
            _ => None,
        };
        let start = cur.as_ref().or(base.as_ref());
        let stays_deleted = start.is_some_and(|c| c.meta.deleted) && !revive;
        let applied = match apply_all(start, cmd) {
            Ok(a) => a,
            Err(f) => {
                answer_failure(cmd, f, r);
                return Ok(Next::Continue);
            }
        };
        if applied.section.len() > XATTR_BYTES_MAX {
            r.error(Status::E2big, "the document's xattrs would pass 1 MiB");
            return Ok(Next::Continue);
        }
        if stays_deleted && !applied.body.is_empty() {
            r.error(
                Status::SubdocDeletedDocumentCantHaveValue,
                "a deleted document keeps only xattrs; revive it to give it a body",
            );
            return Ok(Next::Continue);
        }
        let datatype = match applied.section.is_empty() {
            true => Datatype(0),
            false => Datatype(Datatype::XATTR),
        };
        let mut value = applied.section;
        let section_len = value.len();
        value.extend_from_slice(&applied.body);
        let slots = fill_macros(&mut value, section_len, applied.macros.as_ref());
        let sr = StoreRequest {
            kind: match creating {
                true => StoreKind::Add,
                false => StoreKind::Replace,
            },
            key: cmd.key,
            value: &value,
            flags: cmd
                .user_flags
                .unwrap_or_else(|| cur.as_ref().map_or(0, |c| c.meta.flags)),
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
            macros: &slots,
            access_deleted,
            store_deleted: stays_deleted,
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
                let value = encode_results(cmd, &applied.results);
                let status = match stays_deleted {
                    true => Status::SubdocSuccessDeleted,
                    false => Status::Success,
                };
                return Ok(finish_mutation_as(status, req, kv, wait, r, m, &value));
            }
        }
    }
    r.error(
        Status::Etmpfail,
        "the document kept changing under the sub-document mutation; retry",
    );
    Ok(Next::Continue)
}

/// The body as the specs leave it.
enum Body {
    /// No spec touched it: the stored one.
    Stored,
    Json(Document),
    /// Set whole to bytes that are not JSON: no path works in it.
    Raw(Vec<u8>),
}

/// Runs every spec in order; the first failure stops everything.
fn apply_all(cur: Option<&Current>, cmd: &SubdocCommand<'_>) -> Result<Applied, PathFailure> {
    let mut body = Body::Stored;
    let mut xattrs: Option<Document> = None;
    let mut macros: Option<Placeholders> = None;
    let mut results = Vec::new();
    for (index, spec) in cmd.specs.iter().enumerate() {
        let fail = |status| PathFailure { index, status };
        let path = Path::parse(spec.path).map_err(|e| fail(status_of(e)))?;
        if spec.flags.expand_macros() && !spec.flags.xattr() {
            return Err(fail(Status::SubdocXattrInvalidFlagCombo));
        }
        if spec.op == SubdocOp::SetDoc {
            if !path.is_root() || spec.flags.xattr() {
                return Err(fail(Status::SubdocPathEinval));
            }
            // Any bytes will do, as in Couchbase (transactions set a single NUL byte); the
            // engine decides whether they are JSON.
            body = match Document::parse(spec.value) {
                Ok(doc) => Body::Json(doc),
                Err(_) => Body::Raw(spec.value.to_vec()),
            };
            continue;
        }
        if spec.op == SubdocOp::ReplaceBodyWithXattr {
            check_xattr_key(&path).map_err(fail)?;
            let x = xattrs_of(&mut xattrs, cur).map_err(fail)?;
            let v = x
                .lookup(LookupOp::Get, &path)
                .map_err(|e| fail(status_of(e)))?
                .unwrap_or_default();
            // An xattr's value is JSON already; only its depth is checked again.
            body = Body::Json(Document::from_valid_json(&v).map_err(|e| fail(status_of(e)))?);
            continue;
        }
        let op = mutation_op(spec.op).ok_or_else(|| fail(Status::SubdocInvalidCombo))?;
        let target = match spec.flags.xattr() {
            true => {
                check_xattr_key(&path).map_err(fail)?;
                xattrs_of(&mut xattrs, cur).map_err(fail)?
            }
            false => {
                if let Body::Stored = body {
                    let fresh = match cur {
                        // The JSON bit means the engine parsed it when it was stored.
                        Some(c) if c.meta.datatype.is_json() => Document::from_valid_json(&c.body),
                        Some(_) => Err(SubdocError::DocNotJson),
                        None => Ok(Document::empty_for(op, &path)),
                    };
                    body = Body::Json(fresh.map_err(|e| fail(status_of(e)))?);
                }
                match &mut body {
                    Body::Json(doc) => doc,
                    _ => return Err(fail(Status::SubdocDocNotJson)),
                }
            }
        };
        let placeholder;
        let value = match (spec.flags.expand_macros(), Macro::parse(spec.value)) {
            (true, Some(m)) => {
                let p = macros.get_or_insert_with(|| placeholders_for(cur, cmd));
                placeholder = p.text(m);
                &placeholder[..]
            }
            (true, None) => {
                placeholder = document_macro(cur, spec.value).map_err(fail)?;
                &placeholder[..]
            }
            (false, _) => spec.value,
        };
        let m = Mutation {
            op,
            path: &path,
            value,
            // Mkdoc and add imply mkdir_p, as in Couchbase: a document being created has
            // no parents yet.
            mkdir_p: spec.flags.mkdir_p() || cmd.doc_flags.mkdoc() || cmd.doc_flags.add(),
        };
        if let Some(v) = target.apply(&m).map_err(|e| fail(status_of(e)))? {
            results.push((index, v));
        }
    }
    let section = match (&xattrs, cur) {
        (Some(x), _) => Xattrs::from_document(x)
            .map_err(|_| PathFailure {
                index: 0,
                status: Status::XattrEinval,
            })?
            .encode(),
        (None, Some(c)) => c.section.clone(),
        (None, None) => Vec::new(),
    };
    let body = match (body, cur) {
        (Body::Json(doc), _) => doc.into_bytes(),
        (Body::Raw(bytes), _) => bytes,
        (Body::Stored, Some(c)) => c.body.clone(),
        // A new document whose command only wrote xattrs: an empty JSON object.
        (Body::Stored, None) => b"{}".to_vec(),
    };
    Ok(Applied {
        section,
        body,
        results,
        macros,
    })
}

/// The xattrs as one JSON document, decoded from the stored section on first use.
fn xattrs_of<'x>(
    xattrs: &'x mut Option<Document>,
    cur: Option<&Current>,
) -> Result<&'x mut Document, Status> {
    match xattrs {
        Some(x) => Ok(x),
        None => {
            let stored = cur.map_or(Ok(Xattrs::default()), Current::xattrs)?;
            Ok(xattrs.insert(stored.to_document()))
        }
    }
}

/// An xattr path names a storable key first: not a virtual one (`$…`), within the key rules.
fn check_xattr_key(path: &Path) -> Result<(), Status> {
    match path.components().first() {
        Some(Component::Key(k)) if k.starts_with('$') => Err(Status::SubdocXattrCantModifyVattr),
        Some(Component::Key(k)) if xattr::valid_key(k) => Ok(()),
        Some(Component::Key(_)) => Err(Status::XattrEinval),
        _ => Err(Status::SubdocPathEinval),
    }
}

/// Placeholders found nowhere in what the command writes or keeps (the `$document` fields
/// included: `${$document…}` macros write them).
fn placeholders_for(cur: Option<&Current>, cmd: &SubdocCommand<'_>) -> Placeholders {
    let mut texts: Vec<&[u8]> = cmd.specs.iter().map(|s| s.value).collect();
    let vattr;
    if let Some(c) = cur {
        texts.push(&c.section);
        texts.push(&c.body);
        vattr = document_vattr(c);
        texts.push(vattr.as_bytes());
    }
    Placeholders::unused_in(&texts)
}

/// Fills the checksum macro into the xattr section (`value[..section_len]`) now that the
/// body is final, and returns where the engine fills in the CAS and seqno.
fn fill_macros(value: &mut [u8], section_len: usize, p: Option<&Placeholders>) -> Vec<MacroSlot> {
    let Some(p) = p else {
        return Vec::new();
    };
    let (section, body) = value.split_at_mut(section_len);
    let crc = format!("{:08x}", sluice_subdoc::crc32c(body));
    for at in p.find(Macro::ValueCrc32c, section) {
        section[at..at + crc.len()].copy_from_slice(crc.as_bytes());
    }
    let mut slots = Vec::new();
    for (m, field) in [
        (Macro::Cas, MacroField::Cas),
        (Macro::Seqno, MacroField::Seqno),
    ] {
        slots.extend(
            p.find(m, section)
                .into_iter()
                .map(|at| MacroSlot { at, field }),
        );
    }
    slots
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
