//! Turns a [`FlushBatch`] into the final key-level writes of one commit.
//!
//! The plan is computed in memory first, so that every index key is written at most once in
//! the atomic batch: an LSM write batch gives all its entries the same sequence number, and
//! two entries for one key (say "remove old by_seqno slot" and "insert new record" when a
//! seqno is reused) would then have no defined winner. Keeping this free of fjall also lets
//! the collapsing and purge rules be tested without a disk.

use crate::codec;
use crate::{FlushBatch, ItemRecord, OnDisk, RecordKind, Result};
use hashbrown::{HashMap, HashSet};
use sluice_types::{Seqno, VbId};
use std::collections::BTreeMap;

/// by_seqno writes: (vb ++ seqno, the record or `None` to remove the slot).
type SeqnoWrites = Vec<([u8; 10], Option<fjall::Slice>)>;

/// A batch's winning records: (position in the batch's items, on-disk hint).
type Winners = Vec<(usize, OnDisk)>;

/// The writes of one commit, each index key at most once. `None` means "remove".
///
/// Plain vectors in no particular order: an LSM memtable sorts on insert anyway, and the
/// sorted maps this used to build cost the flusher a fifth of its CPU on new keys.
#[derive(Debug, Default)]
pub(crate) struct WritePlan {
    pub(crate) by_seqno: SeqnoWrites,
    pub(crate) by_key: Vec<(fjall::Slice, Option<[u8; 8]>)>,
    pub(crate) pending_by_key: Vec<(fjall::Slice, Option<[u8; 8]>)>,
    pub(crate) vb_meta: BTreeMap<[u8; 2], Vec<u8>>,
}

/// The two record namespaces, each with its key index: a key has at most one record of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Namespace {
    /// Committed versions, indexed by `by_key`.
    Committed,
    /// Prepares and aborts, indexed by `pending_by_key`.
    Pending,
}

impl Namespace {
    pub(crate) fn of(kind: RecordKind) -> Namespace {
        if kind.is_pending() {
            Namespace::Pending
        } else {
            Namespace::Committed
        }
    }
}

/// Builds the plan. `current_seqno` reads the key's seqno from the namespace's key index as
/// committed on disk (the caller holds the commit lock, so nothing changes underneath); it is
/// given the caller's hint ([`FlushBatch::on_disk`]) and may use it instead of reading. Hints
/// describe the committed namespace: for the pending one it is always given
/// [`OnDisk::Unknown`].
pub(crate) fn plan_commit(
    batch: &FlushBatch,
    mut current_seqno: impl FnMut(Namespace, &[u8], OnDisk) -> Result<Option<Seqno>>,
) -> Result<WritePlan> {
    assert!(
        batch.on_disk.is_empty() || batch.on_disk.len() == batch.items.len(),
        "one on-disk hint per item, or none"
    );
    // 1. Collapse duplicates, per namespace.
    let (committed, pending) = newest_per_key(batch);
    let mut plan = PlanBuilder::with_capacity(committed.len() + pending.len());
    // 2. New records: point their key index at them and drop the previous record's slot.
    plan.write_records(
        &batch.items,
        &committed,
        Namespace::Committed,
        &mut current_seqno,
    )?;
    plan.write_records(
        &batch.items,
        &pending,
        Namespace::Pending,
        &mut current_seqno,
    )?;
    // 3. Purges, against the state *after* this batch's records.
    plan.apply_purges(&batch.purges, &mut current_seqno)?;
    // 4. Removals of previous slots.
    let mut plan = plan.finish();
    // 5. vbucket metadata: the last entry for a vbucket wins.
    for (vb, meta) in &batch.vb_meta {
        plan.vb_meta
            .insert(codec::vb_key(*vb), codec::encode_vb_meta(meta));
    }
    Ok(plan)
}

