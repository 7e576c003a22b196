//! Conflict resolution: whether a version made elsewhere (`*_WITH_META`, as XDCR writes
//! it) replaces the one a key holds here. Pure: metadata in, a verdict out.
//!
//! A bucket resolves one way for its whole life (`ConflictResolution`, Couchbase's
//! `conflictResolutionType`):
//! - by revision (`seqno`, the default): the version with more revisions wins; on a tie the
//!   larger CAS, then (not for deletions) the later expiry, then the larger flags;
//! - last write wins (`lww`): the larger CAS (the writer's hybrid logical clock) wins; on a
//!   tie more revisions, then (not for deletions) the later expiry, then the larger flags.
//!
//! Identical metadata keeps what is here, unless only the incoming version has xattrs.
//! Couchbase compares the same fields, in the same orders (its `RevisionSeqnoResolution`
//! and `LastWriteWinsResolution`), so two clusters that exchange versions both ways settle
//! on the same one.

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

/// How a bucket resolves conflicts, fixed when it is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConflictResolution {
    /// Revision count first (Couchbase's `seqno`).
    #[default]
    Revision,
    /// CAS first (Couchbase's `lww`).
    LastWriteWins,
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

/// `mode`'s resolution of `incoming` against `existing`; `deletion`: the incoming version
/// is a deletion, which compares revision and CAS only.
pub fn resolve(
    mode: ConflictResolution,
    existing: &VersionMeta,
    incoming: &VersionMeta,
    deletion: bool,
) -> Resolution {
    use std::cmp::Ordering::*;
    let key = |v: &VersionMeta| {
        let (first, second) = match mode {
            ConflictResolution::Revision => (v.rev_seqno, v.cas.0),
            ConflictResolution::LastWriteWins => (v.cas.0, v.rev_seqno),
        };
        match deletion {
            true => (first, second, 0, 0),
            false => (first, second, v.expiry, v.flags),
        }
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

    type Row = (&'static str, VersionMeta, bool, Resolution);

    /// What is here in every table.
    fn here() -> VersionMeta {
        v(5, 100, 10, 3, false)
    }

    /// Versions with the same revisions and CAS as [`here`]: both modes then compare the
    /// same way.
    fn tie_breaks() -> Vec<Row> {
        vec![
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
                "a deletion ignores both",
                v(5, 100, 99, 9, false),
                true,
                RejectIdentical,
            ),
            (
                "a deletion ignores xattrs",
                v(5, 100, 10, 3, true),
                true,
                RejectIdentical,
            ),
        ]
    }

    fn check(mode: ConflictResolution, rows: &[Row]) {
        for (what, incoming, deletion, want) in rows.iter().chain(&tie_breaks()) {
            assert_eq!(
                resolve(mode, &here(), incoming, *deletion),
                *want,
                "{mode:?}: {what}"
            );
        }
    }

    #[test]
    fn revisions_then_cas_then_expiry_then_flags_decide() {
        check(
            ConflictResolution::Revision,
            &[
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
            ],
        );
    }

    #[test]
    fn last_write_wins_puts_cas_before_revisions_then_the_same_tie_breaks() {
        let lww = ConflictResolution::LastWriteWins;
        check(
            lww,
            &[
                (
                    "a larger cas, fewer revisions",
                    v(1, 101, 0, 0, false),
                    false,
                    Accept,
                ),
                (
                    "a smaller cas, more revisions",
                    v(99, 99, 99, 9, false),
                    false,
                    RejectBehind,
                ),
                (
                    "same cas, more revisions",
                    v(6, 100, 0, 0, false),
                    false,
                    Accept,
                ),
                (
                    "same cas, fewer revisions",
                    v(4, 100, 99, 9, false),
                    false,
                    RejectBehind,
                ),
                (
                    "a deletion with a larger cas",
                    v(1, 101, 0, 0, false),
                    true,
                    Accept,
                ),
                (
                    "a deletion with a smaller cas",
                    v(9, 99, 0, 0, false),
                    true,
                    RejectBehind,
                ),
                (
                    "a deletion, same cas, more revisions",
                    v(6, 100, 0, 0, false),
                    true,
                    Accept,
                ),
            ],
        );
        // The two modes disagree exactly when revisions and CAS point different ways.
        let older_more_revised = v(9, 50, 0, 0, false);
        let rev = ConflictResolution::Revision;
        assert_eq!(resolve(rev, &here(), &older_more_revised, false), Accept);
        assert_eq!(
            resolve(lww, &here(), &older_more_revised, false),
            RejectBehind
        );
    }

    #[test]
    fn both_sides_of_a_conflict_keep_the_same_version() {
        // Two clusters each hold their own version and receive the other's: each mode
        // keeps one winner on both sides, whatever the order of arrival.
        let a = v(3, 700, 0, 1, false);
        let b = v(4, 600, 0, 2, false);
        for mode in [
            ConflictResolution::Revision,
            ConflictResolution::LastWriteWins,
        ] {
            let on_a = resolve(mode, &a, &b, false) == Accept;
            let on_b = resolve(mode, &b, &a, false) == Accept;
            assert_ne!(
                on_a, on_b,
                "{mode:?}: exactly one side takes the other's version"
            );
        }
    }
}
