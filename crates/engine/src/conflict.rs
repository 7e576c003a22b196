//! Conflict resolution: whether a version made elsewhere (`*_WITH_META`, as XDCR writes
//! it) replaces the one a key holds here. Pure: metadata in, a verdict out.
//!
//! Sluice's buckets resolve by revision, Couchbase's default ("seqno" conflict resolution):
//! the version with more revisions wins; on a tie the larger CAS, then (not for deletions)
//! the later expiry, then the larger flags. Identical metadata keeps what is here, unless
//! only the incoming version has xattrs. Couchbase compares the same fields, in the same
//! order (its `RevisionSeqnoResolution`).

use sluice_types::Cas;

/// What conflict resolution compares of a version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionMeta {
    pub rev_seqno: u64,
    pub cas: Cas,
    /// Absolute Unix seconds (0: none).
    pub expiry: u32,
    pub flags: u32,
    pub xattrs: bool,
}

/// The verdict on an incoming version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    Accept,
    /// The incoming version is older than the one here.
    RejectBehind,
    /// The two are the same version.
    RejectIdentical,
}

/// Revision-based resolution of `incoming` against `existing`; `deletion`: the incoming
/// version is a deletion, which compares revision and CAS only.
pub fn resolve_by_revision(
    existing: &VersionMeta,
    incoming: &VersionMeta,
    deletion: bool,
) -> Resolution {
    use std::cmp::Ordering::*;
    let key = |v: &VersionMeta| match deletion {
        true => (v.rev_seqno, v.cas.0, 0, 0),
        false => (v.rev_seqno, v.cas.0, v.expiry, v.flags),
    };
    match key(incoming).cmp(&key(existing)) {
        Greater => Resolution::Accept,
        Less => Resolution::RejectBehind,
        Equal if !deletion && incoming.xattrs && !existing.xattrs => Resolution::Accept,
        Equal => Resolution::RejectIdentical,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Resolution::*;

    fn v(rev_seqno: u64, cas: u64, expiry: u32, flags: u32, xattrs: bool) -> VersionMeta {
        VersionMeta {
            rev_seqno,
            cas: Cas(cas),
            expiry,
            flags,
            xattrs,
        }
    }

    #[test]
    fn revisions_then_cas_then_expiry_then_flags_decide() {
        let here = v(5, 100, 10, 3, false);
        let rows: &[(&str, VersionMeta, bool, Resolution)] = &[
            ("more revisions", v(6, 1, 0, 0, false), false, Accept),
            (
                "fewer revisions",
                v(4, 999, 99, 9, false),
                false,
                RejectBehind,
            ),
            (
                "same revisions, larger cas",
                v(5, 101, 0, 0, false),
                false,
                Accept,
            ),
            (
                "same revisions, smaller cas",
                v(5, 99, 99, 9, false),
                false,
                RejectBehind,
            ),
            (
                "then the later expiry",
                v(5, 100, 11, 0, false),
                false,
                Accept,
            ),
            (
                "then the earlier expiry",
                v(5, 100, 9, 9, false),
                false,
                RejectBehind,
            ),
            (
                "then the larger flags",
                v(5, 100, 10, 4, false),
                false,
                Accept,
            ),
            (
                "then the smaller flags",
                v(5, 100, 10, 2, false),
                false,
                RejectBehind,
            ),
            ("identical", v(5, 100, 10, 3, false), false, RejectIdentical),
            (
                "identical but with xattrs",
                v(5, 100, 10, 3, true),
                false,
                Accept,
            ),
            (
                "a deletion ignores expiry",
                v(5, 100, 99, 3, false),
                true,
                RejectIdentical,
            ),
            (
                "a deletion ignores flags",
                v(5, 100, 10, 1, false),
                true,
                RejectIdentical,
            ),
            (
                "a deletion with more revisions",
                v(6, 0, 0, 0, false),
                true,
                Accept,
            ),
            (
                "a deletion with a larger cas",
                v(5, 101, 0, 0, false),
                true,
                Accept,
            ),
            (
                "a deletion ignores xattrs",
                v(5, 100, 10, 3, true),
                true,
                RejectIdentical,
            ),
        ];
        for (what, incoming, deletion, want) in rows {
            assert_eq!(
                resolve_by_revision(&here, incoming, *deletion),
                *want,
                "{what}"
            );
        }
    }
}
