//! Scheduling of background threads. Persistence work (the flusher, and the storage engine's
//! own workers, which inherit the policy of the thread that starts them) runs as
//! `SCHED_BATCH`: it never preempts a connection thread when it wakes, so its bursts
//! (memtable flushes, compactions) queue behind request handling instead of stalling it.
//!
//! Batch work also runs at the lowest priority (nice 19), which keeps request latency low but
//! gives it almost no CPU while connection threads are busy. The flusher therefore raises
//! itself to an ordinary share ([`Share::Fair`]) while its backlog is large: on 2 cores a
//! stream of new keys was otherwise refused with temporary failures at 49 k sets/s, with the
//! flusher runnable but waiting for a core 90 % of the time.

/// Marks the calling thread (and threads it creates from now on) as batch work. Failure
/// only costs latency, so it is logged, not returned.
pub fn mark_current_thread_as_batch() {
    set_policy(true);
}

/// How much CPU a batch thread asks for when the cores are contended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share {
    /// Nice 19: what the connection threads leave over.
    Leftover,
    /// Nice 0: an equal share with the connection threads (still `SCHED_BATCH`, so it does not
    /// preempt them on wake-up).
    Fair,
}

/// Sets the calling batch thread's share (see [`Share`]).
pub fn set_current_batch_share(share: Share) {
    set_policy_and_nice(true, share == Share::Fair);
}

/// Runs `f` as batch work on a thread that is otherwise ordinary (a blocking-pool thread:
/// DCP backfill reads), then puts the thread back.
pub fn run_as_batch<T>(f: impl FnOnce() -> T) -> T {
    set_policy(true);
    let out = f();
    set_policy(false);
    out
}

fn set_policy(batch: bool) {
    set_policy_and_nice(batch, !batch);
}

fn set_policy_and_nice(batch: bool, nice_zero: bool) {
    #[cfg(target_os = "linux")]
    {
        use thread_priority::{
            set_thread_priority_and_policy, thread_native_id, NormalThreadSchedulePolicy,
            ThreadPriority, ThreadPriorityOsValue, ThreadSchedulePolicy,
        };
        let priority = if nice_zero {
            // Nice 0, an ordinary thread's (the blocking pool's threads start that way).
            ThreadPriority::Os(ThreadPriorityOsValue::default())
        } else {
            ThreadPriority::Min
        };
        let policy = if batch {
            NormalThreadSchedulePolicy::Batch
        } else {
            NormalThreadSchedulePolicy::Other
        };
        if let Err(e) = set_thread_priority_and_policy(
            thread_native_id(),
            priority,
            ThreadSchedulePolicy::Normal(policy),
        ) {
            tracing::debug!(error = ?e, "could not change a thread's scheduling class");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (batch, nice_zero);
}

#[cfg(test)]
#[cfg(target_os = "linux")]
mod tests {
    /// (nice, policy) of the calling thread, from /proc.
    fn nice_and_policy() -> (i64, u64) {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        // Fields after the command name (which may hold spaces) start at ") ".
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        // rest[0] is field 3 (state): nice is field 19, policy field 41.
        (f[19 - 3].parse().unwrap(), f[41 - 3].parse().unwrap())
    }

    #[test]
    fn batch_work_puts_the_thread_back_as_it_was() {
        std::thread::spawn(|| {
            let before = nice_and_policy();
            let during = super::run_as_batch(nice_and_policy);
            assert_eq!(during.1, 3, "SCHED_BATCH while the work runs");
            assert_eq!(nice_and_policy(), before, "back to normal afterwards");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_batch_thread_can_take_a_fair_share_and_give_it_back() {
        use super::{mark_current_thread_as_batch, set_current_batch_share, Share};
        std::thread::spawn(|| {
            mark_current_thread_as_batch();
            let lowest = nice_and_policy();
            set_current_batch_share(Share::Fair);
            assert_eq!(nice_and_policy(), (0, 3), "nice 0, still SCHED_BATCH");
            set_current_batch_share(Share::Leftover);
            assert_eq!(nice_and_policy(), lowest);
        })
        .join()
        .unwrap();
    }
}
