//! `*_WITH_META` writes: a version made elsewhere is stored with its own CAS, revision, flags
//! and expiry when it beats the key's current version by revision (`crate::conflict`). The
//! current version may be a tombstone, and may be on disk only: then `NeedsFetch`, and the
//! caller reads it back and asks again, so that a deleted key's history is never ignored.
//!
//! The new version gets this vbucket's next seqno (it is a change here like any other, and
//! streams as one); local CAS values stay above its CAS (`write` moves the clock past it).
//! `Bucket::store_with_meta` is the entry point: value checks, then this vbucket's write.

use super::{NewVersion, OpCtx, VbInner};
use crate::checkpoint::QueueOp;
use crate::conflict::{resolve, ConflictResolution, Resolution, VersionMeta};
use crate::error::EngineError;
use crate::item::{Mutation, WithMetaKind, WithMetaRequest};
use bytes::Bytes;
use sluice_types::{Cas, Datatype, Expiry, ItemMeta, VbId};

impl VbInner {
    /// The key's version as stored (live, past its expiry, or a tombstone), without expiring
    /// it: what a version made elsewhere is resolved against, as Couchbase's with-meta
    /// writes do. Expiring it first would give the key a tombstone of this cluster's own,
    /// with a later CAS, which the replicated expiration of the same document then loses to:
    /// the two clusters would keep different tombstones. `NeedsFetch` when memory holds
    /// nothing of the key but the disk may.
    fn stored_meta(&self, key: &[u8]) -> Result<Option<ItemMeta>, EngineError> {
        match self.ht.get(key) {
            None if self.keys_evicted || self.tombstones_only_on_disk => {
                Err(EngineError::NeedsFetch)
            }
            None => Ok(None),
            // The placeholder a disk read that found nothing leaves.
            Some(sv) if sv.meta.seqno == sluice_types::Seqno::ZERO => Ok(None),
            Some(sv) => Ok(Some(sv.meta)),
        }
    }

    /// `datatype` is what [`crate::datatype::classify`] decided for the value.
    pub fn store_with_meta(
        &mut self,
        req: &WithMetaRequest<'_>,
        datatype: Datatype,
        mode: ConflictResolution,
        ctx: &OpCtx,
    ) -> Result<Mutation, EngineError> {
        self.require_active()?;
        self.require_not_pending(req.key)?;
        let current = self.stored_meta(req.key)?;
        let live = current.filter(|m| !m.deleted && !m.expiry.is_expired(ctx.now_unix_s));
        if live.is_some() {
            self.locks.admit(req.key, req.cas_check, ctx.now_unix_s)?;
        }
        match current {
            None if req.cas_check != Cas::ZERO => return Err(EngineError::KeyNotFound),
            Some(m) if req.cas_check != Cas::ZERO && m.cas != req.cas_check => {
                return Err(EngineError::KeyExists)
            }
            _ => {}
        }
        if req.kind == WithMetaKind::Add && live.is_some() {
            return Err(EngineError::KeyExists);
        }
        let deletion = matches!(req.kind, WithMetaKind::Delete | WithMetaKind::Expire);
        if let (true, Some(here)) = (req.check_conflicts, current) {
            let incoming = VersionMeta {
                rev_seqno: req.rev_seqno,
                cas: req.cas,
                expiry: req.expiry,
                flags: req.flags,
                xattrs: datatype.is_xattr(),
            };
            if resolve(mode, &version_of(&here), &incoming, deletion) != Resolution::Accept {
                return Err(EngineError::KeyExists);
            }
        }
        let cas = match req.regenerate_cas {
            true => None,
            false => Some(req.cas),
        };
        // A tombstone's expiry says how it came to be (`tombstone_op`): none for a deletion,
        // set for an expiration.
        let (expiry, op) = match req.kind {
            WithMetaKind::Set | WithMetaKind::Add => (Expiry(req.expiry), QueueOp::Mutation),
            WithMetaKind::Delete => (Expiry::NEVER, QueueOp::Deletion),
            WithMetaKind::Expire => (Expiry(req.expiry.max(1)), QueueOp::Expiration),
        };
        Ok(self.write(
            req.key,
            NewVersion {
                flags: req.flags,
                expiry,
                datatype,
                value: Bytes::copy_from_slice(req.value),
                deleted: deletion,
                op,
                cas,
                rev_seqno: Some(req.rev_seqno),
            },
            ctx,
        ))
    }
}

