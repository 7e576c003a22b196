//! Sub-document commands: read the document, run each path through `sluice_subdoc`, and
//! answer in the single- or multi-path layout. Lookups are in `lookup` (with the virtual
//! xattrs), mutations in `mutation` (the store under the CAS that was read, xattrs and
//! macros).
//!
//! A path with the xattr flag works on the document's xattrs as one JSON object whose keys
//! are the xattr keys (`sluice_subdoc::Xattrs`); body paths work on the body. Every body
//! mutation keeps the xattrs as they were.

mod lookup;
mod mutation;

use super::kv::Durable;
use super::{Next, Responder};
use crate::bucket_handle::BucketHandle;
use sluice_engine::EngineError;
use sluice_proto::request::{DocFlags, KvCommand, Request, SubdocCommand, SubdocOp};
use sluice_proto::Status;
use sluice_subdoc::{LookupOp, MutationOp, SubdocError, Xattrs};
use sluice_types::ItemMeta;

/// A stored document split into its parts.
struct Current {
    meta: ItemMeta,
    /// The xattr section as stored (length prefix included); empty without xattrs.
    section: Vec<u8>,
    body: Vec<u8>,
}

impl Current {
    /// No document: zero metadata, no xattrs, no body.
    fn empty() -> Current {
        Current {
            meta: ItemMeta::default(),
            section: Vec::new(),
            body: Vec::new(),
        }
    }

    /// What a document created as deleted starts from: a tombstone with nothing in it.
    fn empty_tombstone() -> Current {
        let mut c = Current::empty();
        c.meta.deleted = true;
        c
    }

    /// The xattrs, decoded. A stored section always decodes: every writer validates it.
    fn xattrs(&self) -> Result<Xattrs, Status> {
        if self.section.is_empty() {
            return Ok(Xattrs::default());
        }
        Xattrs::decode(&self.section).map_err(|_| Status::Einternal)
    }
}

pub fn execute(
    handle: &BucketHandle,
    req: &Request<'_>,
    kv: &KvCommand<'_>,
    cmd: &SubdocCommand<'_>,
    d: Option<Durable>,
    r: &mut Responder<'_>,
) -> Result<Next, EngineError> {
    if cmd.is_mutation() {
        mutation::execute(handle, req, kv, cmd, d, r)
    } else {
        lookup::execute(handle, req, cmd, r)
    }
}

/// Which version of a document a command reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReadFrom {
    /// The live document of the active vbucket.
    Live,
    /// The current version of the active vbucket, even a tombstone (access-deleted).
    LiveOrDeleted,
    /// The live document of a replica vbucket here (replica read, lookups only).
    Replica,
    /// A replica vbucket's current version, even a tombstone (replica read with
    /// access-deleted).
    ReplicaOrDeleted,
}

impl ReadFrom {
    fn of(flags: DocFlags) -> ReadFrom {
        match (
            flags.has(DocFlags::REPLICA_READ),
            flags.has(DocFlags::ACCESS_DELETED),
        ) {
            (true, true) => ReadFrom::ReplicaOrDeleted,
            (true, false) => ReadFrom::Replica,
            (false, true) => ReadFrom::LiveOrDeleted,
            (false, false) => ReadFrom::Live,
        }
    }
}

/// The document as `from` says, inflated and split at its xattr section.
fn read(
    handle: &BucketHandle,
    req: &Request<'_>,
    key: &[u8],
    from: ReadFrom,
) -> Result<Current, EngineError> {
    let (meta, stored) = match from {
        ReadFrom::LiveOrDeleted => {
            let doc = handle.engine.read_with_deleted(req.vb, key)?;
            (doc.meta, doc.value)
        }
        ReadFrom::Replica => {
            let doc = handle.engine.get_replica(req.vb, key)?;
            (doc.meta, doc.value)
        }
        ReadFrom::ReplicaOrDeleted => {
            let doc = handle.engine.get_replica_with_deleted(req.vb, key)?;
            (doc.meta, doc.value)
        }
        ReadFrom::Live => handle
            .engine
            .read(req.vb, key, |meta, value| (*meta, value.clone()))?,
    };
    let mut body = match meta.datatype.is_snappy() {
        true => sluice_engine::inflate(&stored)?,
        false => stored.to_vec(),
    };
    let section = match meta.datatype.is_xattr() {
        true => {
            let end = sluice_subdoc::xattr::body_offset(&body)
                .map_err(|_| EngineError::Invalid("stored xattr section is malformed"))?;
            body.drain(..end).collect()
        }
        false => Vec::new(),
    };
    Ok(Current {
        meta,
        section,
        body,
    })
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
