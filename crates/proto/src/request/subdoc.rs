//! Sub-document commands: the single-path lookups and mutations (0xc5–0xcf, 0xd2, 0xd3) and
//! the multi-path ones (0xd0 lookup, 0xd1 mutation).
//!
//! Single path: extras `u16 path_len, u8 path_flags` then, as the extras length says,
//! `u32 expiry` and `u32 user_flags` (mutations) and `u8 doc_flags`: 3, 4 (doc flags),
//! 7 (expiry), 8 (expiry, doc flags), 11 (expiry, user flags), 12 (all three). The value is
//! the path followed by the operation's value.
//!
//! Multi-path lookup: extras empty or `u8 doc_flags`; the value is a list of
//! `u8 opcode, u8 path_flags, u16 path_len, path`.
//!
//! Multi-path mutation: extras `[u32 expiry [u32 user_flags]] [u8 doc_flags]` (0, 1, 4, 5,
//! 8 or 9 bytes); the value is a list of `u8 opcode, u8 path_flags, u16 path_len,
//! u32 value_len, path, value`, its xattr paths first (SUBDOC_INVALID_XATTR_ORDER).
//!
//! Document flags that only make sense together are checked here, as Couchbase checks
//! them: revive needs access-deleted and excludes create-as-deleted; a single-path
//! create-as-deleted needs mkdoc or add and an xattr path; replica read is for lookups. REPLACE_BODY_WITH_XATTR names
//! an xattr path and carries no value.
//!
//! Within a multi-path command the whole-document operations use the plain opcodes: GET
//! (0x00) as a lookup, SET (0x01) and DELETE (0x04) as mutations. At most
//! [`SUBDOC_SPECS_MAX`] specs, lookups and mutations not mixed (SUBDOC_INVALID_COMBO).

use super::shape::{be16, be32, byte, check, doc_key, Part, Shape};
use super::ValidateCtx;
use crate::frame::Frame;
use crate::opcode::Opcode;
use crate::status::Status;

/// The most paths one multi-path command may carry (Couchbase's limit).
pub const SUBDOC_SPECS_MAX: usize = 16;

/// A sub-document operation, as one spec of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubdocOp {
    Get,
    Exists,
    GetCount,
    /// The whole document body (multi-path lookup only, empty path).
    GetDoc,
    DictAdd,
    DictUpsert,
    Delete,
    Replace,
    ArrayPushLast,
    ArrayPushFirst,
    ArrayInsert,
    ArrayAddUnique,
    Counter,
    /// Set the whole document body (multi-path mutation only, empty path).
    SetDoc,
    /// Delete the whole document (multi-path mutation only, empty path).
    DeleteDoc,
    /// Replace the body with the value of an xattr.
    ReplaceBodyWithXattr,
}

impl SubdocOp {
    /// The operation an opcode byte names, as a spec of a multi-path command.
    pub fn from_spec_byte(b: u8) -> Option<SubdocOp> {
        use SubdocOp::*;
        Some(match b {
            0x00 => GetDoc,
            0x01 => SetDoc,
            0x04 => DeleteDoc,
            0xc5 => Get,
            0xc6 => Exists,
            0xc7 => DictAdd,
            0xc8 => DictUpsert,
            0xc9 => Delete,
            0xca => Replace,
            0xcb => ArrayPushLast,
            0xcc => ArrayPushFirst,
            0xcd => ArrayInsert,
            0xce => ArrayAddUnique,
            0xcf => Counter,
            0xd2 => GetCount,
            0xd3 => ReplaceBodyWithXattr,
            _ => return None,
        })
    }

    pub fn is_lookup(self) -> bool {
        matches!(
            self,
            SubdocOp::Get | SubdocOp::Exists | SubdocOp::GetCount | SubdocOp::GetDoc
        )
    }

    /// Operations that take a value after the path.
    fn takes_value(self) -> bool {
        !self.is_lookup()
            && !matches!(
                self,
                SubdocOp::Delete | SubdocOp::DeleteDoc | SubdocOp::ReplaceBodyWithXattr
            )
    }
}

/// Path flags (per spec).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PathFlags(pub u8);

impl PathFlags {
    pub const MKDIR_P: u8 = 0x01;
    pub const XATTR: u8 = 0x04;
    pub const EXPAND_MACROS: u8 = 0x10;
    const KNOWN: u8 = Self::MKDIR_P | Self::XATTR | Self::EXPAND_MACROS;