impl crate::bucket::Bucket {
    /// SET / ADD / DEL_WITH_META: a version made elsewhere, stored if it wins conflict
    /// resolution (`KeyExists` if it loses). A deletion's value holds xattrs only.
    pub fn store_with_meta(
        &self,
        vb: VbId,
        req: &WithMetaRequest<'_>,
    ) -> Result<Mutation, EngineError> {
        crate::stats::BucketStats::bump(&self.stats.cmd_set);
        let dt = crate::datatype::classify(req.value, req.datatype, self.config.value_bytes_max)?;
        let deletion = matches!(req.kind, WithMetaKind::Delete | WithMetaKind::Expire);
        if deletion && !req.value.is_empty() {
            // What a tombstone keeps is its xattrs: a body would be a document.
            let inflated;
            let plain = match dt.is_snappy() {
                true => {
                    inflated = crate::datatype::inflate(req.value)?;
                    &inflated[..]
                }
                false => req.value,
            };
            if !crate::datatype::split_xattrs(dt, plain).1.is_empty() {
                return Err(EngineError::Invalid(
                    "a deletion's value holds xattrs only (datatype XATTR, empty body)",
                ));
            }
        }
        let mode = self.config.conflict_resolution;
        self.mutate(vb, req.key.len() + req.value.len(), |inner, ctx| {
            inner.store_with_meta(req, dt, mode, ctx)
        })
    }
}

