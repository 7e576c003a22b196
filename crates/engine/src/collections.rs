//! Collections as the engine sees them: which ones are live, how many documents each holds,
//! and removing what a dropped collection left behind.
//!
//! Keys are collection-qualified (`sluice_types::collection`), so the engine needs no
//! collection structure of its own: a collection is the set of keys with its prefix. The
//! bucket's manifest lives in the cluster metadata; the node hands the engine the part it
//! needs ([`LiveCollections`]) whenever the manifest changes.
//!
//! A dropped collection's documents are removed in the background (the pager's sweep):
//! 1. the new live set is recorded; from then on the flusher skips queued changes of dropped
//!    collections, so nothing of theirs reaches the disk any more;
//! 2. every vbucket's hash table loses their entries (under its lock, one vbucket at a time);
//! 3. with the flusher's round lock held (a round in flight has committed), the disk is
//!    searched by key prefix and what is found is removed by the flusher's next commit.
//!
//! Ids are never reused, so nothing can be written to a dropped collection again, except
//! through races the sweep also covers: a write admitted just before the drop reached this
//! node, or a replica applying a change its active made before it learned of the drop. Such
//! stray documents show up in the per-collection counts, and the pager sweeps again.

use sluice_types::collection::collection_of;
use sluice_types::CollectionId;
use std::collections::BTreeMap;

/// First id handed to a collection that is not `_default`; those below are reserved.
const FIRST_USER_ID: u32 = 8;

/// A live collection, as the manifest describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectionEntry {
    pub scope: u32,
    pub name: String,
    /// 0: none.
    pub max_ttl_s: u32,
}

/// Which scopes and collections exist, as far as this node knows: the live ones, and the
/// next ids the manifest will hand out. An id below that which is not live was dropped;
/// one at or above it may belong to a collection created elsewhere that this node has not
/// heard of yet, whose changes (arriving by replication) must be kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveCollections {
    manifest_uid: u64,
    scopes: BTreeMap<u32, String>,
    live: BTreeMap<CollectionId, CollectionEntry>,
    next_id: u32,
    next_scope_id: u32,
}

impl LiveCollections {
    /// The manifest `manifest_uid`: its scopes (id, name), its collections and its next
    /// collection and scope ids.
    pub fn with_entries(
        manifest_uid: u64,
        scopes: impl IntoIterator<Item = (u32, String)>,
        live: impl IntoIterator<Item = (CollectionId, CollectionEntry)>,
        next_id: u32,
        next_scope_id: u32,
    ) -> LiveCollections {
        LiveCollections {
            manifest_uid,
            scopes: scopes.into_iter().collect(),
            live: live.into_iter().collect(),
            next_id,
            next_scope_id,
        }
    }

    pub fn manifest_uid(&self) -> u64 {
        self.manifest_uid
    }

    /// The live scopes: (id, name).
    pub fn scopes(&self) -> impl Iterator<Item = (u32, &str)> + '_ {
        self.scopes.iter().map(|(id, n)| (*id, n.as_str()))
    }

    /// The live collections.
    pub fn entries(&self) -> impl Iterator<Item = (CollectionId, &CollectionEntry)> + '_ {
        self.live.iter().map(|(id, e)| (*id, e))
    }

    /// Whether `cid` was dropped: handed out once and not live now. The default collection
    /// and the reserved ids never are.
    pub fn is_dropped(&self, cid: CollectionId) -> bool {
        cid.0 >= FIRST_USER_ID && cid.0 < self.next_id && !self.live.contains_key(&cid)
    }

    /// Whether the change to `key` belongs to a dropped collection.
    pub fn drops_key(&self, key: &[u8]) -> bool {
        // The default collection's prefix is one zero byte: the common case costs a compare.
        key.first() != Some(&0) && self.is_dropped(collection_of(key))
    }

    /// Every dropped collection id, in order.
    pub fn dropped(&self) -> impl Iterator<Item = CollectionId> + '_ {
        (FIRST_USER_ID..self.next_id)
            .map(CollectionId)
            .filter(|c| !self.live.contains_key(c))
    }

    /// Every dropped scope id, in order.
    pub fn dropped_scopes(&self) -> impl Iterator<Item = u32> + '_ {
        (FIRST_USER_ID..self.next_scope_id).filter(|s| !self.scopes.contains_key(s))
    }

    /// Whether any collection was ever dropped (otherwise there is nothing to sweep).
    pub fn any_dropped(&self) -> bool {
        self.dropped().next().is_some()
    }
}

/// Live documents per collection in one vbucket, for the collections other than
/// `_default` (whose count is the vbucket's total minus these), so the default
/// collection's writes pay one byte compare for it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CollectionCounts {
    items: BTreeMap<CollectionId, u64>,
}

