//! Document commands: GET (and its quiet and with-key forms), GET_REPLICA, GAT, TOUCH,
//! SET / ADD / REPLACE, DELETE, INCR / DECR, APPEND / PREPEND, GET_META, FLUSH, GET_LOCKED,
//! UNLOCK_KEY, GET_RANDOM_KEY, OBSERVE, and the
//! sub-document commands (validated in `subdoc`).

use super::shape::{be16, be32, be64, check, doc_key, Part, Shape, EMPTY, KEY_ONLY};
use super::subdoc::{self, SubdocCommand};
use super::ValidateCtx;
use crate::frame::Frame;
use crate::opcode::Opcode;
use crate::status::Status;

/// Longest `scope.collection` path COLLECTIONS_GET_ID accepts: two names of at most 251
/// bytes (Couchbase's name limit) and the dot.
pub const COLLECTION_PATH_BYTES_MAX: usize = 251 * 2 + 1;

/// Set, Add or Replace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreOp {
    Set,
    Add,
    Replace,
}

/// SET_WITH_META, ADD_WITH_META or DEL_WITH_META: a version made elsewhere (another
/// cluster's, through XDCR), stored with its own CAS, revision and expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WithMetaOp {
    Set,
    /// Refused (KEY_EEXISTS) when a live document holds the key.
    Add,
    Delete,
}

/// What a `*_WITH_META` request carries about the version it stores (protocol.md §2.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WithMeta {
    pub flags: u32,
    /// Absolute Unix seconds; 0 is none.
    pub expiry: u32,
    pub rev_seqno: u64,
    pub cas: u64,
    pub options: WithMetaOptions,
}

/// Bytes of [`WithMeta::extras`]: flags, expiry, revision, CAS and options.
pub const WITH_META_EXTRAS_BYTES: usize = 28;

impl WithMeta {
    /// The request's extras as a sender writes them, with the options word and no
    /// extended-metadata length (what [`KvCommand::WithMeta`]'s decoder reads back).
    pub fn extras(&self) -> [u8; WITH_META_EXTRAS_BYTES] {
        let mut e = [0u8; WITH_META_EXTRAS_BYTES];
        e[0..4].copy_from_slice(&self.flags.to_be_bytes());
        e[4..8].copy_from_slice(&self.expiry.to_be_bytes());
        e[8..16].copy_from_slice(&self.rev_seqno.to_be_bytes());
        e[16..24].copy_from_slice(&self.cas.to_be_bytes());
        e[24..28].copy_from_slice(&self.options.0.to_be_bytes());
        e
    }
}

impl WithMetaOp {
    /// The (non-quiet) opcode that carries it.
    pub fn opcode(self) -> Opcode {
        match self {
            WithMetaOp::Set => Opcode::SetWithMeta,
            WithMetaOp::Add => Opcode::AddWithMeta,
            WithMetaOp::Delete => Opcode::DelWithMeta,
        }
    }
}

/// The options word of a `*_WITH_META` request (extras of 28 or 30 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WithMetaOptions(pub u32);

impl WithMetaOptions {
    /// The old FORCE_WITH_META_OP: the same as [`Self::SKIP_CONFLICT_RESOLUTION`].
    pub const FORCE_WITH_META_OP: u32 = 0x01;
    /// Required on last-write-wins buckets, refused on revision ones.
    pub const FORCE_ACCEPT_WITH_META_OPS: u32 = 0x02;
    /// A new local CAS instead of the request's (only without conflict resolution).
    pub const REGENERATE_CAS: u32 = 0x04;
    pub const SKIP_CONFLICT_RESOLUTION: u32 = 0x08;
    /// DEL_WITH_META only: the deletion is an expiration.
    pub const IS_EXPIRATION: u32 = 0x10;

    pub fn has(self, bit: u32) -> bool {
        self.0 & bit != 0
    }