fn version_of(m: &ItemMeta) -> VersionMeta {
    VersionMeta {
        rev_seqno: m.rev_seqno,
        cas: m.cas,
        // A tombstone has no expiry to compare (its field tells deletions from expirations).
        expiry: if m.deleted { 0 } else { m.expiry.0 },
        flags: m.flags,
        xattrs: m.datatype.is_xattr(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{ctx, set, vb};
    use super::*;
    use crate::item::StoreKind;
    use sluice_types::Seqno;

    fn wm(kind: WithMetaKind, rev_seqno: u64, cas: u64) -> WithMetaRequest<'static> {
        WithMetaRequest {
            kind,
            key: b"k",
            value: b"remote",
            datatype: Datatype::RAW,
            flags: 9,
            expiry: 0,
            rev_seqno,
            cas: Cas(cas),
            cas_check: Cas::ZERO,
            check_conflicts: true,
            regenerate_cas: false,
        }
    }

    /// `req` stored as a bucket resolving by revision stores it.
    fn store(
        v: &mut VbInner,
        req: &WithMetaRequest<'_>,
        c: &OpCtx,
    ) -> Result<Mutation, EngineError> {
        v.store_with_meta(req, Datatype::RAW, ConflictResolution::Revision, c)
    }

    fn meta(v: &mut VbInner) -> ItemMeta {
        v.ht.get(b"k").expect("an entry").meta
    }

    #[test]
    fn a_new_key_takes_the_version_as_sent_and_the_next_seqno() {
        let mut v = vb();
        let c = ctx(1000);
        let m = store(&mut v, &wm(WithMetaKind::Set, 40, 1 << 60), &c).unwrap();
        assert_eq!((m.seqno, m.cas), (Seqno(1), Cas(1 << 60)));
        let got = meta(&mut v);
        assert_eq!((got.rev_seqno, got.cas, got.flags), (40, Cas(1 << 60), 9));
        // A local write after it gets a larger CAS and the next revision.
        let local = v
            .store(&set(b"k", b"local", StoreKind::Set, 0), Datatype::RAW, &c)
            .unwrap();
        assert!(
            local.cas > Cas(1 << 60),
            "the clock moved past the remote CAS"
        );
        assert_eq!(meta(&mut v).rev_seqno, 41);
    }

    #[test]
    fn the_version_with_more_revisions_wins_and_the_loser_is_key_exists() {
        let mut v = vb();
        let c = ctx(1000);
        store(&mut v, &wm(WithMetaKind::Set, 10, 500), &c).unwrap();
        let behind = store(&mut v, &wm(WithMetaKind::Set, 9, 900), &c);
        assert_eq!(behind.unwrap_err(), EngineError::KeyExists);
        let same = store(&mut v, &wm(WithMetaKind::Set, 10, 500), &c);
        assert_eq!(same.unwrap_err(), EngineError::KeyExists, "identical");
        store(&mut v, &wm(WithMetaKind::Set, 10, 501), &c).unwrap();
        // Without conflict resolution anything goes, under a new CAS if asked.
        let forced = WithMetaRequest {
            check_conflicts: false,
            regenerate_cas: true,
            ..wm(WithMetaKind::Set, 1, 1)
        };
        let m = store(&mut v, &forced, &c).unwrap();
        assert!(m.cas > Cas(501));
        assert_eq!(meta(&mut v).rev_seqno, 1);
    }

    #[test]
    fn deletions_resolve_against_tombstones_and_add_only_beats_no_live_document() {
        let mut v = vb();
        let c = ctx(1000);
        store(&mut v, &wm(WithMetaKind::Set, 3, 300), &c).unwrap();
        let add = store(&mut v, &wm(WithMetaKind::Add, 9, 900), &c);
        assert_eq!(add.unwrap_err(), EngineError::KeyExists, "a live document");
        let del = WithMetaRequest {
            value: b"",
            ..wm(WithMetaKind::Delete, 4, 400)
        };
        store(&mut v, &del, &c).unwrap();
        let t = meta(&mut v);
        assert!(t.deleted && t.rev_seqno == 4 && t.expiry == Expiry::NEVER);
        assert_eq!(v.num_items, 0);
        // The tombstone still takes part: an older version does not bring the key back.
        let stale = store(&mut v, &wm(WithMetaKind::Add, 3, 999), &c);
        assert_eq!(stale.unwrap_err(), EngineError::KeyExists);
        store(&mut v, &wm(WithMetaKind::Add, 5, 1), &c).unwrap();
        assert_eq!(v.num_items, 1);
        let expire = WithMetaRequest {
            value: b"",
            ..wm(WithMetaKind::Expire, 6, 1)
        };
        store(&mut v, &expire, &c).unwrap();
        assert_eq!(
            super::super::tombstone_op(&meta(&mut v)),
            QueueOp::Expiration
        );
    }

    #[test]
    fn a_version_past_its_expiry_is_resolved_against_not_expired_first() {
        let mut v = vb();
        let c = ctx(1000);
        let expiring = WithMetaRequest {
            expiry: 1500,
            ..wm(WithMetaKind::Set, 1, 100)
        };
        store(&mut v, &expiring, &c).unwrap();
        // Past its expiry, the source's expiration arrives: it replaces the stored version
        // as sent (its CAS, its revision), and is the only change here.
        let later = ctx(2000);
        let expire = WithMetaRequest {
            value: b"",
            expiry: 1500,
            ..wm(WithMetaKind::Expire, 2, 200)
        };
        let m = store(&mut v, &expire, &later).unwrap();
        assert_eq!((m.seqno, m.cas), (Seqno(2), Cas(200)));
        let t = meta(&mut v);
        assert!(t.deleted && t.rev_seqno == 2 && t.cas == Cas(200));
        assert_eq!(
            v.high_seqno,
            Seqno(2),
            "no expiration of this vbucket's own"
        );
        // An expired document is not live: ADD_WITH_META may replace it.
        let mut w = vb();
        store(&mut w, &expiring, &c).unwrap();
        store(&mut w, &wm(WithMetaKind::Add, 3, 300), &later).unwrap();
        assert_eq!(meta(&mut w).rev_seqno, 3);
        // A version that loses to the expired one is refused, and the key stays as it was.
        let mut x = vb();
        store(&mut x, &expiring, &c).unwrap();
        let stale = store(&mut x, &wm(WithMetaKind::Set, 0, 50), &later);
        assert_eq!(stale.unwrap_err(), EngineError::KeyExists);
        assert_eq!(x.high_seqno, Seqno(1));
    }

    #[test]
    fn a_cas_check_needs_the_current_version() {
        let mut v = vb();
        let c = ctx(1000);
        let checked = WithMetaRequest {
            cas_check: Cas(77),
            ..wm(WithMetaKind::Set, 1, 1)
        };
        let none = store(&mut v, &checked, &c);
        assert_eq!(none.unwrap_err(), EngineError::KeyNotFound);
        store(&mut v, &wm(WithMetaKind::Set, 1, 1), &c).unwrap();
        let wrong = store(&mut v, &checked, &c);
        assert_eq!(wrong.unwrap_err(), EngineError::KeyExists);
        let right = WithMetaRequest {
            cas_check: Cas(1),
            ..wm(WithMetaKind::Set, 2, 2)
        };
        store(&mut v, &right, &c).unwrap();
    }
}