impl CollectionCounts {
    /// A live document of `key` appeared (`+1`) or went (`-1`).
    pub fn add(&mut self, key: &[u8], delta: i8) {
        if key.first() == Some(&0) {
            return;
        }
        let cid = collection_of(key);
        if cid == CollectionId::DEFAULT {
            return;
        }
        let n = self.items.entry(cid).or_insert(0);
        match delta {
            1 => *n += 1,
            -1 => *n = n.saturating_sub(1),
            _ => unreachable!("documents come and go one at a time"),
        }
        if *n == 0 {
            self.items.remove(&cid);
        }
    }

    pub fn clear(&mut self) {
        self.items.clear();
    }

    /// System event records here (counted among the vbucket's items, but no documents).
    pub fn system(&self) -> u64 {
        self.items.get(&CollectionId::SYSTEM).copied().unwrap_or(0)
    }

    /// Each non-default collection with live documents here, and how many.
    pub fn iter(&self) -> impl Iterator<Item = (CollectionId, u64)> + '_ {
        self.items.iter().map(|(c, n)| (*c, *n))
    }

    /// Live documents of the non-default collections (system event records included).
    pub fn total(&self) -> u64 {
        self.items.values().sum()
    }

    /// Forgets the counts of dropped collections; returns how many documents they held.
    pub fn take_dropped(&mut self, live: &LiveCollections) -> u64 {
        let mut n = 0;
        self.items.retain(|c, count| {
            let keep = !live.is_dropped(*c);
            if !keep {
                n += *count;
            }
            keep
        });
        n
    }

    /// Whether any document of a dropped collection is counted here.
    pub fn holds_dropped(&self, live: &LiveCollections) -> bool {
        self.items.keys().any(|c| live.is_dropped(*c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(ids: &[u32], next_id: u32) -> LiveCollections {
        let entry = |id: &u32| {
            let e = CollectionEntry {
                scope: 0,
                name: format!("c{id}"),
                max_ttl_s: 0,
            };
            (CollectionId(*id), e)
        };
        LiveCollections::with_entries(
            1,
            [(0, "_default".into())],
            ids.iter().map(entry),
            next_id,
            8,
        )
    }

    #[test]
    fn dropped_means_handed_out_and_gone_never_default_or_not_yet_known() {
        let live = live(&[0, 9], 11);
        let dropped: Vec<u32> = live.dropped().map(|c| c.0).collect();
        assert_eq!(dropped, vec![8, 10]);
        assert!(!live.is_dropped(CollectionId::DEFAULT));
        assert!(!live.is_dropped(CollectionId::SYSTEM));
        assert!(
            !live.is_dropped(CollectionId(11)),
            "not handed out yet here"
        );
        assert!(live.drops_key(b"\x08k") && !live.drops_key(b"\x00k") && !live.drops_key(b"\x09k"));
        assert!(!LiveCollections::default().any_dropped());
    }

    #[test]
    fn counts_follow_documents_of_the_other_collections() {
        let mut c = CollectionCounts::default();
        c.add(b"\x00a", 1);
        c.add(b"\x08a", 1);
        c.add(b"\x08b", 1);
        c.add(b"\x09a", 1);
        c.add(b"\x09a", -1);
        assert_eq!(c.iter().collect::<Vec<_>>(), vec![(CollectionId(8), 2)]);
        assert_eq!(c.total(), 2);
        assert!(c.holds_dropped(&live(&[0], 10)));
    }
}

/// Bytes each collection's entries take in one vbucket's hash table (slots, keys, the
/// values in memory), kept by the table as it changes. The default collection has a field
/// of its own, so its writes touch no map.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CollectionBytes {
    default: usize,
    others: BTreeMap<CollectionId, usize>,
}

impl CollectionBytes {
    /// An entry of `key` grew (`delta > 0`) or shrank.
    pub fn add(&mut self, key: &[u8], delta: isize) {
        if delta == 0 {
            return;
        }
        let cid = match key.first() {
            Some(0) => CollectionId::DEFAULT,
            _ => collection_of(key),
        };
        let slot = match cid {
            CollectionId::DEFAULT => &mut self.default,
            _ => self.others.entry(cid).or_insert(0),
        };
        *slot = slot
            .checked_add_signed(delta)
            .expect("a collection never frees more bytes than it holds");
        if cid != CollectionId::DEFAULT && *slot == 0 {
            self.others.remove(&cid);
        }
    }

    pub fn clear(&mut self) {
        *self = CollectionBytes::default();
    }

    /// Each collection with entries here (system event records under
    /// `CollectionId::SYSTEM`), and its bytes.
    pub fn iter(&self) -> impl Iterator<Item = (CollectionId, usize)> + '_ {
        let default = (self.default > 0).then_some((CollectionId::DEFAULT, self.default));
        default
            .into_iter()
            .chain(self.others.iter().map(|(c, n)| (*c, *n)))
    }
}
