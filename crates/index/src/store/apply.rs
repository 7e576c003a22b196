//! Applying one vbucket's changes, with the stream position they reach, in one batch.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use fjall::PersistMode;
use sluice_types::VbId;

use super::{keys, lock, IndexStore};
use crate::entry::{entry_of, Doc};
use crate::error::Result;
use crate::position::VbPosition;

/// One document change from the stream, in seqno order.
#[derive(Debug, Clone, Copy)]
pub enum Change<'a> {
    /// A mutation: the document as it now is.
    Upsert(Doc<'a>),
    /// A deletion or an expiration.
    Delete { key: &'a [u8] },
}

impl Change<'_> {
    fn key(&self) -> &[u8] {
        match self {
            Change::Upsert(doc) => doc.key,
            Change::Delete { key } => key,
        }
    }
}

/// What one [`IndexStore::apply`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Applied {
    pub entries_added: u64,
    pub entries_removed: u64,
    /// Documents left out because their values do not fit an entry.
    pub skipped: u64,
}

/// A document's entry before the batch and as the batch leaves it, with its expiry.
struct Net {
    before: Option<Vec<u8>>,
    after: Option<(Vec<u8>, u32)>,
}

/// An entry's stored value: the document's expiry (Unix seconds, big-endian), or nothing
/// for a document that does not expire. A covered scan reads it to leave out a document
/// that expired before the expiry pager deleted it, as a fetch would.
pub(crate) fn entry_value(expiry: u32) -> Vec<u8> {
    match expiry {
        0 => Vec::new(),
        t => t.to_be_bytes().to_vec(),
    }
}

/// The expiry an entry's stored value holds (0: none).
pub(crate) fn stored_expiry(value: &[u8]) -> u32 {
    <[u8; 4]>::try_from(value).map_or(0, u32::from_be_bytes)
}

/// One vbucket's part of an [`IndexStore::apply_many`]: its changes, in seqno order, and
/// the stream position they reach.
#[derive(Debug, Clone)]
pub struct VbChanges<'a> {
    pub vb: VbId,
    pub changes: Vec<Change<'a>>,
    pub to: VbPosition,
}

impl IndexStore {
    /// Applies `changes` of `vb` to index `id` and records `to` as the vbucket's position,
    /// all in one atomic batch.
    pub fn apply(
        &self,
        id: super::IndexId,
        vb: VbId,
        changes: &[Change<'_>],
        to: VbPosition,
    ) -> Result<Applied> {
        let part = VbChanges {
            vb,
            changes: changes.to_vec(),
            to,
        };
        self.apply_many(id, std::slice::from_ref(&part))
    }

    /// Applies several vbuckets' changes to index `id`, each with the position it reaches,
    /// in one atomic batch: one commit for all of them, which is what lets a feeder keep up
    /// with many small snapshots (group commit).
    ///
    /// A document changed several times in one vbucket's changes is written once, as its
    /// last change leaves it: a batch must not remove and insert the same key (its
    /// operations share one sequence number, so which one wins would be undefined). A
    /// vbucket appears at most once in `parts` (asserted).
    pub fn apply_many(&self, id: super::IndexId, parts: &[VbChanges<'_>]) -> Result<Applied> {
        let open = self.index(id)?;
        let def = open.def();
        let _write = lock(&open.write);
        let mut applied = Applied::default();
        let mut batch = self.db.batch();
        let mut seen = std::collections::BTreeSet::new();
        let mut changes = 0u64;
        for part in parts {
            assert!(
                seen.insert(part.vb),
                "vbucket {:?} twice in one apply",
                part.vb
            );
            changes += part.changes.len() as u64;
            let vb = part.vb;
            let mut order: Vec<&[u8]> = Vec::new();
            let mut net: HashMap<&[u8], Net> = HashMap::new();
            for change in &part.changes {
                let key = change.key();
                let after = match change {
                    Change::Upsert(doc) => entry_of(&def, *doc)
                        .unwrap_or_else(|_| {
                            applied.skipped += 1;
                            None
                        })
                        .map(|entry| (entry, doc.meta.expiration)),
                    Change::Delete { .. } => None,
                };
                if let Some(n) = net.get_mut(key) {
                    n.after = after;
                    continue;
                }
                let before = open.back.get(keys::back(vb, key))?.map(|v| v.to_vec());
                order.push(key);
                net.insert(key, Net { before, after });
            }
            for key in order {
                let n = &net[key];
                let back = keys::back(vb, key);
                match (&n.before, &n.after) {
                    (None, None) => {}
                    // The same entry: rewritten only when the expiry it keeps changed.
                    (Some(old), Some((entry, expiry))) if old == entry => {
                        let kept = open.entries.get(old)?.map_or(0, |v| stored_expiry(&v));
                        if kept != *expiry {
                            batch.insert(&open.entries, entry.as_slice(), entry_value(*expiry));
                        }
                    }
                    (before, after) => {
                        if let Some(old) = before {
                            batch.remove(&open.entries, old.as_slice());
                            applied.entries_removed += 1;
                        }
                        match after {
                            Some((entry, expiry)) => {
                                batch.insert(&open.entries, entry.as_slice(), entry_value(*expiry));
                                batch.insert(&open.back, back, entry.as_slice());
                                applied.entries_added += 1;
                            }
                            None => batch.remove(&open.back, back),
                        }
                    }
                }
            }
            batch.insert(&self.meta, keys::position(id, vb), part.to.encode());
        }
        // To the OS, not fsynced: see the module doc of `store`.
        batch.durability(Some(PersistMode::Buffer)).commit()?;
        let mut positions = lock(&open.positions);
        for part in parts {
            positions.insert(part.vb, part.to);
        }
        drop(positions);
        open.counters.changes.fetch_add(changes, Ordering::Relaxed);
        open.counters
            .skipped
            .fetch_add(applied.skipped, Ordering::Relaxed);
        Ok(applied)
    }
}
