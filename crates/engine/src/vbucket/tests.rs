//! Unit tests of one vbucket's mutation rules, seqnos, tombstones and queueing.

use super::*;
use sluice_types::VbUuid;

impl VbInner {
    /// A GET as the bucket makes it, for the tests: the document copied out.
    fn get(&mut self, key: &[u8], ctx: &OpCtx) -> Result<Document, EngineError> {
        self.read(key, ctx, |meta, value| Document {
            meta: *meta,
            value: value.clone(),
        })
    }
}

pub(super) fn vb() -> VbInner {
    VbInner::new(
        VbId(0),
        VbState::Active,
        FailoverLog::new(VbUuid(7), Seqno(0)),
        Seqno(0),
        0,
        100,
    )
}

pub(super) fn ctx(now_s: u32) -> OpCtx {
    OpCtx {
        now_unix_ns: u64::from(now_s) * 1_000_000_000,
        now_unix_s: now_s,
        persistent: true,
        value_bytes_max: 1024,
        durability: None,
        cas_salt: 0,
    }
}

pub(super) fn set<'a>(
    key: &'a [u8],
    value: &'a [u8],
    kind: StoreKind,
    cas: u64,
) -> StoreRequest<'a> {
    StoreRequest {
        kind,
        key,
        value,
        flags: 5,
        expiry_wire: 0,
        datatype: Datatype::RAW,
        cas: Cas(cas),
        preserve_ttl: false,
        durability: None,
        macros: &[],
        access_deleted: false,
        store_deleted: false,
    }
}

#[test]
fn seqnos_cas_and_revs_advance_per_mutation() {
    let mut v = vb();
    let c = ctx(1000);
    let m1 = v
        .store(&set(b"k", b"1", StoreKind::Set, 0), Datatype::RAW, &c)
        .unwrap();
    let m2 = v
        .store(&set(b"k", b"2", StoreKind::Set, 0), Datatype::RAW, &c)
        .unwrap();
    assert_eq!((m1.seqno, m2.seqno), (Seqno(1), Seqno(2)));
    assert!(m2.cas > m1.cas);
    assert_eq!(m1.vb_uuid, VbUuid(7));
    let d = v.get(b"k", &c).unwrap();
    assert_eq!(
        (d.meta.rev_seqno, d.meta.flags, &d.value[..]),
        (2, 5, &b"2"[..])
    );
}

#[test]
fn only_a_key_memory_and_disk_never_had_is_queued_as_a_first_version() {
    let mut v = vb();
    let c = ctx(1000);
    let reader = v.checkpoints.register_cursor_at_oldest();
    let firsts = |v: &mut VbInner| -> Vec<(Vec<u8>, bool)> {
        let (chunks, _) = v.checkpoints.read(reader, usize::MAX);
        chunks
            .iter()
            .flat_map(|ch| ch.items.iter())
            .map(|i| (i.key.to_vec(), i.first_version))
            .collect()
    };
    let m = v
        .store(&set(b"a", b"1", StoreKind::Set, 0), Datatype::RAW, &c)
        .unwrap();
    assert_eq!(firsts(&mut v), vec![(b"a".to_vec(), true)]);
    v.store(&set(b"a", b"2", StoreKind::Set, 0), Datatype::RAW, &c)
        .unwrap();
    assert_eq!(firsts(&mut v), vec![(b"a".to_vec(), false)], "a rewrite");
    // The key's tombstone is persisted and leaves memory: a new write of it may find the
    // tombstone on disk, and so may any key the vbucket has no entry for.
    v.mark_persisted(b"a", m.seqno);
    let d = v.delete(b"a", Cas::ZERO, &c).unwrap();
    v.mark_persisted(b"a", d.seqno);
    assert!(
        v.ht.get(b"a").is_none(),
        "the persisted tombstone left memory"
    );
    v.store(&set(b"a", b"3", StoreKind::Set, 0), Datatype::RAW, &c)
        .unwrap();
    v.store(&set(b"b", b"1", StoreKind::Set, 0), Datatype::RAW, &c)
        .unwrap();
    // (The tombstone's queued version was replaced by the rewrite: dedup.)
    assert_eq!(
        firsts(&mut v),
        vec![(b"a".to_vec(), false), (b"b".to_vec(), false)]
    );
}

