//! Turns a [`FlushBatch`] into the final key-level writes of one commit.
//!
//! The plan is computed in memory first, so that every index key is written at most once in
//! the atomic batch: an LSM write batch gives all its entries the same sequence number, and
//! two entries for one key (say "remove old by_seqno slot" and "insert new record" when a
//! seqno is reused) would then have no defined winner. Keeping this free of fjall also lets
//! the collapsing and purge rules be tested without a disk.

use crate::codec;
use crate::{FlushBatch, OnDisk, Result};
use hashbrown::{HashMap, HashSet};
use sluice_types::{Seqno, VbId};
use std::collections::BTreeMap;

/// The writes of one commit, each index key at most once. `None` means "remove".
///
/// Plain vectors in no particular order: an LSM memtable sorts on insert anyway, and the
/// sorted maps this used to build cost the flusher a fifth of its CPU on new keys.
#[derive(Debug, Default)]
pub(crate) struct WritePlan {
    pub(crate) by_seqno: Vec<([u8; 10], Option<fjall::Slice>)>,
    pub(crate) by_key: Vec<(fjall::Slice, Option<[u8; 8]>)>,
    pub(crate) vb_meta: BTreeMap<[u8; 2], Vec<u8>>,
}

/// Builds the plan. `current_seqno` reads the key's seqno from `by_key` as committed on
/// disk (the caller holds the commit lock, so nothing changes underneath); it is given the
/// caller's hint ([`FlushBatch::on_disk`]) and may use it instead of reading.
// Every index here is a position in a vector this function built (`newest`, `keys`,
// `seqnos`, the batch's items), never a value read from disk or a peer; it runs per flushed
// item, so the positions are not re-checked.
#[allow(clippy::indexing_slicing)]
pub(crate) fn plan_commit(
    batch: &FlushBatch,
    mut current_seqno: impl FnMut(&[u8], OnDisk) -> Result<Option<Seqno>>,
) -> Result<WritePlan> {
    assert!(
        batch.on_disk.is_empty() || batch.on_disk.len() == batch.items.len(),
        "one on-disk hint per item, or none"
    );
    let items = &batch.items;
    let hint_of = |i: usize| batch.on_disk.get(i).copied().unwrap_or_default();

    // 1. Collapse duplicate keys: the highest seqno wins (the last one on a tie). Every copy
    //    of a key carries the same hint (the disk before this batch), so any known one serves.
    //    `newest` holds, in first-seen order, the item index of each key's winner and its hint.
    let mut newest: Vec<(usize, OnDisk)> = Vec::with_capacity(items.len());
    let mut slot_of: HashMap<(VbId, &[u8]), usize> = HashMap::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        match slot_of.entry((item.vb, &item.key[..])) {
            hashbrown::hash_map::Entry::Vacant(e) => {
                e.insert(newest.len());
                newest.push((i, hint_of(i)));
            }
            hashbrown::hash_map::Entry::Occupied(e) => {
                let (winner, hint) = &mut newest[*e.get()];
                if item.meta.seqno >= items[*winner].meta.seqno {
                    *winner = i;
                }
                if hint_of(i) != OnDisk::Unknown {
                    *hint = hint_of(i);
                }
            }
        }
    }

    // 2. New versions: point by_key at them and drop the previous version's by_seqno slot.
    //    `seqnos[j]` and `keys[j]` belong to the same key for every j < newest.len().
    let mut seqnos: Vec<([u8; 10], Option<fjall::Slice>)> = Vec::with_capacity(newest.len());
    let mut keys: Vec<(fjall::Slice, Option<Seqno>)> = Vec::with_capacity(newest.len());
    let mut removals: Vec<[u8; 10]> = Vec::new();
    for &(i, hint) in &newest {
        let item = &items[i];
        let seqno = item.meta.seqno;
        let dk = codec::doc_key_slice(item.vb, &item.key);
        if let Some(prev) = current_seqno(&dk, hint)? {
            if prev != seqno {
                removals.push(codec::seqno_key(item.vb, prev));
            }
        }
        let record = codec::encode_record(&item.key, &item.meta, &item.value)?;
        seqnos.push((codec::seqno_key(item.vb, seqno), Some(record)));
        keys.push((dk, Some(seqno)));
    }
    let written = keys.len();

    // 3. Purges, against the state *after* this batch's items: a purge of a key rewritten in
    //    the same batch (or since the purger looked) no longer matches and is ignored.
    if !batch.purges.is_empty() {
        let mut key_index: HashMap<fjall::Slice, usize> = keys
            .iter()
            .enumerate()
            .map(|(j, (dk, _))| (dk.clone(), j))
            .collect();
        for (vb, key, seqno) in &batch.purges {
            let dk = codec::doc_key_slice(*vb, key);
            let (at, current) = match key_index.get(&dk) {
                Some(&j) => (Some(j), keys[j].1),
                None => (None, current_seqno(&dk, OnDisk::Unknown)?),
            };
            if current != Some(*seqno) {
                continue;
            }
            match at {
                // The version this batch writes is the one purged: write nothing for it.
                Some(j) => {
                    assert!(j < written, "a purged key's state comes from the items");
                    seqnos[j].1 = None;
                    keys[j].1 = None;
                }
                None => {
                    removals.push(codec::seqno_key(*vb, *seqno));
                    key_index.insert(dk.clone(), keys.len());
                    keys.push((dk, None));
                }
            }
        }
    }

    // 4. Removals of previous slots, each once; an insert always wins over a removal of the
    //    same slot (a seqno reused after a rollback).
    if !removals.is_empty() {
        let inserted: HashSet<[u8; 10]> = seqnos.iter().map(|(sk, _)| *sk).collect();
        let mut removed: HashSet<[u8; 10]> = HashSet::with_capacity(removals.len());
        removals.retain(|sk| !inserted.contains(sk) && removed.insert(*sk));
        seqnos.extend(removals.into_iter().map(|sk| (sk, None)));
    }

    let mut plan = WritePlan {
        by_seqno: seqnos,
        by_key: keys
            .into_iter()
            .map(|(dk, state)| (dk, state.map(codec::encode_seqno)))
            .collect(),
        vb_meta: BTreeMap::new(),
    };
    // 5. vbucket metadata: the last entry for a vbucket wins.
    for (vb, meta) in &batch.vb_meta {
        plan.vb_meta
            .insert(codec::vb_key(*vb), codec::encode_vb_meta(meta));
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ItemRecord;
    use bytes::Bytes;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use sluice_types::ItemMeta;
    use std::collections::{BTreeSet, HashMap};

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

    /// A plan as maps, after checking that it writes every index key at most once (an LSM
    /// batch gives all its entries one sequence number, so a second write of a key has no
    /// defined winner).
    struct Maps {
        by_seqno: BTreeMap<[u8; 10], Option<fjall::Slice>>,
        by_key: BTreeMap<Vec<u8>, Option<[u8; 8]>>,
    }

    fn maps(plan: WritePlan) -> Maps {
        let mut m = Maps {
            by_seqno: BTreeMap::new(),
            by_key: BTreeMap::new(),
        };
        for (sk, record) in plan.by_seqno {
            assert!(m.by_seqno.insert(sk, record).is_none(), "{sk:?} twice");
        }
        for (dk, seqno) in plan.by_key {
            assert!(
                m.by_key.insert(dk.to_vec(), seqno).is_none(),
                "{dk:?} twice"
            );
        }
        m
    }

    fn plan_with(disk: &[(&str, u64)], items: Vec<ItemRecord>, purges: &[(&str, u64)]) -> Maps {
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
        maps(plan_commit(&batch, |dk, _| Ok(disk.get(dk).copied())).expect("plan"))
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

    #[test]
    fn purge_of_a_disk_slot_reused_by_another_key_keeps_the_insert() {
        // "b" sits at 4 and is purged while "a" takes seqno 4 (a rollback reused it): the
        // purge removes "b" from by_key, and slot 4 holds "a".
        let p = plan_with(&[("b", 4)], vec![item("a", 4)], &[("b", 4)]);
        assert!(p.by_seqno[&sk(4)].is_some());
        assert_eq!(p.by_key[&codec::doc_key(VbId(3), b"b")], None);
        assert!(p.by_key[&codec::doc_key(VbId(3), b"a")].is_some());
    }

    /// Random batches (duplicates, two vbuckets, rewrites, purges, right hints of every kind)
    /// applied to a disk model: both indexes must end consistent, each key at the state the
    /// batch means (its newest version, unless a purge matched), holding that version's value.
    #[test]
    fn random_batches_leave_both_indexes_consistent() {
        // Seeded: the same cases every run.
        let mut rng = StdRng::seed_from_u64(7);
        for round in 0..2000 {
            let vbs = [VbId(3), VbId(4)];
            let key = |rng: &mut StdRng| {
                let vb = vbs[rng.gen_range(0..2)];
                (vb, Bytes::from(format!("k{}", rng.gen_range(0..8u64))))
            };
            // The disk before: some keys, each vbucket's seqnos unique and below 100.
            let mut disk: HashMap<(VbId, Bytes), Seqno> = HashMap::new();
            let mut next = [1u64, 1];
            for _ in 0..rng.gen_range(0..10u64) {
                let (vb, k) = key(&mut rng);
                let n = &mut next[usize::from(vb.0 - 3)];
                *n += 1 + rng.gen_range(0..3u64);
                disk.insert((vb, k), Seqno(*n));
            }
            let mut by_seqno: BTreeSet<[u8; 10]> = disk
                .iter()
                .map(|((vb, _), s)| codec::seqno_key(*vb, *s))
                .collect();
            // The batch: new versions above 100, in any order, keys repeating.
            let mut next = [100u64, 100];
            let mut items = Vec::new();
            let mut on_disk = Vec::new();
            for _ in 0..rng.gen_range(0..12u64) {
                let (vb, k) = key(&mut rng);
                let n = &mut next[usize::from(vb.0 - 3)];
                *n += 1 + rng.gen_range(0..2u64);
                let truth = disk.get(&(vb, k.clone())).copied();
                on_disk.push(match (rng.gen_range(0..2u64), truth) {
                    (0, _) => OnDisk::Unknown,
                    (_, Some(s)) => OnDisk::At(s),
                    (_, None) => OnDisk::Absent,
                });
                items.push(ItemRecord {
                    vb,
                    value: Bytes::from(format!("{k:?}@{n}")),
                    key: k,
                    meta: ItemMeta {
                        seqno: Seqno(*n),
                        ..ItemMeta::default()
                    },
                });
            }
            if rng.gen_range(0..2u64) == 0 {
                items.reverse();
                on_disk.reverse();
            }
            // What the batch means, key by key: newest version, then the purges in order.
            let mut expected: HashMap<(VbId, Bytes), Option<Seqno>> =
                disk.iter().map(|(k, s)| (k.clone(), Some(*s))).collect();
            for it in &items {
                let e = expected.entry((it.vb, it.key.clone())).or_insert(None);
                // Disk seqnos are below 100, the batch's above: the batch's newest wins.
                if e.is_none_or(|s| it.meta.seqno > s) {
                    *e = Some(it.meta.seqno);
                }
            }
            let mut purges = Vec::new();
            for _ in 0..rng.gen_range(0..4u64) {
                let (vb, k) = key(&mut rng);
                let target = match rng.gen_range(0..3u64) {
                    0 => disk.get(&(vb, k.clone())).copied(),
                    1 => expected.get(&(vb, k.clone())).copied().flatten(),
                    _ => Some(Seqno(rng.gen_range(0..110u64))),
                };
                let Some(seqno) = target else { continue };
                if expected.get(&(vb, k.clone())).copied().flatten() == Some(seqno) {
                    expected.insert((vb, k.clone()), None);
                }
                purges.push((vb, k, seqno));
            }

            // Keys some copy of which came with a known hint: the commit must not read them.
            let hinted: BTreeSet<Vec<u8>> = items
                .iter()
                .zip(&on_disk)
                .filter(|(_, h)| h.known().is_some())
                .map(|(it, _)| codec::doc_key(it.vb, &it.key))
                .collect();
            let batch = FlushBatch {
                on_disk,
                items,
                purges,
                vb_meta: Vec::new(),
            };
            let by_dk: HashMap<Vec<u8>, Seqno> = disk
                .iter()
                .map(|((vb, k), s)| (codec::doc_key(*vb, k), *s))
                .collect();
            let plan = plan_commit(&batch, |dk, hint| {
                let truth = by_dk.get(dk).copied();
                match hint.known() {
                    Some(known) => assert_eq!(known, truth, "round {round}: a hint went wrong"),
                    None => assert!(
                        !hinted.contains(dk),
                        "round {round}: a known hint was dropped for a copy without one"
                    ),
                }
                Ok(truth)
            })
            .expect("plan");
            let m = maps(plan);

            for (sk, record) in &m.by_seqno {
                match record {
                    Some(_) => by_seqno.insert(*sk),
                    None => by_seqno.remove(sk),
                };
            }
            let mut want_slots = BTreeSet::new();
            for ((vb, k), state) in &expected {
                let dk = codec::doc_key(*vb, k);
                let now = match m.by_key.get(&dk) {
                    Some(written) => written.map(|s| Seqno(u64::from_be_bytes(s))),
                    None => disk.get(&(*vb, k.clone())).copied(),
                };
                assert_eq!(now, *state, "round {round}: {vb:?} {k:?}");
                if let Some(s) = state {
                    want_slots.insert(codec::seqno_key(*vb, *s));
                    if let Some(Some(record)) = m.by_seqno.get(&codec::seqno_key(*vb, *s)) {
                        let body = codec::decode_record(record).expect("record");
                        assert_eq!(body.key, *k);
                        assert_eq!(body.value, Bytes::from(format!("{k:?}@{}", s.0)));
                    }
                }
            }
            assert_eq!(by_seqno, want_slots, "round {round}: by_seqno slots");
        }
    }
}
