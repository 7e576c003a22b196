//! Who wants to hear that a vbucket changed: DCP producers waiting for new items. The engine
//! calls them after every write, outside the vbucket lock; they must be cheap and never
//! block (set a flag, wake a task).

use parking_lot::RwLock;
use sluice_types::VbId;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

pub trait ChangeListener: Send + Sync {
    fn changed(&self, vb: VbId);
}

#[derive(Default)]
pub struct Listeners {
    /// Fast path for the common case: no streams at all, no lock taken per write.
    count: AtomicUsize,
    list: RwLock<Vec<Weak<dyn ChangeListener>>>,
}

impl Listeners {
    /// Registers `l` until it is dropped (weakly held: a closed connection needs no cleanup).
    pub fn add(&self, l: &Arc<dyn ChangeListener>) {
        let mut list = self.list.write();
        list.retain(|w| w.strong_count() > 0);
        list.push(Arc::downgrade(l));
        self.count.store(list.len(), Ordering::Release);
    }

    pub fn notify(&self, vb: VbId) {
        if self.count.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut stale = false;
        for w in self.list.read().iter() {
            match w.upgrade() {
                Some(l) => l.changed(vb),
                None => stale = true,
            }
        }
        if stale {
            let mut list = self.list.write();
            list.retain(|w| w.strong_count() > 0);
            self.count.store(list.len(), Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    struct Count(AtomicU64);
    impl ChangeListener for Count {
        fn changed(&self, vb: VbId) {
            self.0.fetch_add(u64::from(vb.0) + 1, Ordering::Relaxed);
        }
    }

    #[test]
    fn dropped_listeners_stop_hearing_and_are_forgotten() {
        let ls = Listeners::default();
        let a = Arc::new(Count(AtomicU64::new(0)));
        let dyn_a: Arc<dyn ChangeListener> = a.clone();
        ls.add(&dyn_a);
        ls.notify(VbId(2));
        assert_eq!(a.0.load(Ordering::Relaxed), 3);
        drop(dyn_a);
        drop(a);
        ls.notify(VbId(2));
        assert_eq!(ls.count.load(Ordering::Relaxed), 0);
    }
}
