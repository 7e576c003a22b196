//! Document locks (GET_LOCKED / UNLOCK_KEY), per vbucket.
//!
//! A lock gives its holder a CAS of its own. Until it is released or times out, only a write
//! carrying that CAS may change the document (and doing so releases the lock); any other
//! write, touch or second lock gets LOCKED, and readers see the CAS as `u64::MAX`, as in
//! Couchbase Server. Locks live in memory on the active only: a restart or a failover
//! releases them, as Couchbase's do.
//!
//! They are kept beside the hash table, not in its entries: few documents are ever locked,
//! and every entry would otherwise pay for the field. The map holds at most one entry per
//! locked key; expired locks go when their key is next touched or when the map is swept.

use crate::error::EngineError;
use hashbrown::HashMap;
use sluice_types::{Cas, ItemMeta};

/// The lock time when the client asks for none (0) or for more than the maximum.
pub const LOCK_SECONDS_DEFAULT: u32 = 15;
/// The longest lock a client may take.
pub const LOCK_SECONDS_MAX: u32 = 30;

/// The CAS every reader sees for a locked document.
pub const LOCKED_CAS: Cas = Cas(u64::MAX);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Lock {
    cas: Cas,
    /// Unix seconds at which the lock is released by itself.
    until_s: u32,
}

#[derive(Debug, Default)]
pub struct Locks {
    held: HashMap<Box<[u8]>, Lock>,
}

impl Locks {
    /// The seconds a request for `asked` seconds gets.
    pub fn duration(asked: u32) -> u32 {
        match asked {
            0 => LOCK_SECONDS_DEFAULT,
            s if s > LOCK_SECONDS_MAX => LOCK_SECONDS_DEFAULT,
            s => s,
        }
    }

    /// The lock CAS of `key`, if it is locked at `now_s` (an expired lock is dropped).
    fn held(&mut self, key: &[u8], now_s: u32) -> Option<Cas> {
        if self.held.is_empty() {
            return None;
        }
        match self.held.get(key) {
            Some(l) if now_s < l.until_s => Some(l.cas),
            Some(_) => {
                self.held.remove(key);
                None
            }
            None => None,
        }
    }

    /// Whether `key` is locked at `now_s`, without dropping an expired lock.
    pub fn is_held(&self, key: &[u8], now_s: u32) -> bool {
        !self.held.is_empty() && self.held.get(key).is_some_and(|l| now_s < l.until_s)
    }

    /// What a reader sees of a locked document's metadata (its CAS hidden as
    /// [`LOCKED_CAS`]); None when `key` is not locked, so the common read copies nothing.
    pub fn seen(&self, key: &[u8], meta: &ItemMeta, now_s: u32) -> Option<ItemMeta> {
        if !self.is_held(key, now_s) {
            return None;
        }
        Some(ItemMeta {
            cas: LOCKED_CAS,
            ..*meta
        })
    }

    /// Whether a write carrying `cas` may change `key` now: the CAS the write must then
    /// match against the document (`Cas::ZERO` when it carries the lock's CAS: the holder
    /// writes), or LOCKED.
    pub fn admit(&mut self, key: &[u8], cas: Cas, now_s: u32) -> Result<Cas, EngineError> {
        match self.held(key, now_s) {
            None => Ok(cas),
            Some(lock) if lock == cas => Ok(Cas::ZERO),
            Some(_) => Err(EngineError::Locked),
        }
    }

    /// Locks `key` with `cas` for `seconds` from `now_s`; LOCKED if it is locked already.
    pub fn lock(
        &mut self,
        key: &[u8],
        cas: Cas,
        now_s: u32,
        seconds: u32,
    ) -> Result<(), EngineError> {
        debug_assert!(cas != Cas::ZERO && cas != LOCKED_CAS);
        if self.held(key, now_s).is_some() {
            return Err(EngineError::Locked);
        }
        if self.held.len() >= 1024 && self.held.len().is_power_of_two() {
            self.sweep(now_s);
        }
        // Clocks here count whole seconds: one more than asked, so a lock taken late in a
        // second still lasts at least its time (never a moment).
        self.held.insert(
            key.into(),
            Lock {
                cas,
                until_s: now_s.saturating_add(seconds).saturating_add(1),
            },
        );
        Ok(())
    }