    pub fn mkdir_p(self) -> bool {
        self.0 & Self::MKDIR_P != 0
    }
    pub fn xattr(self) -> bool {
        self.0 & Self::XATTR != 0
    }
    pub fn expand_macros(self) -> bool {
        self.0 & Self::EXPAND_MACROS != 0
    }
}

/// Document flags (per command).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DocFlags(pub u8);

impl DocFlags {
    /// Create the document if it does not exist.
    pub const MKDOC: u8 = 0x01;
    /// Create the document; fail if it exists.
    pub const ADD: u8 = 0x02;
    /// Operate on a deleted document (a tombstone's xattrs).
    pub const ACCESS_DELETED: u8 = 0x04;
    /// Create the document as a tombstone.
    pub const CREATE_AS_DELETED: u8 = 0x08;
    /// Bring a tombstone back to life.
    pub const REVIVE: u8 = 0x10;
    /// Read from a replica.
    pub const REPLICA_READ: u8 = 0x20;
    const KNOWN: u8 = 0x3f;

    pub fn mkdoc(self) -> bool {
        self.0 & Self::MKDOC != 0
    }
    pub fn add(self) -> bool {
        self.0 & Self::ADD != 0
    }
    pub fn has(self, flag: u8) -> bool {
        self.0 & flag != 0
    }
}

/// One path of a sub-document command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubdocSpec<'a> {
    pub op: SubdocOp,
    pub flags: PathFlags,
    pub path: &'a [u8],
    /// Empty for lookups and deletes.
    pub value: &'a [u8],
}

/// A sub-document command: its specs, all lookups or all mutations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubdocCommand<'a> {
    pub key: &'a [u8],
    pub doc_flags: DocFlags,
    /// For mutations, as sent (0, relative seconds, or absolute time); None when absent.
    pub expiry: Option<u32>,
    /// For mutations, the document's user flags when the command sets them; None keeps
    /// the document's (or 0 for a new one).
    pub user_flags: Option<u32>,
    pub specs: Vec<SubdocSpec<'a>>,
    /// Sent as a multi-path command (its answer has the multi-path layout).
    pub multi: bool,
}

impl SubdocCommand<'_> {
    pub fn is_mutation(&self) -> bool {
        self.specs.first().is_some_and(|s| !s.op.is_lookup())
    }
}

/// Validates a sub-document opcode; `Ok(None)` for an opcode of another family.
pub(super) fn validate<'a>(
    op: Opcode,
    f: &Frame<'a>,
    ctx: &ValidateCtx,
) -> Result<Option<SubdocCommand<'a>>, Status> {
    let cmd = match op {
        Opcode::SubdocMultiLookup => multi(f, ctx, true)?,
        Opcode::SubdocMultiMutation => multi(f, ctx, false)?,
        _ => match SubdocOp::from_spec_byte(op.byte()) {
            Some(sop) if op.byte() >= 0xc5 => single(f, ctx, sop)?,
            _ => return Ok(None),
        },
    };
    Ok(Some(cmd))
}

fn single<'a>(f: &Frame<'a>, ctx: &ValidateCtx, op: SubdocOp) -> Result<SubdocCommand<'a>, Status> {
    let lookup = op.is_lookup();
    check(
        f,
        Shape {
            extras: if lookup {
                &[3, 4]
            } else {
                &[3, 4, 7, 8, 11, 12]
            },
            key: Part::Required,
            value: Part::Optional,
        },
        ctx,
    )?;
    let e = f.extras;
    let path_len = usize::from(be16(e, 0));
    let flags = path_flags(byte(e, 2))?;
    let (expiry, user_flags) = match e.len() {
        7 | 8 => (Some(be32(e, 3)), None),
        11 | 12 => (Some(be32(e, 3)), Some(be32(e, 7))),
        _ => (None, None),
    };
    let doc_flags = match e.len() {
        4 | 8 | 12 => doc_flags_of(byte(e, e.len() - 1))?,
        _ => DocFlags(0),
    };
    let (path, value) = f.value.split_at_checked(path_len).ok_or(Status::Einval)?;
    check_spec(op, flags, value)?;
    if doc_flags.has(DocFlags::CREATE_AS_DELETED)
        && (!(doc_flags.mkdoc() || doc_flags.add()) || !flags.xattr())
    {
        return Err(Status::Einval);
    }
    check_replica_read(doc_flags, lookup)?;
    Ok(SubdocCommand {
        key: doc_key(f)?,
        doc_flags,
        expiry,
        user_flags,
        specs: vec![SubdocSpec {
            op,
            flags,
            path,
            value,
        }],
        multi: false,
    })
}