#[test]
fn add_replace_and_cas_rules() {
    let mut v = vb();
    let c = ctx(1000);
    assert_eq!(
        v.store(&set(b"k", b"x", StoreKind::Replace, 0), Datatype::RAW, &c),
        Err(EngineError::KeyNotFound)
    );
    let m = v
        .store(&set(b"k", b"x", StoreKind::Add, 0), Datatype::RAW, &c)
        .unwrap();
    assert_eq!(
        v.store(&set(b"k", b"y", StoreKind::Add, 0), Datatype::RAW, &c),
        Err(EngineError::KeyExists)
    );
    assert_eq!(
        v.store(
            &set(b"k", b"y", StoreKind::Set, m.cas.0 + 1),
            Datatype::RAW,
            &c
        ),
        Err(EngineError::KeyExists)
    );
    v.store(
        &set(b"k", b"y", StoreKind::Replace, m.cas.0),
        Datatype::RAW,
        &c,
    )
    .unwrap();
    assert_eq!(
        v.store(&set(b"nope", b"y", StoreKind::Set, 42), Datatype::RAW, &c),
        Err(EngineError::KeyNotFound)
    );
}

#[test]
fn delete_leaves_a_tombstone_until_persisted_and_keeps_rev_history() {
    let mut v = vb();
    let c = ctx(1000);
    v.store(&set(b"k", b"x", StoreKind::Set, 0), Datatype::RAW, &c)
        .unwrap();
    let d = v.delete(b"k", Cas::ZERO, &c).unwrap();
    assert_eq!(v.get(b"k", &c), Err(EngineError::KeyNotFound));
    assert!(v.get_meta(b"k", &c).unwrap().unwrap().deleted);
    v.mark_persisted(b"k", d.seqno);
    assert!(v.get_meta(b"k", &c).unwrap().is_none());
    v.store(&set(b"k", b"z", StoreKind::Add, 0), Datatype::RAW, &c)
        .unwrap();
    assert_eq!(v.get(b"k", &c).unwrap().meta.rev_seqno, 3);
}

#[test]
fn access_deleted_writes_work_on_tombstones() {
    let mut v = vb();
    let c = ctx(1000);
    let tomb = |value: &'static [u8], kind, cas| StoreRequest {
        access_deleted: true,
        store_deleted: true,
        ..set(b"k", value, kind, cas)
    };
    // Created as a tombstone: no document, a deletion in the queue.
    let m1 = v
        .store(&tomb(b"x1", StoreKind::Add, 0), Datatype::RAW, &c)
        .unwrap();
    assert_eq!(v.num_items, 0);
    assert_eq!(v.get(b"k", &c), Err(EngineError::KeyNotFound));
    let meta = v.get_meta(b"k", &c).unwrap().unwrap();
    assert!(meta.deleted && meta.expiry == Expiry::NEVER && meta.flags == 5);
    // ADD that sees tombstones fails on it; one that does not see them succeeds.
    assert_eq!(
        v.store(&tomb(b"x2", StoreKind::Add, 0), Datatype::RAW, &c),
        Err(EngineError::KeyExists)
    );
    // REPLACE of the tombstone under its CAS, and under a stale one.
    let m2 = v
        .store(
            &tomb(b"x2", StoreKind::Replace, m1.cas.0),
            Datatype::RAW,
            &c,
        )
        .unwrap();
    assert_eq!(
        v.store(
            &tomb(b"x3", StoreKind::Replace, m1.cas.0),
            Datatype::RAW,
            &c
        ),
        Err(EngineError::KeyExists)
    );
    assert_eq!(v.read_any(b"k", &c).unwrap().unwrap().value, &b"x2"[..]);
    // Without access-deleted the tombstone is nothing: REPLACE fails.
    assert_eq!(
        v.store(&set(b"k", b"y", StoreKind::Replace, 0), Datatype::RAW, &c),
        Err(EngineError::KeyNotFound)
    );
    // Revive: a live version over the tombstone, under its CAS.
    let revive = StoreRequest {
        access_deleted: true,
        ..set(b"k", b"alive", StoreKind::Replace, m2.cas.0)
    };
    v.store(&revive, Datatype::RAW, &c).unwrap();
    assert_eq!(v.num_items, 1);
    assert_eq!(v.get(b"k", &c).unwrap().value, &b"alive"[..]);
    assert_eq!(v.get(b"k", &c).unwrap().meta.rev_seqno, 3);
    // Once persisted, the tombstone of another key is read back before a write sees it.
    let m = v
        .store(
            &StoreRequest {
                key: b"t",
                ..tomb(b"x", StoreKind::Add, 0)
            },
            Datatype::RAW,
            &c,
        )
        .unwrap();
    v.mark_persisted(b"t", m.seqno);
    let again = StoreRequest {
        key: b"t",
        ..tomb(b"x", StoreKind::Replace, m.cas.0)
    };
    assert_eq!(
        v.store(&again, Datatype::RAW, &c),
        Err(EngineError::NeedsFetch)
    );
}

