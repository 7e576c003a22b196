//! What readers see of a vbucket: GET (in place), reads of tombstones, GET_META and OBSERVE,
//! GET_LOCKED / UNLOCK_KEY and GET_RANDOM_KEY. A locked document shows its CAS as
//! `LOCKED_CAS` to every reader ([`crate::locks`]).

use super::{OpCtx, VbInner};
use crate::error::EngineError;
use crate::hash_table::StoredValue;
use crate::item::Document;
use bytes::Bytes;
use sluice_types::collection::collection_of;
use sluice_types::{Cas, CollectionId, ItemMeta, Seqno, VbState};

impl VbInner {
    /// Shows the live document to `f` in place, under the vbucket's lock, so that a reader
    /// which only copies the value out (a GET answer) never touches its reference count.
    pub fn read<R>(
        &mut self,
        key: &[u8],
        ctx: &OpCtx,
        f: impl FnOnce(&ItemMeta, &Bytes) -> R,
    ) -> Result<R, EngineError> {
        self.require_active()?;
        self.require_readable(key)?;
        let keys_evicted = self.keys_evicted;
        match self.ht.get_mut(key) {
            None if keys_evicted => Err(EngineError::NeedsFetch),
            None => Err(EngineError::KeyNotFound),
            Some(sv) if sv.meta.deleted => Err(EngineError::KeyNotFound),
            Some(sv) if !sv.meta.expiry.is_expired(ctx.now_unix_s) => {
                let value = sv.value.as_ref().ok_or(EngineError::NeedsFetch)?;
                sv.referenced = true;
                match self.locks.seen(key, &sv.meta, ctx.now_unix_s) {
                    Some(shown) => Ok(f(&shown, value)),
                    None => Ok(f(&sv.meta, value)),
                }
            }
            Some(_) => {
                self.expire(key, ctx);
                Err(EngineError::KeyNotFound)
            }
        }
    }

    /// The key's current version, live or deleted (a sub-document lookup with
    /// access-deleted reads a tombstone's xattrs). None when memory holds nothing of the key
    /// and every key is in memory (nothing on disk either); `NeedsFetch` when the version
    /// may be on disk only, or its value is.
    pub fn read_any(&mut self, key: &[u8], ctx: &OpCtx) -> Result<Option<Document>, EngineError> {
        self.require_active()?;
        self.require_readable(key)?;
        if self.current_meta(key, ctx)?.is_none() {
            return Ok(None);
        }
        let sv = self.ht.get(key).expect("current_meta found it");
        // A tombstone with xattrs keeps them in its value: read it back rather than show
        // an empty one.
        let value = match (&sv.value, sv.meta.deleted) {
            (Some(v), _) => v.clone(),
            (None, true) if !sv.meta.datatype.is_xattr() => Bytes::new(),
            (None, _) => return Err(EngineError::NeedsFetch),
        };
        let meta = self
            .locks
            .seen(key, &sv.meta, ctx.now_unix_s)
            .unwrap_or(sv.meta);
        Ok(Some(Document { meta, value }))
    }

    /// OBSERVE: the key's current version in memory, tombstones included, on an active or a
    /// replica vbucket (what a client checking replication asks a replica).
    pub fn observe_meta(&self, key: &[u8]) -> Result<Option<ItemMeta>, EngineError> {
        if !matches!(self.state, VbState::Active | VbState::Replica) {
            return Err(EngineError::NotMyVbucket);
        }
        Ok(self.ht.get(key).map(|sv| sv.meta))
    }

    /// Metadata of the key's current version, tombstones included, if it is in memory.
    pub fn get_meta(&mut self, key: &[u8], ctx: &OpCtx) -> Result<Option<ItemMeta>, EngineError> {
        self.require_active()?;
        self.require_readable(key)?;
        if self.keys_evicted && self.ht.get(key).is_none() {
            return Ok(None); // the bucket reads the disk
        }
        self.live_meta(key, ctx)?;
        Ok(self
            .ht
            .get(key)
            .filter(|sv| sv.meta.seqno != Seqno::ZERO)
            .map(|sv| sv.meta))
    }

    /// GET_LOCKED: the document, locked for `seconds` under a new CAS (which the returned
    /// metadata carries); LOCKED if it is locked already.
    pub fn get_locked(
        &mut self,
        key: &[u8],
        seconds: u32,
        ctx: &OpCtx,
    ) -> Result<Document, EngineError> {
        self.require_active()?;
        self.require_readable(key)?;
        if self.keys_evicted && self.ht.get(key).is_none() {
            return Err(EngineError::NeedsFetch);
        }
        let (meta, value) = self.live_value(key, ctx)?.ok_or(EngineError::KeyNotFound)?;
        let cas = self.hlc.next(ctx.now_unix_ns, ctx.cas_salt);
        self.locks.lock(key, cas, ctx.now_unix_s, seconds)?;
        Ok(Document {
            meta: ItemMeta { cas, ..meta },
            value,
        })
    }

    /// UNLOCK_KEY with the lock's CAS.
    pub fn unlock(&mut self, key: &[u8], cas: Cas, ctx: &OpCtx) -> Result<(), EngineError> {
        self.require_active()?;
        if self.keys_evicted && self.ht.get(key).is_none() {
            return Err(EngineError::NeedsFetch);
        }
        self.live_meta(key, ctx)?.ok_or(EngineError::KeyNotFound)?;
        self.locks.unlock(key, cas, ctx.now_unix_s)
    }

    /// A live document whose value is in memory, from about `pick` (any number) of the way
    /// through the hash table: GET_RANDOM_KEY. None when the vbucket is not active or holds
    /// no such document.
    pub fn random_resident(
        &self,
        pick: u64,
        collection: CollectionId,
        ctx: &OpCtx,
    ) -> Option<(Bytes, Document)> {
        if self.state != VbState::Active || self.num_items == 0 {
            return None;
        }
        let len = self.ht.len();
        let skip = (pick % len as u64) as usize;
        let live = |k: &[u8], sv: &StoredValue| {
            !sv.meta.deleted
                && sv.value.is_some()
                && !sv.meta.expiry.is_expired(ctx.now_unix_s)
                && collection_of(k) == collection
        };
        let after = self.ht.iter().skip(skip).find(|(k, sv)| live(k, sv));
        let found = after.or_else(|| self.ht.iter().take(skip).find(|(k, sv)| live(k, sv)));
        found.map(|(k, sv)| {
            let meta = self
                .locks
                .seen(k, &sv.meta, ctx.now_unix_s)
                .unwrap_or(sv.meta);
            let value = sv.value.clone().expect("filtered on a resident value");
            (Bytes::copy_from_slice(k), Document { meta, value })
        })
    }
}