    /// Whether the stored version must beat the current one (conflict resolution).
    pub fn check_conflicts(self) -> bool {
        !self.has(Self::SKIP_CONFLICT_RESOLUTION) && !self.has(Self::FORCE_WITH_META_OP)
    }
}

/// A command on the documents of the selected bucket. Every one but FLUSH names a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvCommand<'a> {
    /// GET / GETQ / GETK / GETKQ; the K forms answer with the key.
    Get {
        key: &'a [u8],
        with_key: bool,
    },
    GetReplica {
        key: &'a [u8],
    },
    /// GAT / GATQ (`expiry` as sent on the wire).
    GetAndTouch {
        key: &'a [u8],
        expiry: u32,
    },
    Touch {
        key: &'a [u8],
        expiry: u32,
    },
    /// SET / ADD / REPLACE and their quiet forms (`expiry` as sent on the wire).
    Store {
        op: StoreOp,
        key: &'a [u8],
        value: &'a [u8],
        flags: u32,
        expiry: u32,
    },
    Delete {
        key: &'a [u8],
    },
    /// INCR / DECR: add or subtract `delta`, or create the counter at `initial`.
    Arithmetic {
        increment: bool,
        key: &'a [u8],
        delta: u64,
        initial: u64,
        expiry: u32,
    },
    /// APPEND / PREPEND.
    Concat {
        append: bool,
        key: &'a [u8],
        value: &'a [u8],
    },
    /// GET_META; `want_datatype` (extras version 2) adds the datatype to the answer.
    GetMeta {
        key: &'a [u8],
        want_datatype: bool,
    },
    /// FLUSH: drop every document, after `delay` seconds (0: now).
    Flush {
        delay: u32,
    },
    /// GET_LOCKED: the document, locked for `lock_s` seconds (0: the default).
    GetLocked {
        key: &'a [u8],
        lock_s: u32,
    },
    /// UNLOCK_KEY: releases the lock whose CAS the header carries.
    Unlock {
        key: &'a [u8],
    },
    /// A sub-document lookup or mutation, single- or multi-path.
    Subdoc(SubdocCommand<'a>),
    /// GET_RANDOM_KEY: any live document, with its key; of collection `collection` (4 bytes
    /// of extras, from collection-aware clients), or of the default collection.
    GetRandom {
        collection: Option<u32>,
    },
    /// GET_COLLECTIONS_MANIFEST: the bucket's manifest, as JSON.
    CollectionsManifest,
    /// COLLECTIONS_GET_ID / COLLECTIONS_GET_SCOPE_ID: the id of the collection
    /// (`scope.collection`) or scope (`scope`) the path names. The path is the value, or the
    /// key for older clients; an empty part means `_default`.
    CollectionsGetId {
        path: &'a [u8],
        scope_only: bool,
    },
    /// OBSERVE (legacy): the persistence state and CAS of each (vbucket, key).
    Observe {
        keys: Vec<(u16, &'a [u8])>,
    },
    /// SET / ADD / DEL_WITH_META (and their quiet forms): `value` without any legacy
    /// extended metadata that followed it.
    WithMeta {
        op: WithMetaOp,
        key: &'a [u8],
        value: &'a [u8],
        meta: WithMeta,
    },
}

impl<'a> KvCommand<'a> {
    /// The same command naming `key` instead: the server's collection-qualified key. The
    /// commands that name no key (or many, as OBSERVE) are returned as they are.
    pub fn with_key<'b>(&self, key: &'b [u8]) -> KvCommand<'b>
    where
        'a: 'b,
    {
        let mut c: KvCommand<'b> = self.clone();
        match &mut c {
            KvCommand::Get { key: k, .. }
            | KvCommand::GetReplica { key: k }
            | KvCommand::GetAndTouch { key: k, .. }
            | KvCommand::Touch { key: k, .. }
            | KvCommand::Store { key: k, .. }
            | KvCommand::Delete { key: k }
            | KvCommand::Arithmetic { key: k, .. }
            | KvCommand::Concat { key: k, .. }
            | KvCommand::GetMeta { key: k, .. }
            | KvCommand::GetLocked { key: k, .. }
            | KvCommand::Unlock { key: k }
            | KvCommand::WithMeta { key: k, .. } => *k = key,
            KvCommand::Subdoc(s) => s.key = key,
            KvCommand::Flush { .. }
            | KvCommand::GetRandom { .. }
            | KvCommand::Observe { .. }
            | KvCommand::CollectionsManifest
            | KvCommand::CollectionsGetId { .. } => {}
        }
        c
    }
}

