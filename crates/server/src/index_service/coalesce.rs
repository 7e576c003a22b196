//! Reads shared by the callers that wait for them, each caller answered only by a read
//! that started after it asked.
//!
//! A `request_plus` query must wait for seqnos read after it arrived: any earlier read
//! could miss a write its client already had acknowledged. Under load many queries arrive
//! while one read is in flight; each would otherwise make its own read of every vbucket's
//! seqno (a lock per vbucket on this node, a round trip to every other member, one at a
//! time on the member's kept connection). Here a caller that finds a read in flight waits
//! for the *next* one, which starts once the current one ends, and all callers that arrived
//! meanwhile share it. A caller never waits for more than the rest of one read and one
//! whole read.
//!
//! A reader whose future is dropped mid-read (its query cancelled) hands the turn on: the
//! callers waiting start another read, none is left waiting for a read nobody makes.

use parking_lot::Mutex;
use tokio::sync::Notify;

/// One kind of read, shared. `T` is what a read gives (cloned to each caller).
pub struct Coalescer<T> {
    state: Mutex<State<T>>,
    /// Woken when a read ends (done or abandoned).
    ended: Notify,
}

struct State<T> {
    /// Reads started so far; a read's number is its place in that count.
    started: u64,
    /// Whether a read is in flight (the one numbered `started`).
    running: bool,
    /// The newest read that ended with a result, and its number.
    last: Option<(u64, T)>,
}

impl<T: Clone> Default for Coalescer<T> {
    fn default() -> Self {
        Coalescer {
            state: Mutex::new(State {
                started: 0,
                running: false,
                last: None,
            }),
            ended: Notify::new(),
        }
    }
}

impl<T: Clone> Coalescer<T> {
    /// The result of a read that started after this call: `read`'s own, or that of a read
    /// another caller made meanwhile.
    pub async fn get<F, Fut>(&self, read: F) -> T
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = T>,
    {
        // The first read that may answer: the next to start.
        let wanted = self.state.lock().started + 1;
        loop {
            // Registered before the look, so a read ending in between still wakes it.
            let ended = self.ended.notified();
            let mine = {
                let mut st = self.state.lock();
                match &st.last {
                    Some((n, result)) if *n >= wanted => return result.clone(),
                    _ => {}
                }
                if st.running {
                    None
                } else {
                    st.started += 1;
                    st.running = true;
                    Some(st.started)
                }
            };
            let Some(number) = mine else {
                ended.await;
                continue;
            };
            debug_assert!(
                number >= wanted,
                "a read started now started after the call"
            );
            let turn = Turn { of: self };
            let result = read().await;
            turn.finish(number, result.clone());
            return result;
        }
    }
}

/// The turn of the caller making the read: ended with a result, or abandoned if dropped.
struct Turn<'a, T: Clone> {
    of: &'a Coalescer<T>,
}

impl<T: Clone> Turn<'_, T> {
    fn finish(self, number: u64, result: T) {
        {
            let mut st = self.of.state.lock();
            if st.last.as_ref().is_none_or(|(n, _)| *n < number) {
                st.last = Some((number, result));
            }
        }
        // Drop below marks the read ended and wakes the waiting callers.
    }
}

impl<T: Clone> Drop for Turn<'_, T> {
    fn drop(&mut self) {
        self.of.state.lock().running = false;
        self.of.ended.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    /// A read that records when it started (a shared clock of events) and returns that.
    async fn timed_read(clock: &AtomicU64, gate: &tokio::sync::Semaphore) -> u64 {
        let started = clock.fetch_add(1, Ordering::SeqCst);
        let _pass = gate.acquire().await.expect("the gate stays open");
        started
    }

    /// Polls `done` every millisecond for up to 10 s.
    async fn until(done: impl Fn() -> bool) {
        for _ in 0..10_000 {
            if done() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("not reached in 10 s");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_caller_gets_a_read_started_after_it_asked() {
        let c = Arc::new(Coalescer::<u64>::default());
        let clock = Arc::new(AtomicU64::new(0));
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let reads = Arc::new(AtomicU64::new(0));
        let entered = Arc::new(AtomicU64::new(0));
        let caller = || {
            // A caller notes the clock when it asks; the read answering it must have
            // started after that tick.
            let asked = clock.fetch_add(1, Ordering::SeqCst);
            let (c, clock, gate, reads, entered) = (
                c.clone(),
                clock.clone(),
                gate.clone(),
                reads.clone(),
                entered.clone(),
            );
            tokio::spawn(async move {
                entered.fetch_add(1, Ordering::SeqCst);
                let got = c
                    .get(|| async {
                        reads.fetch_add(1, Ordering::SeqCst);
                        timed_read(&clock, &gate).await
                    })
                    .await;
                (asked, got)
            })
        };
        // The first caller's read starts and is held at the gate...
        let mut callers = vec![caller()];
        until(|| reads.load(Ordering::SeqCst) == 1).await;
        // ...while 39 more ask. Its result is too old for them.
        callers.extend((0..39).map(|_| caller()));
        until(|| entered.load(Ordering::SeqCst) == 40).await;
        // A caller's first poll (where it asks) runs on from its increment without
        // yielding; give the last ones time to finish it.
        tokio::time::sleep(Duration::from_millis(50)).await;
        gate.add_permits(1000);
        for caller in callers {
            let (asked, got) = caller.await.unwrap();
            assert!(
                got > asked,
                "a read started at {got} answered a call made at {asked}"
            );
        }
        // The 39 share one read, made after the first ended.
        let n = reads.load(Ordering::SeqCst);
        assert_eq!(n, 2, "{n} reads for 40 callers");
    }

    #[tokio::test]
    async fn calls_one_after_another_each_read_again() {
        let c = Coalescer::<u64>::default();
        let reads = AtomicU64::new(0);
        for i in 1..=3 {
            let got = c
                .get(|| async { reads.fetch_add(1, Ordering::SeqCst) + 1 })
                .await;
            assert_eq!(got, i);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reader_that_goes_away_hands_the_turn_on() {
        let c = Arc::new(Coalescer::<&'static str>::default());
        let never = Arc::new(tokio::sync::Semaphore::new(0));
        // The first caller starts a read that never ends, and is then dropped.
        let first = {
            let (c, never) = (c.clone(), never.clone());
            tokio::spawn(async move {
                c.get(|| async move {
                    let _ = never.acquire().await;
                    "never"
                })
                .await
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        // The second waits behind it...
        let second = {
            let c = c.clone();
            tokio::spawn(async move { c.get(|| async { "second's own read" }).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            !second.is_finished(),
            "it waits while the first read is in flight"
        );
        // ...until the first goes away: then it makes its own read.
        first.abort();
        let got = tokio::time::timeout(Duration::from_secs(5), second)
            .await
            .expect("not left waiting")
            .unwrap();
        assert_eq!(got, "second's own read");
    }
}
