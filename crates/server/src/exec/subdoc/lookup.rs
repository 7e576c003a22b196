//! Sub-document lookups: body paths, stored xattrs and the virtual xattrs `$document`,
//! `$vbucket` and `$XTOC`; with the access-deleted flag, of a deleted document too (its
//! system xattrs; answered SUBDOC_SUCCESS_DELETED). A multi-path lookup answers every path (`u16 status, u32 len,
//! value` each) and is SUBDOC_MULTI_PATH_FAILURE as a whole when any path failed.

use super::{lookup_op, read, status_of, Current, ReadFrom};
use crate::bucket_handle::BucketHandle;
use crate::exec::{Next, Responder};
use sluice_engine::EngineError;
use sluice_proto::request::{Request, SubdocCommand, SubdocOp, SubdocSpec};
use sluice_proto::Status;
use sluice_subdoc::{Component, Document, LookupOp, Path, SubdocError};
use sluice_types::Datatype;

pub(super) fn execute(
    handle: &BucketHandle,
    req: &Request<'_>,
    cmd: &SubdocCommand<'_>,
    r: &mut Responder<'_>,
) -> Result<Next, EngineError> {
    let cur = read(handle, req, cmd.key, ReadFrom::of(cmd.doc_flags))?;
    let deleted = cur.meta.deleted;
    // Parsed once, for every body path of the command.
    // The JSON bit means the engine parsed the body when it was stored.
    let doc = match cur.meta.datatype.is_json() {
        true => Document::from_valid_json(&cur.body),
        false => Err(SubdocError::DocNotJson),
    };
    let results: Vec<Result<Option<Vec<u8>>, Status>> =
        cmd.specs.iter().map(|spec| one(&cur, &doc, spec)).collect();
    if !cmd.multi {
        let (spec, result) = cmd.specs.iter().zip(results).next().expect("one spec");
        match result {
            Ok(value) => {
                let dt = match r.json && spec.op == SubdocOp::Get {
                    true => Datatype::JSON,
                    false => 0,
                };
                let status = match deleted {
                    true => Status::SubdocSuccessDeleted,
                    false => Status::Success,
                };
                let p = r
                    .packet(status)
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
    let status = match (all_ok, deleted) {
        (true, false) => Status::Success,
        (false, false) => Status::SubdocMultiPathFailure,
        (true, true) => Status::SubdocSuccessDeleted,
        (false, true) => Status::SubdocMultiPathFailureDeleted,
    };
    let p = r.packet(status).cas(cur.meta.cas.0).value(&body);
    r.send(p);
    Ok(Next::Continue)
}

fn one(
    cur: &Current,
    doc: &Result<Document, SubdocError>,
    spec: &SubdocSpec<'_>,
) -> Result<Option<Vec<u8>>, Status> {
    let path = Path::parse(spec.path).map_err(status_of)?;
    if spec.flags.xattr() {
        return xattr(cur, spec.op, &path);
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

/// A lookup of an xattr path: the first component names the xattr.
fn xattr(cur: &Current, op: SubdocOp, path: &Path) -> Result<Option<Vec<u8>>, Status> {
    let Some(Component::Key(name)) = path.components().first() else {
        return Err(Status::SubdocPathEinval);
    };
    let lookup = lookup_op(op).ok_or(Status::SubdocXattrInvalidFlagCombo)?;
    let (doc, rest) = match name.as_str() {
        "$document" => (document_vattr(cur), &path.components()[1..]),
        "$vbucket" => (vbucket_vattr(), &path.components()[1..]),
        "$XTOC" => (xtoc(cur)?, &path.components()[1..]),
        n if n.starts_with('$') => return Err(Status::SubdocXattrUnknownVattr),
        // Stored xattrs: the whole path, on the xattrs as one object.
        _ => (cur.xattrs()?.to_document(), path.components()),
    };
    doc.lookup(lookup, &Path::of(rest.to_vec()))
        .map_err(status_of)
}

/// The value a `"${$document…}"` macro expands to: that field of the `$document` virtual
/// xattr (the whole object for `${$document}`) as the document stood before the mutation;
/// nothing for a document being created. Transactions save a document's CAS, expiry and
/// revision this way before they stage a change to it.
pub(super) fn document_macro(cur: Option<&Current>, value: &[u8]) -> Result<Vec<u8>, Status> {
    let inner = value
        .trim_ascii()
        .strip_prefix(b"\"${")
        .and_then(|v| v.strip_suffix(b"}\""))
        .ok_or(Status::SubdocXattrUnknownMacro)?;
    if !inner.starts_with(b"$") {
        return Err(Status::SubdocXattrUnknownMacro);
    }
    let path = Path::parse(inner).map_err(|_| Status::SubdocXattrUnknownVattrMacro)?;
    let (Some(Component::Key(name)), rest) = (path.components().first(), &path.components()[1..])
    else {
        return Err(Status::SubdocXattrUnknownVattrMacro);
    };
    if name != "$document" {
        return Err(Status::SubdocXattrUnknownVattrMacro);
    }
    let fresh = Current::empty();
    document_vattr(cur.unwrap_or(&fresh))
        .lookup(LookupOp::Get, &Path::of(rest.to_vec()))
        .map_err(|_| Status::SubdocXattrUnknownVattrMacro)?
        .ok_or(Status::SubdocXattrUnknownVattrMacro)
}

/// `$document`: the metadata Couchbase exposes as a virtual xattr.
pub(super) fn document_vattr(cur: &Current) -> Document {
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
    let text = serde_json::to_vec(&serde_json::json!({
        "CAS": format!("0x{:016x}", m.cas.0),
        "seqno": format!("0x{:016x}", m.seqno.0),
        "revid": m.rev_seqno.to_string(),
        "exptime": m.expiry.0,
        "value_bytes": cur.body.len(),
        "value_crc32c": format!("0x{:08x}", sluice_subdoc::crc32c(&cur.body)),
        "datatype": datatype,
        "deleted": m.deleted,
        "flags": m.flags,
        // The CAS is a hybrid logical clock in nanoseconds.
        "last_modified": (m.cas.0 / 1_000_000_000).to_string(),
    }))
    .expect("a JSON value serialises");
    Document::parse(&text).expect("built as JSON")
}

/// `$vbucket`: the vbucket's hybrid logical clock, in seconds.
fn vbucket_vattr() -> Document {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let text = serde_json::to_vec(&serde_json::json!({
        "HLC": {"now": now.to_string(), "mode": "real"}
    }))
    .expect("a JSON value serialises");
    Document::parse(&text).expect("built as JSON")
}

/// `$XTOC`: the keys of the document's xattrs.
fn xtoc(cur: &Current) -> Result<Document, Status> {
    let keys: Vec<String> = cur.xattrs()?.keys().map(str::to_string).collect();
    let text = serde_json::to_vec(&keys).expect("strings serialise");
    Document::parse(&text).map_err(status_of)
}
