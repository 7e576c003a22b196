//! Turns a [`FlushBatch`] into the final key-level writes of one commit.
//!
//! The plan is computed in memory first, so that every index key is written at most once in
//! the atomic batch: an LSM write batch gives all its entries the same sequence number, and
//! two entries for one key (say "remove old by_seqno slot" and "insert new record" when a
//! seqno is reused) would then have no defined winner. Keeping this free of fjall also lets
//! the collapsing and purge rules be tested without a disk.

use crate::codec;
use crate::{FlushBatch, ItemRecord, OnDisk, Result};
use sluice_types::Seqno;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

/// The writes of one commit. `None` means "remove".
#[derive(Debug, Default)]
pub(crate) struct WritePlan {
    pub(crate) by_seqno: BTreeMap<[u8; 10], Option<fjall::Slice>>,
    pub(crate) by_key: BTreeMap<Vec<u8>, Option<[u8; 8]>>,
    pub(crate) vb_meta: BTreeMap<[u8; 2], Vec<u8>>,
}

/// Builds the plan. `current_seqno` reads the key's seqno from `by_key` as committed on
/// disk (the caller holds the commit lock, so nothing changes underneath); it is given the
/// caller's hint ([`FlushBatch::on_disk`]) and may use it instead of reading.
pub(crate) fn plan_commit(
    batch: FlushBatch,
    mut current_seqno: impl FnMut(&[u8], OnDisk) -> Result<Option<Seqno>>,
) -> Result<WritePlan> {
    assert!(
        batch.on_disk.is_empty() || batch.on_disk.len() == batch.items.len(),
        "one on-disk hint per item, or none"
    );
    let hints = batch
        .on_disk
        .into_iter()
        .chain(std::iter::repeat(OnDisk::Unknown));
    // 1. Collapse duplicate keys: the highest seqno wins (the last one on a tie). Every
    //    copy of a key carries the same hint: the disk before this batch.
    let mut newest: BTreeMap<Vec<u8>, (ItemRecord, OnDisk)> = BTreeMap::new();
    for (item, hint) in batch.items.into_iter().zip(hints) {
        match newest.entry(codec::doc_key(item.vb, &item.key)) {
            Entry::Vacant(e) => {
                e.insert((item, hint));
            }
            Entry::Occupied(mut e) => {
                if item.meta.seqno >= e.get().0.meta.seqno {
                    let hint = if hint == OnDisk::Unknown {
                        e.get().1
                    } else {
                        hint
                    };
                    e.insert((item, hint));
                }
            }
        }
    }

    // 2. New versions: point by_key at them and drop the previous version's by_seqno slot.
    //    Removals and inserts are kept apart and merged at the end, so an insert always wins
    //    over a removal of the same slot (a seqno reused after a rollback).
    let mut key_state: BTreeMap<Vec<u8>, Option<Seqno>> = BTreeMap::new();
    let mut seqno_inserts: BTreeMap<[u8; 10], fjall::Slice> = BTreeMap::new();
    let mut seqno_removals: BTreeSet<[u8; 10]> = BTreeSet::new();
    for (dk, (item, hint)) in newest {
        let seqno = item.meta.seqno;
        if let Some(prev) = current_seqno(&dk, hint)? {
            if prev != seqno {
                seqno_removals.insert(codec::seqno_key(item.vb, prev));
            }
        }
        let record = codec::encode_record(&item.key, &item.meta, &item.value)?;
        seqno_inserts.insert(codec::seqno_key(item.vb, seqno), record);
        key_state.insert(dk, Some(seqno));
    }

    // 3. Purges, against the state *after* this batch's items: a purge of a key rewritten in
    //    the same batch (or since the purger looked) no longer matches and is ignored.
    for (vb, key, seqno) in batch.purges {
        let dk = codec::doc_key(vb, &key);
        let current = match key_state.get(&dk) {
            Some(state) => *state,
            None => current_seqno(&dk, OnDisk::Unknown)?,
        };
        if current == Some(seqno) {
            let sk = codec::seqno_key(vb, seqno);
            seqno_inserts.remove(&sk);
            seqno_removals.insert(sk);
            key_state.insert(dk, None);
        }
    }

    let mut plan = WritePlan::default();
    for sk in seqno_removals {
        plan.by_seqno.insert(sk, None);
    }
    for (sk, record) in seqno_inserts {
        plan.by_seqno.insert(sk, Some(record));
    }
    for (dk, state) in key_state {
        plan.by_key.insert(dk, state.map(codec::encode_seqno));
    }
    // 4. vbucket metadata: the last entry for a vbucket wins.
    for (vb, meta) in batch.vb_meta {
        plan.vb_meta
            .insert(codec::vb_key(vb), codec::encode_vb_meta(&meta));
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use sluice_types::{ItemMeta, VbId};
    use std::collections::HashMap;

    fn item(key: &str, seqno: u64) -> ItemRecord {
        ItemRecord {
            vb: VbId(3),
            key: Bytes::copy_from_slice(key.as_bytes()),
            meta: ItemMeta {
                seqno: Seqno(seqno),
                ..ItemMeta::default()
            },
            value: Bytes::from_static(b"v"),
        }
    }

    fn plan_with(
        disk: &[(&str, u64)],
        items: Vec<ItemRecord>,
        purges: &[(&str, u64)],
    ) -> WritePlan {
        let disk: HashMap<Vec<u8>, Seqno> = disk
            .iter()
            .map(|(k, s)| (codec::doc_key(VbId(3), k.as_bytes()), Seqno(*s)))
            .collect();
        let batch = FlushBatch {
            on_disk: Vec::new(),
            items,
            purges: purges
                .iter()
                .map(|(k, s)| (VbId(3), Bytes::copy_from_slice(k.as_bytes()), Seqno(*s)))
                .collect(),
            vb_meta: Vec::new(),
        };
        plan_commit(batch, |dk, _| Ok(disk.get(dk).copied())).expect("plan")
    }

    fn sk(seqno: u64) -> [u8; 10] {
        codec::seqno_key(VbId(3), Seqno(seqno))
    }

    #[test]
    fn duplicates_collapse_to_highest_seqno() {
        let p = plan_with(&[], vec![item("a", 5), item("a", 9), item("a", 7)], &[]);
        assert_eq!(p.by_seqno.len(), 1);
        assert!(p.by_seqno[&sk(9)].is_some());
        let dk = codec::doc_key(VbId(3), b"a");
        assert_eq!(p.by_key[&dk], Some(codec::encode_seqno(Seqno(9))));
    }

    #[test]
    fn rewrite_removes_previous_slot_once() {
        let p = plan_with(&[("a", 2)], vec![item("a", 10)], &[]);
        assert_eq!(p.by_seqno[&sk(2)], None);
        assert!(p.by_seqno[&sk(10)].is_some());
    }

    #[test]
    fn reused_seqno_is_an_insert_not_a_removal() {
        // "b" sat at seqno 4; "a" now takes 4 (a rollback reused it) and "b" moves to 12.
        let p = plan_with(&[("b", 4)], vec![item("a", 4), item("b", 12)], &[]);
        assert!(p.by_seqno[&sk(4)].is_some());
        assert!(p.by_seqno[&sk(12)].is_some());
    }

    #[test]
    fn purge_applies_only_to_current_seqno() {
        let p = plan_with(&[("a", 3), ("b", 5)], vec![], &[("a", 3), ("b", 4)]);
        assert_eq!(p.by_seqno[&sk(3)], None);
        assert_eq!(p.by_key[&codec::doc_key(VbId(3), b"a")], None);
        assert!(!p.by_seqno.contains_key(&sk(5)));
        assert!(!p.by_key.contains_key(&codec::doc_key(VbId(3), b"b")));
    }

    #[test]
    fn purge_sees_items_of_the_same_batch() {
        // Rewritten in this batch: the purge of the old tombstone is stale.
        let p = plan_with(&[("a", 3)], vec![item("a", 8)], &[("a", 3)]);
        assert!(p.by_seqno[&sk(8)].is_some());
        assert_eq!(p.by_seqno[&sk(3)], None);
        assert!(p.by_key[&codec::doc_key(VbId(3), b"a")].is_some());
        // Purging the version written in this very batch removes the key entirely.
        let p = plan_with(&[("a", 3)], vec![item("a", 8)], &[("a", 8)]);
        assert_eq!(p.by_seqno[&sk(8)], None);
        assert_eq!(p.by_seqno[&sk(3)], None);
        assert_eq!(p.by_key[&codec::doc_key(VbId(3), b"a")], None);
    }
}
