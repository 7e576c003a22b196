//! Waking a producer connection when one of its streamed vbuckets changes.
//!
//! The engine calls [`ConnWake::changed`] after every write, from the writer's thread, so it
//! only sets a bit and wakes the connection's task; the task reads the cursor itself.

use sluice_engine::{ChangeListener, VbId};
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::Notify;

pub struct ConnWake {
    /// vbuckets with an in-memory cursor on this connection.
    watched: Box<[AtomicU64]>,
    /// vbuckets changed since the connection last read them.
    dirty: Box<[AtomicU64]>,
    pub notify: Notify,
}

fn word_bit(vb: VbId) -> (usize, u64) {
    (usize::from(vb.0) / 64, 1u64 << (vb.0 % 64))
}

impl ConnWake {
    pub fn new(num_vbuckets: u16) -> ConnWake {
        let words = usize::from(num_vbuckets).div_ceil(64);
        let zeros = || (0..words).map(|_| AtomicU64::new(0)).collect();
        ConnWake {
            watched: zeros(),
            dirty: zeros(),
            notify: Notify::new(),
        }
    }

    pub fn watch(&self, vb: VbId, on: bool) {
        let (w, b) = word_bit(vb);
        if on {
            self.watched[w].fetch_or(b, Ordering::AcqRel);
            self.mark_dirty(vb);
        } else {
            self.watched[w].fetch_and(!b, Ordering::AcqRel);
        }
    }

    pub fn mark_dirty(&self, vb: VbId) {
        let (w, b) = word_bit(vb);
        self.dirty[w].fetch_or(b, Ordering::AcqRel);
    }

    /// Takes the set of dirty vbuckets (clearing it), before their cursors are read: a write
    /// after this point sets its bit again.
    pub fn take_dirty(&self) -> Vec<VbId> {
        let mut out = Vec::new();
        for (w, word) in self.dirty.iter().enumerate() {
            let mut bits = word.swap(0, Ordering::AcqRel);
            while bits != 0 {
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                out.push(VbId((w * 64) as u16 + b as u16));
            }
        }
        out
    }
}

impl ChangeListener for ConnWake {
    fn changed(&self, vb: VbId) {
        let (w, b) = word_bit(vb);
        if self.watched[w].load(Ordering::Acquire) & b == 0 {
            return;
        }
        let before = self.dirty[w].fetch_or(b, Ordering::AcqRel);
        if before & b == 0 {
            self.notify.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_watched_vbuckets_wake_and_dirty_bits_are_taken_once() {
        let w = ConnWake::new(1024);
        w.changed(VbId(5));
        assert!(w.take_dirty().is_empty(), "not watched");
        w.watch(VbId(5), true);
        w.watch(VbId(700), true);
        assert_eq!(
            w.take_dirty(),
            vec![VbId(5), VbId(700)],
            "watching marks dirty"
        );
        w.changed(VbId(700));
        assert_eq!(w.take_dirty(), vec![VbId(700)]);
        assert!(w.take_dirty().is_empty());
        w.watch(VbId(700), false);
        w.changed(VbId(700));
        assert!(w.take_dirty().is_empty());
    }
}