fn multi<'a>(f: &Frame<'a>, ctx: &ValidateCtx, lookup: bool) -> Result<SubdocCommand<'a>, Status> {
    check(
        f,
        Shape {
            extras: if lookup { &[0, 1] } else { &[0, 1, 4, 5, 8, 9] },
            key: Part::Required,
            value: Part::Required,
        },
        ctx,
    )?;
    let e = f.extras;
    let (expiry, user_flags) = match e.len() {
        4 | 5 => (Some(be32(e, 0)), None),
        8 | 9 => (Some(be32(e, 0)), Some(be32(e, 4))),
        _ => (None, None),
    };
    let doc_flags = match e.len() {
        1 | 5 | 9 => doc_flags_of(byte(e, e.len() - 1))?,
        _ => DocFlags(0),
    };
    check_replica_read(doc_flags, lookup)?;
    let mut specs: Vec<SubdocSpec<'a>> = Vec::new();
    let mut rest = f.value;
    while !rest.is_empty() {
        if specs.len() == SUBDOC_SPECS_MAX {
            return Err(Status::SubdocInvalidCombo);
        }
        let (head, after) = rest
            .split_at_checked(if lookup { 4 } else { 8 })
            .ok_or(Status::Einval)?;
        let op = SubdocOp::from_spec_byte(byte(head, 0)).ok_or(Status::UnknownCommand)?;
        if op.is_lookup() != lookup {
            return Err(Status::SubdocInvalidCombo);
        }
        let flags = path_flags(byte(head, 1))?;
        let path_len = usize::from(be16(head, 2));
        let value_len = if lookup { 0 } else { be32(head, 4) as usize };
        let (path, after) = after.split_at_checked(path_len).ok_or(Status::Einval)?;
        let (value, after) = after.split_at_checked(value_len).ok_or(Status::Einval)?;
        check_spec(op, flags, value)?;
        if flags.xattr() && specs.last().is_some_and(|s| !s.flags.xattr()) {
            return Err(Status::SubdocInvalidXattrOrder);
        }
        specs.push(SubdocSpec {
            op,
            flags,
            path,
            value,
        });
        rest = after;
    }
    Ok(SubdocCommand {
        key: doc_key(f)?,
        doc_flags,
        expiry,
        user_flags,
        specs,
        multi: true,
    })
}

fn path_flags(b: u8) -> Result<PathFlags, Status> {
    match b & !PathFlags::KNOWN {
        0 => Ok(PathFlags(b)),
        _ => Err(Status::Einval),
    }
}

/// Only a lookup reads from a replica.
fn check_replica_read(flags: DocFlags, lookup: bool) -> Result<(), Status> {
    match flags.has(DocFlags::REPLICA_READ) && !lookup {
        true => Err(Status::Einval),
        false => Ok(()),
    }
}

/// A spec's value and flags fit its operation.
fn check_spec(op: SubdocOp, flags: PathFlags, value: &[u8]) -> Result<(), Status> {
    let misplaced = !op.takes_value() && !value.is_empty();
    let body_from_nowhere = op == SubdocOp::ReplaceBodyWithXattr && !flags.xattr();
    match misplaced || body_from_nowhere {
        true => Err(Status::Einval),
        false => Ok(()),
    }
}

/// MKDOC and ADD together make no sense (create-or-update vs create-only), nor does
/// reviving without access to deleted documents, or reviving what is being created deleted.
fn doc_flags_of(b: u8) -> Result<DocFlags, Status> {
    let flags = DocFlags(b);
    let revive = flags.has(DocFlags::REVIVE);
    if b & !DocFlags::KNOWN != 0
        || (flags.mkdoc() && flags.add())
        || (revive && !flags.has(DocFlags::ACCESS_DELETED))
        || (revive && flags.has(DocFlags::CREATE_AS_DELETED))
    {
        return Err(Status::Einval);
    }
    Ok(flags)
}
