//! The bucket's SyncWrite operations: completing prepares on the active (as the durability
//! monitor decides, outside the engine) and listing the pending ones.
//!
//! A durable write enters through the ordinary mutation calls with a durability level (see
//! [`crate::StoreRequest::durability`]); it returns the prepare's seqno and CAS. The caller
//! tracks it and later calls [`Bucket::commit`] or [`Bucket::abort`] with that seqno.

use crate::bucket::Bucket;
use crate::error::EngineError;
use crate::item::Mutation;
use crate::stats::BucketStats;
use sluice_types::{DurabilityLevel, Seqno, VbId};

/// A pending prepare, as the durability monitor tracks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingWrite {
    pub seqno: Seqno,
    pub level: DurabilityLevel,
}

impl Bucket {
    /// Counts `out` as a prepare made, if it was a durable write that succeeded.
    pub(crate) fn count_prepare<T, E>(
        &self,
        durability: Option<DurabilityLevel>,
        out: &Result<T, E>,
    ) {
        if durability.is_some() && out.is_ok() {
            BucketStats::bump(&self.stats.vb_active_sync_write_accepted_count);
        }
    }

    /// Commits the prepare at `prepared` of active vbucket `vb`: its version becomes visible
    /// at a new seqno. Not admission-controlled: a commit frees the prepare it replaces.
    pub fn commit(&self, vb: VbId, prepared: Seqno) -> Result<Mutation, EngineError> {
        let ctx = self.ctx();
        let out = self.with_vb(vb, |inner| inner.commit(prepared, &ctx))?;
        if out.is_ok() {
            BucketStats::bump(&self.stats.vb_active_sync_write_committed_count);
            self.after_write();
        }
        out
    }

    /// Aborts the prepare at `prepared` of active vbucket `vb`: the key's committed version
    /// stays. Returns the abort's seqno.
    pub fn abort(&self, vb: VbId, prepared: Seqno) -> Result<Seqno, EngineError> {
        let out = self.with_vb(vb, |inner| inner.abort(prepared))?;
        if out.is_ok() {
            BucketStats::bump(&self.stats.vb_active_sync_write_aborted_count);
            self.after_write();
        }
        out
    }

    /// The vbucket's pending prepares in seqno order (a vbucket that became active, or was
    /// warmed up, hands them to the durability monitor).
    pub fn pending_writes(&self, vb: VbId) -> Result<Vec<PendingWrite>, EngineError> {
        self.with_vb(vb, |inner| {
            inner
                .prepares
                .iter()
                .map(|(_, p)| PendingWrite {
                    seqno: p.meta.seqno,
                    level: p.level,
                })
                .collect()
        })
    }

    /// The active vbuckets that inherited prepares since the last call (a promotion, or
    /// warmup): their durability monitor must adopt them.
    pub fn take_inherited_prepares(&self) -> Vec<VbId> {
        std::mem::take(&mut *self.inherited_prepares.lock())
            .into_iter()
            .collect()
    }

    /// (high prepared, high completed) seqnos of the vbucket's SyncWrites.
    pub fn sync_write_seqnos(&self, vb: VbId) -> Result<(Seqno, Seqno), EngineError> {
        self.with_vb(vb, |inner| {
            (
                inner.prepares.high_prepared_seqno(),
                inner.prepares.high_completed_seqno(),
            )
        })
    }
}
