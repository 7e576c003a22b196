//! Warmup: rebuilds every vbucket from storage at start.
//!
//! - vbucket state, failover log, purge seqno and max CAS come from vb_meta;
//! - every persisted live document is loaded with its metadata; values stay resident while
//!   memory is below the low watermark, later ones are loaded as evicted (read on demand);
//!   above the high watermark not even metadata is loaded (the vbucket reads misses from disk);
//! - persisted tombstones stay on disk (only their highest rev is kept, so a re-created key
//!   continues its revision history);
//! - after an unclean stop every vbucket starts a new failover-log branch at its persisted
//!   high seqno: anything a consumer saw beyond it may be gone;
//! - SyncWrite prepares still outstanding come back as pending (a prepare on disk is
//!   complete once an abort replaced it or the key's committed version is newer); their
//!   keys are kept in memory, since a commit updates the key's entry in place.

use crate::config::BucketConfig;
use crate::error::EngineError;
use crate::hash_table::StoredValue;
use crate::memory::Memory;
use crate::prepares::Prepare;
use crate::vb_uuids::VbUuids;
use crate::vbucket::{VBucket, VbInner};
use bytes::Bytes;
use sluice_storage::{RecordKind, Store};
use sluice_types::{FailoverLog, Seqno, VbId, VbState};
use std::collections::HashMap;

/// What warmup rebuilt.
pub struct WarmedUp {
    pub vbuckets: Vec<VBucket>,
    /// Whether the vbuckets hold everything this bucket held when it last stopped: a couchbase
    /// bucket that stopped cleanly. After a crash the writes not yet flushed are gone; an
    /// ephemeral bucket keeps nothing.
    pub whole: bool,
}

/// `uuids` gives every new vbucket and every new failover-log branch its uuid, drawn in
/// vbucket order.
pub fn warmup(
    config: &BucketConfig,
    store: Option<&dyn Store>,
    memory: &Memory,
    uuids: &mut VbUuids,
) -> Result<WarmedUp, EngineError> {
    let storage = |e: sluice_storage::StoreError| EngineError::Storage(e.to_string());
    let (clean, mut metas) = match store {
        Some(s) => {
            let clean = s.take_clean_shutdown_flag().map_err(storage)?;
            let metas: HashMap<VbId, _> = s.load_vb_meta().map_err(storage)?.into_iter().collect();
            (clean, metas)
        }
        None => (true, HashMap::new()),
    };
    if let Some(vb) = metas.keys().find(|vb| vb.0 >= config.num_vbuckets) {
        return Err(EngineError::Storage(format!(
            "the data directory holds {vb}, but the bucket has {} vbuckets",
            config.num_vbuckets
        )));
    }
    if !clean {
        tracing::warn!(bucket = %config.name, "previous stop was unclean: new failover-log branches");
    }
    let mut out = Vec::with_capacity(usize::from(config.num_vbuckets));
    for id in 0..config.num_vbuckets {
        let vb = VbId(id);
        let mut inner = match metas.remove(&vb) {
            Some(m) => {
                let mut inner = VbInner::new(
                    vb,
                    m.state,
                    m.failover_log,
                    m.high_seqno,
                    m.max_cas,
                    config.checkpoint_items_max,
                );
                inner.purge_seqno = m.purge_seqno;
                inner.flushed_high_completed = m.high_completed_seqno;
                inner
            }
            None => {
                let mut inner = VbInner::new(
                    vb,
                    VbState::Active,
                    FailoverLog::new(uuids.next(), Seqno::ZERO),
                    Seqno::ZERO,
                    0,
                    config.checkpoint_items_max,
                );
                inner.meta_dirty = true;
                inner
            }
        };
        if let Some(s) = store {
            load_items(s, &mut inner, memory)?;
            if !clean {
                let high = inner.high_seqno;
                inner.failover.new_branch(uuids.next(), high);
                inner.meta_dirty = true;
            }
            inner.flusher_cursor = Some(inner.checkpoints.register_cursor_at_oldest());
        }
        out.push(VBucket::new(vb, inner));
    }
    Ok(WarmedUp {
        vbuckets: out,
        whole: store.is_some() && clean,
    })
}

fn load_items(store: &dyn Store, inner: &mut VbInner, memory: &Memory) -> Result<(), EngineError> {
    let mut high = inner.high_seqno;
    let mut visible = Seqno::ZERO;
    let mut pending: HashMap<Bytes, Prepare> = HashMap::new();
    for record in store.scan_vb(inner.id) {
        let r = record.map_err(|e| EngineError::Storage(e.to_string()))?;
        high = high.max(r.meta.seqno);
        if r.kind == RecordKind::Committed {
            visible = visible.max(r.meta.seqno);
        }
        inner.hlc.observe(r.meta.cas.0);
        // Records come in seqno order: a later record of the key completes its prepare.
        match r.kind {
            RecordKind::Prepare(level) => {
                let p = Prepare {
                    meta: r.meta,
                    value: r.value,
                    level,
                    maybe_visible: false,
                };
                pending.insert(r.key, p);
                continue;
            }
            RecordKind::Abort { .. } => {
                pending.remove(&r.key);
                continue;
            }
            RecordKind::Committed => {
                pending.remove(&r.key);
            }
        }
        if r.meta.deleted {
            inner.max_deleted_rev = inner.max_deleted_rev.max(r.meta.rev_seqno);
            inner.tombstones_only_on_disk = true;
            continue;
        }
        inner.num_items += 1;
        inner.collection_items.add(&r.key, 1);
        // System event records always stay in memory (see `system_events`).
        let system = crate::system_events::is_system_key(&r.key);
        if memory.above_high_watermark() && !system {
            // Not even metadata fits: the key stays on disk, found on demand.
            inner.keys_evicted = true;
            continue;
        }
        let resident = !memory.above_low_watermark() || system;
        let sv = StoredValue {
            meta: r.meta,
            value: resident.then_some(r.value),
            dirty: false,
            referenced: false,
            disk_seqno: r.meta.seqno,
        };
        memory.add(inner.ht.upsert(&r.key, sv));
    }
    inner.max_visible_seqno = visible;
    load_prepares(store, inner, memory, pending)?;
    // vb_meta and the records are written in one batch, so they agree; trust the larger.
    if high != inner.high_seqno {
        inner.high_seqno = high;
        inner.checkpoints.reset(high);
    }
    Ok(())
}

/// Makes the outstanding prepares pending again, in seqno order, with their keys' entries in
/// memory (read back from disk when warmup left them out).
fn load_prepares(
    store: &dyn Store,
    inner: &mut VbInner,
    memory: &Memory,
    pending: HashMap<Bytes, Prepare>,
) -> Result<(), EngineError> {
    let mut pending: Vec<(Bytes, Prepare)> = pending.into_iter().collect();
    pending.sort_by_key(|(_, p)| p.meta.seqno);
    for (key, p) in pending {
        if inner.keys_evicted && inner.ht.get(&key).is_none() {
            let record = store
                .get(inner.id, &key)
                .map_err(|e| EngineError::Storage(e.to_string()))?;
            inner.fetched(&key, record.map(|r| (r.meta, r.value)));
        }
        let delta = inner.prepares.insert(key, p);
        inner.mem_delta += delta;
    }
    let (mem, _) = inner.take_deltas();
    memory.add(mem);
    Ok(())
}