impl KvCommand<'_> {
    /// The expiry a write gives its document, where it may be changed: a store's, a
    /// touch's, a counter's that may create it (not one that must not: `u32::MAX`) and a
    /// sub-document mutation's (set to 0, "none", when absent).
    pub fn expiry_mut(&mut self) -> Option<&mut u32> {
        match self {
            KvCommand::Store { expiry, .. }
            | KvCommand::Touch { expiry, .. }
            | KvCommand::GetAndTouch { expiry, .. } => Some(expiry),
            KvCommand::Arithmetic { expiry, .. } if *expiry != u32::MAX => Some(expiry),
            KvCommand::Subdoc(s) if s.is_mutation() => Some(s.expiry.get_or_insert(0)),
            _ => None,
        }
    }

    /// Commands that change a document (and may carry a durability requirement).
    pub fn is_mutation(&self) -> bool {
        matches!(
            self,
            KvCommand::Store { .. }
                | KvCommand::Delete { .. }
                | KvCommand::Arithmetic { .. }
                | KvCommand::Concat { .. }
                | KvCommand::WithMeta { .. }
        ) || matches!(self, KvCommand::Subdoc(s) if s.is_mutation())
    }

    /// Commands whose value is a document, and so may carry datatype bits (a sub-document
    /// mutation's values are JSON fragments: SDKs mark them JSON).
    pub fn carries_document(&self) -> bool {
        matches!(
            self,
            KvCommand::Store { .. }
                | KvCommand::Concat { .. }
                | KvCommand::Subdoc(_)
                | KvCommand::WithMeta { .. }
        )
    }

    /// The document key; every command but FLUSH names one.
    pub fn key(&self) -> Option<&[u8]> {
        match self {
            KvCommand::Get { key, .. }
            | KvCommand::GetReplica { key }
            | KvCommand::GetAndTouch { key, .. }
            | KvCommand::Touch { key, .. }
            | KvCommand::Store { key, .. }
            | KvCommand::Delete { key }
            | KvCommand::Arithmetic { key, .. }
            | KvCommand::Concat { key, .. }
            | KvCommand::GetMeta { key, .. }
            | KvCommand::GetLocked { key, .. }
            | KvCommand::Unlock { key }
            | KvCommand::WithMeta { key, .. } => Some(key),
            KvCommand::Subdoc(s) => Some(s.key),
            KvCommand::Flush { .. }
            | KvCommand::GetRandom { .. }
            | KvCommand::Observe { .. }
            | KvCommand::CollectionsManifest
            | KvCommand::CollectionsGetId { .. } => None,
        }
    }
}

/// OBSERVE's value: `u16 vbucket, u16 key_len, key` repeated, at least once; each key a
/// valid document key.
fn observe_keys(mut v: &[u8]) -> Result<Vec<(u16, &[u8])>, Status> {
    let mut keys = Vec::new();
    while !v.is_empty() {
        let (head, rest) = v.split_first_chunk::<4>().ok_or(Status::Einval)?;
        let vb = u16::from_be_bytes([head[0], head[1]]);
        let len = usize::from(u16::from_be_bytes([head[2], head[3]]));
        let (key, rest) = rest.split_at_checked(len).ok_or(Status::Einval)?;
        if key.is_empty() || key.len() > sluice_types::limits::KEY_BYTES_MAX {
            return Err(Status::Einval);
        }
        keys.push((vb, key));
        v = rest;
    }
    Ok(keys)
}

