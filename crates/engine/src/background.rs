//! Scheduling of background threads. Persistence work (the flusher, and the storage engine's
//! own workers, which inherit the policy of the thread that starts them) runs as
//! `SCHED_BATCH`: it never preempts a connection thread when it wakes, so its bursts
//! (memtable flushes, compactions) queue behind request handling instead of stalling it.

/// Marks the calling thread (and threads it creates from now on) as batch work. Failure
/// only costs latency, so it is logged, not returned.
pub fn mark_current_thread_as_batch() {
    #[cfg(target_os = "linux")]
    {
        use thread_priority::{
            set_thread_priority_and_policy, thread_native_id, NormalThreadSchedulePolicy,
            ThreadPriority, ThreadSchedulePolicy,
        };
        if let Err(e) = set_thread_priority_and_policy(
            thread_native_id(),
            ThreadPriority::Min,
            ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Batch),
        ) {
            tracing::debug!(error = ?e, "could not lower a background thread's scheduling class");
        }
    }
}
