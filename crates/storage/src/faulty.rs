//! A [`Store`] wrapper that fails a chosen commit's sync, for engine crash and poison tests,
//! or holds commits back (a disk that stopped moving), for backlog tests.
//!
//! A real failed fsync cannot be produced on demand, so the wrapper stands in for it: the
//! chosen commit returns [`StoreError::Io`], and from then on the wrapper behaves exactly like
//! a poisoned store (every write returns [`StoreError::Poisoned`]; reads still work).

use crate::poison::Poison;
use crate::{FlushBatch, ItemRecord, Result, Store, StoreError, StoreSnapshot, VbMeta};
use bytes::Bytes;
use sluice_types::{Seqno, VbId};
use std::sync::{Condvar, Mutex, PoisonError};

/// What the batch of the commit whose sync "failed" leaves behind. After a real failed fsync
/// either can be true, so engine tests should survive both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailedSync {
    /// The batch never reaches the inner store: not readable, not there after a reopen.
    Lost,
    /// The batch reaches the inner store (readable, durable) although the commit reports
    /// failure.
    Applied,
}

pub struct FaultyStore<S: Store> {
    inner: S,
    /// Commits still to go before the failing one (1 = the next commit fails), and its effect.
    armed: Mutex<Option<(u64, FailedSync)>>,
    poison: Poison,
    /// While true, commits wait (see [`FaultyStore::hold_commits`]).
    held: Mutex<bool>,
    released: Condvar,
}

impl<S: Store> FaultyStore<S> {
    pub fn new(inner: S) -> FaultyStore<S> {
        FaultyStore {
            inner,
            armed: Mutex::new(None),
            poison: Poison::default(),
            held: Mutex::new(false),
            released: Condvar::new(),
        }
    }

    /// While `hold` is true, every commit waits before it reaches the inner store; setting
    /// it back to false lets the waiting commits through.
    pub fn hold_commits(&self, hold: bool) {
        *self.held.lock().unwrap_or_else(PoisonError::into_inner) = hold;
        self.released.notify_all();
    }

    fn wait_while_held(&self) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        while *held {
            held = self
                .released
                .wait(held)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Makes the `n`-th commit from now (1 = the next one; 0 is taken as 1) fail its sync.
    /// Every commit call counts, empty batches included. Replaces an earlier arming.
    pub fn fail_sync_of_commit(&self, n: u64, effect: FailedSync) {
        *self.lock_armed() = Some((n.max(1), effect));
    }

    pub fn is_poisoned(&self) -> bool {
        self.poison.is_poisoned()
    }

    pub fn inner(&self) -> &S {
        &self.inner
    }

    pub fn into_inner(self) -> S {
        self.inner
    }

    fn lock_armed(&self) -> std::sync::MutexGuard<'_, Option<(u64, FailedSync)>> {
        self.armed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts one commit; returns the effect if this is the one that fails.
    fn tick(&self) -> Option<FailedSync> {
        let mut armed = self.lock_armed();
        let (remaining, effect) = armed.as_mut()?;
        *remaining -= 1;
        if *remaining > 0 {
            return None;
        }
        let effect = *effect;
        *armed = None;
        Some(effect)
    }
}

impl<S: Store> Store for FaultyStore<S> {
    fn commit(&self, batch: &FlushBatch) -> Result<()> {
        self.wait_while_held();
        self.poison.check()?;
        let Some(effect) = self.tick() else {
            return self.inner.commit(batch);
        };
        let mut msg = "injected sync failure".to_string();
        if effect == FailedSync::Applied {
            if let Err(e) = self.inner.commit(batch) {
                msg = format!("{msg} (and the inner commit failed too: {e})");
            }
        }
        self.poison.poison(msg.clone());
        Err(StoreError::Io(msg))
    }

    fn get(&self, vb: VbId, key: &[u8]) -> Result<Option<ItemRecord>> {
        self.inner.get(vb, key)
    }

    fn get_pending(&self, vb: VbId, key: &[u8]) -> Result<Option<ItemRecord>> {
        self.inner.get_pending(vb, key)
    }

    fn load_vb_meta(&self) -> Result<Vec<(VbId, VbMeta)>> {
        self.inner.load_vb_meta()
    }

    fn scan_vb(&self, vb: VbId) -> Box<dyn Iterator<Item = Result<ItemRecord>> + Send + '_> {
        self.inner.scan_vb(vb)
    }

    fn snapshot(&self) -> Box<dyn StoreSnapshot> {
        self.inner.snapshot()
    }

    fn take_clean_shutdown_flag(&self) -> Result<bool> {
        self.poison.check()?;
        self.inner.take_clean_shutdown_flag()
    }

    fn mark_clean_shutdown(&self) -> Result<()> {
        // Poisoned means writes were lost: the next start must see an unclean stop.
        self.poison.check()?;
        self.inner.mark_clean_shutdown()
    }

    fn disk_bytes(&self) -> u64 {
        self.inner.disk_bytes()
    }

    fn keys_with_prefix(
        &self,
        vb: VbId,
        prefix: &[u8],
        limit: usize,
    ) -> Result<Vec<(Bytes, Seqno)>> {
        self.inner.keys_with_prefix(vb, prefix, limit)
    }

    fn reset_vb(&self, vb: VbId) -> Result<()> {
        self.inner.reset_vb(vb)
    }
}