/// A `*_WITH_META` request whose extras length was checked (24, 26, 28 or 30): the fixed
/// fields, the options word (28 and 30), and the legacy extended-metadata length (26 and
/// 30), whose bytes end the value and are dropped, as Couchbase drops them. Option
/// combinations Couchbase refuses are EINVAL: REGENERATE_CAS needs conflict resolution
/// skipped, IS_EXPIRATION is a deletion's, and unknown bits are refused.
fn with_meta<'a>(op: Opcode, f: &Frame<'a>) -> Result<KvCommand<'a>, Status> {
    use Opcode::*;
    let e = f.extras;
    let options = match e.len() {
        28 | 30 => WithMetaOptions(be32(e, 24)),
        _ => WithMetaOptions::default(),
    };
    let ext_meta = match e.len() {
        26 => usize::from(be16(e, 24)),
        30 => usize::from(be16(e, 28)),
        _ => 0,
    };
    let value = f
        .value
        .len()
        .checked_sub(ext_meta)
        .and_then(|n| f.value.get(..n))
        .ok_or(Status::Einval)?;
    let wm = WithMetaOptions::FORCE_WITH_META_OP
        | WithMetaOptions::FORCE_ACCEPT_WITH_META_OPS
        | WithMetaOptions::REGENERATE_CAS
        | WithMetaOptions::SKIP_CONFLICT_RESOLUTION
        | WithMetaOptions::IS_EXPIRATION;
    let op = match op {
        SetWithMeta | SetqWithMeta => WithMetaOp::Set,
        AddWithMeta | AddqWithMeta => WithMetaOp::Add,
        _ => WithMetaOp::Delete,
    };
    if options.0 & !wm != 0
        || (options.has(WithMetaOptions::REGENERATE_CAS) && options.check_conflicts())
        || (options.has(WithMetaOptions::IS_EXPIRATION) && op != WithMetaOp::Delete)
    {
        return Err(Status::Einval);
    }
    Ok(KvCommand::WithMeta {
        op,
        key: doc_key(f)?,
        value,
        meta: WithMeta {
            flags: be32(e, 0),
            expiry: be32(e, 4),
            rev_seqno: be64(e, 8),
            cas: be64(e, 16),
            options,
        },
    })
}