/// The winners of a batch: per (vb, namespace, key) the highest seqno (the last one on a
/// tie), as item positions with their hints, committed and pending apart, each in
/// first-seen order. Every copy of a committed key carries the same hint (the disk before
/// this batch), so any known one serves. A pending record's hint is dropped: hints describe
/// the committed namespace, so it says nothing of the pending record it replaces.
// Every index is a position in the batch's items or in `newest`, both built here.
#[allow(clippy::indexing_slicing)]
fn newest_per_key(batch: &FlushBatch) -> (Winners, Winners) {
    let items = &batch.items;
    let hint_of = |i: usize| match Namespace::of(items[i].kind) {
        Namespace::Committed => batch.on_disk.get(i).copied().unwrap_or_default(),
        Namespace::Pending => OnDisk::Unknown,
    };
    let mut newest: Winners = Vec::with_capacity(items.len());
    let mut slot_of: HashMap<(VbId, Namespace, &[u8]), usize> = HashMap::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        match slot_of.entry((item.vb, Namespace::of(item.kind), &item.key[..])) {
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
    newest
        .into_iter()
        .partition(|&(i, _)| Namespace::of(items[i].kind) == Namespace::Committed)
}

/// One entry a commit writes to a key index.
struct IndexEntry {
    /// `vb ++ key`.
    dk: fjall::Slice,
    /// The seqno the entry will hold; `None` removes it.
    seqno: Option<Seqno>,
    /// Where in [`PlanBuilder::seqnos`] this batch inserts the record the entry points to.
    insert: Option<usize>,
}

/// The writes of one key index, each key at most once.
#[derive(Default)]
struct IndexWrites {
    entries: Vec<IndexEntry>,
    /// Position in `entries` by key; built only when purges need it.
    at: HashMap<fjall::Slice, usize>,
}

/// A plan being built: records, index entries, and the slots they replace.
struct PlanBuilder {
    seqnos: SeqnoWrites,
    committed: IndexWrites,
    pending: IndexWrites,
    /// by_seqno slots of replaced or purged records, possibly repeated.
    removals: Vec<[u8; 10]>,
}

impl PlanBuilder {
    fn with_capacity(records: usize) -> PlanBuilder {
        PlanBuilder {
            seqnos: Vec::with_capacity(records),
            committed: IndexWrites::default(),
            pending: IndexWrites::default(),
            removals: Vec::new(),
        }
    }

    /// The namespace's index writes, beside the slot lists they point into.
    fn parts(&mut self, ns: Namespace) -> (&mut IndexWrites, &mut SeqnoWrites, &mut Vec<[u8; 10]>) {
        let index = match ns {
            Namespace::Committed => &mut self.committed,
            Namespace::Pending => &mut self.pending,
        };
        (index, &mut self.seqnos, &mut self.removals)
    }

    /// Inserts each winner's record, points the namespace's key index at it, and removes
    /// the slot of the record it replaces in that namespace (only that one: a committed
    /// write leaves the key's pending record alone, and the other way round).
    // `i` is a position in the batch's items, taken from `newest_per_key`.
    #[allow(clippy::indexing_slicing)]
    fn write_records(
        &mut self,
        items: &[ItemRecord],
        winners: &[(usize, OnDisk)],
        ns: Namespace,
        current_seqno: &mut impl FnMut(Namespace, &[u8], OnDisk) -> Result<Option<Seqno>>,
    ) -> Result<()> {
        let (index, seqnos, removals) = self.parts(ns);
        index.entries.reserve(winners.len());
        for &(i, hint) in winners {
            let item = &items[i];
            let seqno = item.meta.seqno;
            let dk = codec::doc_key_slice(item.vb, &item.key);
            if let Some(prev) = current_seqno(ns, &dk, hint)? {
                if prev != seqno {
                    removals.push(codec::seqno_key(item.vb, prev));
                }
            }
            let record = codec::encode_record_kind(&item.key, &item.meta, item.kind, &item.value)?;
            index.entries.push(IndexEntry {
                dk,
                seqno: Some(seqno),
                insert: Some(seqnos.len()),
            });
            seqnos.push((codec::seqno_key(item.vb, seqno), Some(record)));
        }
        Ok(())
    }

    /// Applies purges against the state after this batch's records: a purge of a key
    /// rewritten in the same batch (or since the purger looked) no longer matches and is
    /// ignored. A purge that applies also removes the key's pending record if that is older
    /// than the purged version: it is complete, and without the version that says so it
    /// would look in flight (the rule in the crate documentation).
    fn apply_purges(
        &mut self,
        purges: &[(VbId, bytes::Bytes, Seqno)],
        current_seqno: &mut impl FnMut(Namespace, &[u8], OnDisk) -> Result<Option<Seqno>>,
    ) -> Result<()> {
        if purges.is_empty() {
            return Ok(());
        }
        for index in [&mut self.committed, &mut self.pending] {
            index.at = (index.entries.iter().enumerate())
                .map(|(j, e)| (e.dk.clone(), j))
                .collect();
        }
        for (vb, key, seqno) in purges {
            let dk = codec::doc_key_slice(*vb, key);
            if self.state(Namespace::Committed, &dk, current_seqno)? != Some(*seqno) {
                continue;
            }
            self.forget(Namespace::Committed, *vb, dk.clone(), *seqno);
            let pending = self.state(Namespace::Pending, &dk, current_seqno)?;
            if let Some(older) = pending.filter(|p| p < seqno) {
                self.forget(Namespace::Pending, *vb, dk, older);
            }
        }
        Ok(())
    }

    /// The seqno the namespace's index holds for `dk` after the writes planned so far.
    // `j` comes from `at`, built from `entries` and kept in step with it.
    #[allow(clippy::indexing_slicing)]
    fn state(
        &mut self,
        ns: Namespace,
        dk: &fjall::Slice,
        current_seqno: &mut impl FnMut(Namespace, &[u8], OnDisk) -> Result<Option<Seqno>>,
    ) -> Result<Option<Seqno>> {
        let (index, _, _) = self.parts(ns);
        match index.at.get(dk) {
            Some(&j) => Ok(index.entries[j].seqno),
            None => current_seqno(ns, dk, OnDisk::Unknown),
        }
    }

    /// Removes the key's record at `seqno` from the namespace: the record this batch writes
    /// is not written after all, or the one on disk is removed.
    // `j` comes from `at` and `insert` from `write_records`, positions in vectors built here.
    #[allow(clippy::indexing_slicing)]
    fn forget(&mut self, ns: Namespace, vb: VbId, dk: fjall::Slice, seqno: Seqno) {
        let (index, seqnos, removals) = self.parts(ns);
        match index.at.get(&dk) {
            Some(&j) => {
                let entry = &mut index.entries[j];
                entry.seqno = None;
                if let Some(at) = entry.insert {
                    seqnos[at].1 = None;
                }
            }
            None => {
                removals.push(codec::seqno_key(vb, seqno));
                index.at.insert(dk.clone(), index.entries.len());
                index.entries.push(IndexEntry {
                    dk,
                    seqno: None,
                    insert: None,
                });
            }
        }
    }

    /// The plan: removals of previous slots, each once; an insert always wins over a removal
    /// of the same slot (a seqno reused after a rollback, in either namespace).
    fn finish(self) -> WritePlan {
        let PlanBuilder {
            mut seqnos,
            committed,
            pending,
            mut removals,
        } = self;
        if !removals.is_empty() {
            let inserted: HashSet<[u8; 10]> = seqnos.iter().map(|(sk, _)| *sk).collect();
            let mut removed: HashSet<[u8; 10]> = HashSet::with_capacity(removals.len());
            removals.retain(|sk| !inserted.contains(sk) && removed.insert(*sk));
            seqnos.extend(removals.into_iter().map(|sk| (sk, None)));
        }
        let entries = |index: IndexWrites| {
            (index.entries.into_iter())
                .map(|e| (e.dk, e.seqno.map(codec::encode_seqno)))
                .collect()
        };
        WritePlan {
            by_seqno: seqnos,
            by_key: entries(committed),
            pending_by_key: entries(pending),
            vb_meta: BTreeMap::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ItemRecord;
    use bytes::Bytes;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use sluice_types::{DurabilityLevel, ItemMeta};
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
            kind: RecordKind::Committed,
        }
    }

    fn prepare(key: &str, seqno: u64) -> ItemRecord {
        ItemRecord {
            kind: RecordKind::Prepare(DurabilityLevel::Majority),
            ..item(key, seqno)
        }
    }

    fn abort(key: &str, seqno: u64, prepared: u64) -> ItemRecord {
        ItemRecord {
            kind: RecordKind::Abort {
                prepared: Seqno(prepared),
            },
            ..item(key, seqno)
        }
    }

    /// A plan as maps, after checking that it writes every index key at most once (an LSM
    /// batch gives all its entries one sequence number, so a second write of a key has no
    /// defined winner).
    struct Maps {
        by_seqno: BTreeMap<[u8; 10], Option<fjall::Slice>>,
        by_key: BTreeMap<Vec<u8>, Option<[u8; 8]>>,
        pending_by_key: BTreeMap<Vec<u8>, Option<[u8; 8]>>,
    }

    fn maps(plan: WritePlan) -> Maps {
        let mut m = Maps {
            by_seqno: BTreeMap::new(),
            by_key: BTreeMap::new(),
            pending_by_key: BTreeMap::new(),
        };
        for (sk, record) in plan.by_seqno {
            assert!(m.by_seqno.insert(sk, record).is_none(), "{sk:?} twice");
        }
        for (index, entries) in [
            (&mut m.by_key, plan.by_key),
            (&mut m.pending_by_key, plan.pending_by_key),
        ] {
            for (dk, seqno) in entries {
                assert!(index.insert(dk.to_vec(), seqno).is_none(), "{dk:?} twice");
            }
        }
        m
    }

    fn plan_with(disk: &[(&str, u64)], items: Vec<ItemRecord>, purges: &[(&str, u64)]) -> Maps {
        plan_with_pending(disk, &[], items, purges)
    }

    /// A plan against a disk holding committed records `disk` and pending ones `pending`.
    fn plan_with_pending(
        disk: &[(&str, u64)],
        pending: &[(&str, u64)],
        items: Vec<ItemRecord>,
        purges: &[(&str, u64)],
    ) -> Maps {
        let index = |entries: &[(&str, u64)]| -> HashMap<Vec<u8>, Seqno> {
            (entries.iter())
                .map(|(k, s)| (codec::doc_key(VbId(3), k.as_bytes()), Seqno(*s)))
                .collect()
        };
        let (disk, pending) = (index(disk), index(pending));
        let batch = FlushBatch {
            on_disk: Vec::new(),
            items,
            purges: purges
                .iter()
                .map(|(k, s)| (VbId(3), Bytes::copy_from_slice(k.as_bytes()), Seqno(*s)))
                .collect(),
            vb_meta: Vec::new(),
        };
        let plan = plan_commit(&batch, |ns, dk, _| match ns {
            Namespace::Committed => Ok(disk.get(dk).copied()),
            Namespace::Pending => Ok(pending.get(dk).copied()),
        });
        maps(plan.expect("plan"))
    }

    fn dk(key: &str) -> Vec<u8> {
        codec::doc_key(VbId(3), key.as_bytes())
    }

    fn at(seqno: u64) -> Option<[u8; 8]> {
        Some(codec::encode_seqno(Seqno(seqno)))
    }

    fn kind_at(p: &Maps, seqno: u64) -> RecordKind {
        let record = p.by_seqno[&sk(seqno)].as_ref().expect("a record");
        codec::decode_record(record).expect("record").kind
    }

    #[test]
    fn each_namespace_keeps_its_newest_in_one_batch() {
        let p = plan_with(
            &[],
            vec![prepare("a", 5), item("a", 6), prepare("a", 7)],
            &[],
        );
        assert_eq!(
            p.by_seqno.keys().copied().collect::<Vec<_>>(),
            [sk(6), sk(7)]
        );
        assert_eq!(kind_at(&p, 6), RecordKind::Committed);
        assert_eq!(
            kind_at(&p, 7),
            RecordKind::Prepare(DurabilityLevel::Majority)
        );
        assert_eq!(p.by_key[&dk("a")], at(6));
        assert_eq!(p.pending_by_key[&dk("a")], at(7));
    }

    #[test]
    fn a_write_replaces_only_its_own_namespace() {
        // "a" has committed 2 and pending 3 on disk.
        let p = plan_with_pending(&[("a", 2)], &[("a", 3)], vec![abort("a", 10, 3)], &[]);
        assert_eq!(p.by_seqno[&sk(3)], None, "the prepare's slot goes");
        assert!(!p.by_seqno.contains_key(&sk(2)), "the committed one stays");
        assert!(!p.by_key.contains_key(&dk("a")));
        assert_eq!(p.pending_by_key[&dk("a")], at(10));

        let p = plan_with_pending(&[("a", 2)], &[("a", 3)], vec![item("a", 11)], &[]);
        assert_eq!(p.by_seqno[&sk(2)], None);
        assert!(!p.by_seqno.contains_key(&sk(3)));
        assert!(!p.pending_by_key.contains_key(&dk("a")));
        assert_eq!(p.by_key[&dk("a")], at(11));
    }

    #[test]
    fn a_pending_record_is_never_given_a_hint() {
        let batch = FlushBatch {
            items: vec![prepare("a", 5), item("a", 6)],
            on_disk: vec![OnDisk::At(Seqno(2)), OnDisk::At(Seqno(2))],
            ..FlushBatch::default()
        };
        let mut asked = Vec::new();
        plan_commit(&batch, |ns, _, hint| {
            asked.push((ns, hint));
            Ok(match ns {
                Namespace::Committed => Some(Seqno(2)),
                Namespace::Pending => None,
            })
        })
        .expect("plan");
        assert_eq!(
            asked,
            [
                (Namespace::Committed, OnDisk::At(Seqno(2))),
                (Namespace::Pending, OnDisk::Unknown)
            ]
        );
    }

    #[test]
    fn a_purge_takes_the_older_pending_record_with_it() {
        // A prepare at 3 committed as 4, deleted at 6, the tombstone purged: the prepare
        // would otherwise look in flight.
        let p = plan_with_pending(&[("a", 6)], &[("a", 3)], vec![], &[("a", 6)]);
        assert_eq!(p.by_seqno[&sk(6)], None);
        assert_eq!(p.by_seqno[&sk(3)], None);
        assert_eq!(p.by_key[&dk("a")], None);
        assert_eq!(p.pending_by_key[&dk("a")], None);
        // A pending record above the tombstone (an in-flight prepare) stays.
        let p = plan_with_pending(&[("a", 6)], &[("a", 8)], vec![], &[("a", 6)]);
        assert_eq!(p.by_seqno[&sk(6)], None);
        assert!(!p.by_seqno.contains_key(&sk(8)));
        assert!(!p.pending_by_key.contains_key(&dk("a")));
        // A stale purge leaves the pending record alone too.
        let p = plan_with_pending(&[("a", 7)], &[("a", 3)], vec![], &[("a", 6)]);
        assert!(p.by_seqno.is_empty() && p.pending_by_key.is_empty());
        // The pending state after the batch's own records counts.
        let p = plan_with_pending(&[("a", 6)], &[("a", 3)], vec![prepare("a", 9)], &[("a", 6)]);
        assert_eq!(p.pending_by_key[&dk("a")], at(9));
        assert!(p.by_seqno[&sk(9)].is_some());
        assert_eq!(p.by_seqno[&sk(3)], None);
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

    /// Random batches (duplicates, two vbuckets, both namespaces, rewrites, purges, right
    /// hints of every kind) applied to a disk model: every index must end consistent, each
    /// key at the state the batch means in each namespace (its newest record, unless a purge
    /// matched), holding that record's value and kind.
    #[test]
    fn random_batches_leave_every_index_consistent() {
        type Disk = HashMap<(VbId, Namespace, Bytes), Seqno>;
        // Seeded: the same cases every run.
        let mut rng = StdRng::seed_from_u64(7);
        let namespaces = [Namespace::Committed, Namespace::Pending];
        for round in 0..3000 {
            let vbs = [VbId(3), VbId(4)];
            let key = |rng: &mut StdRng| {
                let vb = vbs[rng.gen_range(0..2)];
                (vb, Bytes::from(format!("k{}", rng.gen_range(0..8u64))))
            };
            let kind = |rng: &mut StdRng, n: u64| match rng.gen_range(0..5u64) {
                0 => RecordKind::Prepare(DurabilityLevel::PersistToMajority),
                1 => RecordKind::Abort {
                    prepared: Seqno(n - 1),
                },
                _ => RecordKind::Committed,
            };
            // The disk before: some keys in either namespace, each vbucket's seqnos unique
            // and below 100.
            let mut disk: Disk = HashMap::new();
            let mut next = [1u64, 1];
            for _ in 0..rng.gen_range(0..14u64) {
                let (vb, k) = key(&mut rng);
                let ns = namespaces[rng.gen_range(0..2)];
                let n = &mut next[usize::from(vb.0 - 3)];
                *n += 1 + rng.gen_range(0..3u64);
                disk.insert((vb, ns, k), Seqno(*n));
            }
            let mut by_seqno: BTreeSet<[u8; 10]> = disk
                .iter()
                .map(|((vb, _, _), s)| codec::seqno_key(*vb, *s))
                .collect();
            // The batch: new records above 100, in any order, keys repeating.
            let mut next = [100u64, 100];
            let mut items = Vec::new();
            let mut on_disk = Vec::new();
            for _ in 0..rng.gen_range(0..14u64) {
                let (vb, k) = key(&mut rng);
                let n = &mut next[usize::from(vb.0 - 3)];
                *n += 1 + rng.gen_range(0..2u64);
                // A hint always describes the committed namespace, whatever the item's kind.
                let truth = disk.get(&(vb, Namespace::Committed, k.clone())).copied();
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
                    kind: kind(&mut rng, *n),
                });
            }
            if rng.gen_range(0..2u64) == 0 {
                items.reverse();
                on_disk.reverse();
            }
            // What the batch means, key by key: newest record per namespace, then the purges
            // in order (each taking an older pending record with it).
            let mut expected: HashMap<(VbId, Namespace, Bytes), Option<Seqno>> =
                disk.iter().map(|(k, s)| (k.clone(), Some(*s))).collect();
            for it in &items {
                let ns = Namespace::of(it.kind);
                let e = expected.entry((it.vb, ns, it.key.clone())).or_insert(None);
                // Disk seqnos are below 100, the batch's above: the batch's newest wins.
                if e.is_none_or(|s| it.meta.seqno > s) {
                    *e = Some(it.meta.seqno);
                }
            }
            let mut purges = Vec::new();
            for _ in 0..rng.gen_range(0..4u64) {
                let (vb, k) = key(&mut rng);
                let committed = (vb, Namespace::Committed, k.clone());
                let target = match rng.gen_range(0..3u64) {
                    0 => disk.get(&committed).copied(),
                    1 => expected.get(&committed).copied().flatten(),
                    _ => Some(Seqno(rng.gen_range(0..110u64))),
                };
                let Some(seqno) = target else { continue };
                if expected.get(&committed).copied().flatten() == Some(seqno) {
                    expected.insert(committed, None);
                    let pending = (vb, Namespace::Pending, k.clone());
                    if let Some(p) = expected.get_mut(&pending) {
                        if p.is_some_and(|p| p < seqno) {
                            *p = None;
                        }
                    }
                }
                purges.push((vb, k, seqno));
            }

            // Keys some committed copy of which came with a known hint: the commit must not
            // read them.
            let hinted: BTreeSet<Vec<u8>> = items
                .iter()
                .zip(&on_disk)
                .filter(|(it, h)| !it.kind.is_pending() && h.known().is_some())
                .map(|(it, _)| codec::doc_key(it.vb, &it.key))
                .collect();
            let batch = FlushBatch {
                on_disk,
                items,
                purges,
                vb_meta: Vec::new(),
            };
            let by_dk: HashMap<(Namespace, Vec<u8>), Seqno> = disk
                .iter()
                .map(|((vb, ns, k), s)| ((*ns, codec::doc_key(*vb, k)), *s))
                .collect();
            let plan = plan_commit(&batch, |ns, dk, hint| {
                let truth = by_dk.get(&(ns, dk.to_vec())).copied();
                match (ns, hint.known()) {
                    (Namespace::Pending, Some(_)) => {
                        panic!("round {round}: a hint reached the pending namespace")
                    }
                    (_, Some(known)) => {
                        assert_eq!(known, truth, "round {round}: a hint went wrong")
                    }
                    (Namespace::Committed, None) => assert!(
                        !hinted.contains(dk),
                        "round {round}: a known hint was dropped for a copy without one"
                    ),
                    (Namespace::Pending, None) => {}
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
            for ((vb, ns, k), state) in &expected {
                let dk = codec::doc_key(*vb, k);
                let index = match ns {
                    Namespace::Committed => &m.by_key,
                    Namespace::Pending => &m.pending_by_key,
                };
                let now = match index.get(&dk) {
                    Some(written) => written.map(|s| Seqno(u64::from_be_bytes(s))),
                    None => disk.get(&(*vb, *ns, k.clone())).copied(),
                };
                assert_eq!(now, *state, "round {round}: {vb:?} {ns:?} {k:?}");
                if let Some(s) = state {
                    want_slots.insert(codec::seqno_key(*vb, *s));
                    if let Some(Some(record)) = m.by_seqno.get(&codec::seqno_key(*vb, *s)) {
                        let body = codec::decode_record(record).expect("record");
                        assert_eq!(body.key, *k);
                        assert_eq!(body.value, Bytes::from(format!("{k:?}@{}", s.0)));
                        assert_eq!(Namespace::of(body.kind), *ns, "round {round}");
                    }
                }
            }
            assert_eq!(by_seqno, want_slots, "round {round}: by_seqno slots");
        }
    }
}