    /// UNLOCK_KEY with `cas`: NOT_LOCKED if there is no lock, LOCKED if `cas` is not its.
    pub fn unlock(&mut self, key: &[u8], cas: Cas, now_s: u32) -> Result<(), EngineError> {
        match self.held(key, now_s) {
            None => Err(EngineError::NotLocked),
            Some(lock) if lock != cas => Err(EngineError::Locked),
            Some(_) => {
                self.held.remove(key);
                Ok(())
            }
        }
    }

    /// A new version of `key` was written: whatever lock it had is over.
    pub fn release(&mut self, key: &[u8]) {
        if !self.held.is_empty() {
            self.held.remove(key);
        }
    }

    /// Every lock goes (the vbucket stops being active).
    pub fn clear(&mut self) {
        self.held.clear();
    }

    /// Drops expired locks, so keys locked and never touched again do not accumulate.
    fn sweep(&mut self, now_s: u32) {
        self.held.retain(|_, l| now_s < l.until_s);
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.held.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(Locks::duration(0), 15);
        assert_eq!(Locks::duration(1), 1);
        assert_eq!(Locks::duration(30), 30);
        assert_eq!(Locks::duration(31), 15);
    }

    #[test]
    fn only_the_holder_writes_until_the_lock_ends() {
        let mut l = Locks::default();
        let k = b"k".as_slice();
        assert_eq!(
            l.admit(k, Cas(5), 100),
            Ok(Cas(5)),
            "unlocked: the CAS as given"
        );
        l.lock(k, Cas(77), 100, 10).unwrap();
        assert_eq!(l.held(k, 100), Some(Cas(77)));
        assert_eq!(l.lock(k, Cas(78), 101, 10), Err(EngineError::Locked));
        assert_eq!(l.admit(k, Cas::ZERO, 101), Err(EngineError::Locked));
        assert_eq!(l.admit(k, Cas(5), 101), Err(EngineError::Locked));
        assert_eq!(l.admit(k, Cas(77), 101), Ok(Cas::ZERO), "the holder writes");
        assert_eq!(l.admit(b"other", Cas::ZERO, 101), Ok(Cas::ZERO));
        // Still held at 110 (at least the 10 s asked, counted in whole seconds), gone at 111.
        assert_eq!(l.held(k, 110), Some(Cas(77)));
        assert_eq!(l.held(k, 111), None);
        assert!(l.is_empty());
    }

    #[test]
    fn unlock_rules() {
        let mut l = Locks::default();
        let k = b"k".as_slice();
        assert_eq!(l.unlock(k, Cas(1), 0), Err(EngineError::NotLocked));
        l.lock(k, Cas(9), 0, 5).unwrap();
        assert_eq!(l.unlock(k, Cas(8), 1), Err(EngineError::Locked));
        assert_eq!(l.unlock(k, Cas(9), 1), Ok(()));
        assert_eq!(l.held(k, 1), None);
        l.lock(k, Cas(10), 1, 5).unwrap();
        l.release(k);
        assert_eq!(l.held(k, 1), None);
    }

    #[test]
    fn expired_locks_are_swept() {
        let mut l = Locks::default();
        for i in 0..1024u32 {
            l.lock(&i.to_be_bytes(), Cas(u64::from(i) + 1), 0, 1)
                .unwrap();
        }
        assert_eq!(l.len(), 1024);
        l.lock(b"late", Cas(5000), 10, 1).unwrap(); // the others ended at 2
        assert_eq!(l.len(), 1, "the expired 1,024 were swept");
    }
}