#[test]
fn expiry_on_access_writes_an_expiration() {
    let mut v = vb();
    let mut r = set(b"k", b"x", StoreKind::Set, 0);
    r.expiry_wire = 10;
    v.store(&r, Datatype::RAW, &ctx(1000)).unwrap();
    assert!(v.get(b"k", &ctx(1009)).is_ok());
    assert_eq!(v.get(b"k", &ctx(1010)), Err(EngineError::KeyNotFound));
    assert_eq!(v.high_seqno, Seqno(2), "the expiration took a seqno");
}

fn arith(
    key: &[u8],
    increment: bool,
    delta: u64,
    initial: u64,
    expiry_wire: u32,
) -> ArithmeticRequest<'_> {
    ArithmeticRequest {
        key,
        increment,
        delta,
        initial,
        expiry_wire,
        cas: Cas::ZERO,
        durability: None,
    }
}

#[test]
fn arithmetic_and_concat() {
    let mut v = vb();
    let c = ctx(1000);
    assert_eq!(
        v.arithmetic(&arith(b"n", true, 1, 5, u32::MAX), &c),
        Err(EngineError::KeyNotFound)
    );
    assert_eq!(v.arithmetic(&arith(b"n", true, 1, 5, 0), &c).unwrap().0, 5);
    assert_eq!(
        v.arithmetic(&arith(b"n", true, 10, 0, 0), &c).unwrap().0,
        15
    );
    assert_eq!(
        v.arithmetic(&arith(b"n", false, 100, 0, 0), &c).unwrap().0,
        0
    );
    v.store(&set(b"s", b"abc", StoreKind::Set, 0), Datatype::RAW, &c)
        .unwrap();
    assert_eq!(
        v.arithmetic(&arith(b"s", true, 1, 0, 0), &c),
        Err(EngineError::DeltaBadValue)
    );
    v.concat(b"s", true, b"d", Cas::ZERO, &c).unwrap();
    v.concat(b"s", false, b"_", Cas::ZERO, &c).unwrap();
    assert_eq!(&v.get(b"s", &c).unwrap().value[..], b"_abcd");
    assert_eq!(
        v.concat(b"missing", true, b"d", Cas::ZERO, &c),
        Err(EngineError::NotStored)
    );
}

#[test]
fn evicted_keys_are_resolved_from_disk_before_answering() {
    let mut v = vb();
    let c = ctx(1000);
    let m = v
        .store(&set(b"k", b"x", StoreKind::Set, 0), Datatype::RAW, &c)
        .unwrap();
    v.mark_persisted(b"k", m.seqno);
    let persisted = v.ht.get(b"k").unwrap().meta;
    assert!(v.evict_key(b"k") > 0);
    assert_eq!(v.num_items, 1, "an evicted item still counts");
    assert_eq!(v.get(b"k", &c), Err(EngineError::NeedsFetch));
    assert_eq!(
        v.store(&set(b"k", b"y", StoreKind::Add, 0), Datatype::RAW, &c),
        Err(EngineError::NeedsFetch)
    );
    v.fetched(b"k", Some((persisted, Bytes::from_static(b"x"))));
    assert_eq!(&v.get(b"k", &c).unwrap().value[..], b"x");
    assert_eq!(
        v.store(&set(b"k", b"y", StoreKind::Add, 0), Datatype::RAW, &c),
        Err(EngineError::KeyExists)
    );
    // A key the disk does not have: a marker answers without another read.
    assert_eq!(v.get(b"nope", &c), Err(EngineError::NeedsFetch));
    v.fetched(b"nope", None);
    assert_eq!(v.get(b"nope", &c), Err(EngineError::KeyNotFound));
    assert!(v.get_meta(b"nope", &c).unwrap().is_none());
    v.store(&set(b"nope", b"z", StoreKind::Add, 0), Datatype::RAW, &c)
        .unwrap();
    assert_eq!(v.num_items, 2);
    // A dirty entry is never evicted.
    assert_eq!(v.evict_key(b"nope"), 0);
}

#[test]
fn non_active_vbuckets_answer_not_my_vbucket() {
    let mut v = vb();
    v.state = VbState::Replica;
    assert_eq!(v.get(b"k", &ctx(1)), Err(EngineError::NotMyVbucket));
}