/// Validates a document opcode; `Ok(None)` for an opcode of another family.
pub(super) fn validate<'a>(
    op: Opcode,
    f: &Frame<'a>,
    ctx: &ValidateCtx,
) -> Result<Option<KvCommand<'a>>, Status> {
    use Opcode::*;
    if let Some(cmd) = subdoc::validate(op, f, ctx)? {
        return Ok(Some(KvCommand::Subdoc(cmd)));
    }
    let shaped = |shape: Shape| check(f, shape, ctx);
    Ok(Some(match op {
        Get | GetQ | GetK | GetKQ => {
            shaped(KEY_ONLY)?;
            KvCommand::Get {
                key: doc_key(f)?,
                with_key: matches!(op, GetK | GetKQ),
            }
        }
        GetReplica => {
            shaped(KEY_ONLY)?;
            KvCommand::GetReplica { key: doc_key(f)? }
        }
        Gat | GatQ | Touch => {
            shaped(Shape {
                extras: &[4],
                key: Part::Required,
                value: Part::None,
            })?;
            let key = doc_key(f)?;
            let expiry = be32(f.extras, 0);
            if op == Touch {
                KvCommand::Touch { key, expiry }
            } else {
                KvCommand::GetAndTouch { key, expiry }
            }
        }
        Set | SetQ | Add | AddQ | Replace | ReplaceQ => {
            shaped(Shape {
                extras: &[8],
                key: Part::Required,
                value: Part::Optional,
            })?;
            let store_op = match op {
                Set | SetQ => StoreOp::Set,
                Add | AddQ => StoreOp::Add,
                _ => StoreOp::Replace,
            };
            if store_op == StoreOp::Add && f.cas != 0 {
                return Err(Status::Einval);
            }
            KvCommand::Store {
                op: store_op,
                key: doc_key(f)?,
                value: f.value,
                flags: be32(f.extras, 0),
                expiry: be32(f.extras, 4),
            }
        }
        Delete | DeleteQ => {
            shaped(KEY_ONLY)?;
            KvCommand::Delete { key: doc_key(f)? }
        }
        Increment | IncrementQ | Decrement | DecrementQ => {
            shaped(Shape {
                extras: &[20],
                key: Part::Required,
                value: Part::None,
            })?;
            KvCommand::Arithmetic {
                increment: matches!(op, Increment | IncrementQ),
                key: doc_key(f)?,
                delta: be64(f.extras, 0),
                initial: be64(f.extras, 8),
                expiry: be32(f.extras, 16),
            }
        }
        Append | AppendQ | Prepend | PrependQ => {
            shaped(Shape {
                extras: &[0],
                key: Part::Required,
                value: Part::Optional,
            })?;
            KvCommand::Concat {
                append: matches!(op, Append | AppendQ),
                key: doc_key(f)?,
                value: f.value,
            }
        }
        GetLocked => {
            shaped(Shape {
                extras: &[0, 4],
                key: Part::Required,
                value: Part::None,
            })?;
            KvCommand::GetLocked {
                key: doc_key(f)?,
                lock_s: if f.extras.len() == 4 {
                    be32(f.extras, 0)
                } else {
                    0
                },
            }
        }
        Observe => {
            shaped(Shape {
                extras: &[0],
                key: Part::None,
                value: Part::Required,
            })?;
            KvCommand::Observe {
                keys: observe_keys(f.value)?,
            }
        }
        GetRandomKey => {
            shaped(Shape {
                extras: &[0, 4],
                key: Part::None,
                value: Part::None,
            })?;
            KvCommand::GetRandom {
                collection: (f.extras.len() == 4).then(|| be32(f.extras, 0)),
            }
        }
        CollectionsGetManifest => {
            shaped(EMPTY)?;
            KvCommand::CollectionsManifest
        }
        CollectionsGetId | CollectionsGetScopeId => {
            shaped(Shape {
                extras: &[0],
                key: Part::Optional,
                value: Part::Optional,
            })?;
            let path = if f.value.is_empty() { f.key } else { f.value };
            if path.len() > COLLECTION_PATH_BYTES_MAX {
                return Err(Status::Einval);
            }
            KvCommand::CollectionsGetId {
                path,
                scope_only: op == CollectionsGetScopeId,
            }
        }
        UnlockKey => {
            shaped(KEY_ONLY)?;
            if f.cas == 0 {
                return Err(Status::Einval);
            }
            KvCommand::Unlock { key: doc_key(f)? }
        }
        GetMeta | GetqMeta => {
            shaped(Shape {
                extras: &[0, 1],
                key: Part::Required,
                value: Part::None,
            })?;
            KvCommand::GetMeta {
                key: doc_key(f)?,
                want_datatype: f.extras.first() == Some(&0x02),
            }
        }
        SetWithMeta | SetqWithMeta | AddWithMeta | AddqWithMeta | DelWithMeta | DelqWithMeta => {
            shaped(Shape {
                extras: &[24, 26, 28, 30],
                key: Part::Required,
                value: Part::Optional,
            })?;
            with_meta(op, f)?
        }
        Flush | FlushQ => {
            shaped(Shape {
                extras: &[0, 4],
                key: Part::None,
                value: Part::None,
            })?;
            let delay = if f.extras.len() == 4 {
                be32(f.extras, 0)
            } else {
                0
            };
            KvCommand::Flush { delay }
        }
        _ => return Ok(None),
    }))
}
