//! Which connection thread serves a new connection.
//!
//! Round-robin spreads connections evenly but splits every client thread's connections over
//! all connection threads, so each request crosses cores twice: the client's send wakes a
//! connection thread on another core, and the answer wakes the client back. Placing a
//! connection on the thread for the CPU its packets arrive on (`SO_INCOMING_CPU`: on loopback
//! the CPU the client sent from, on a NIC the CPU taking its receive queue's interrupts) keeps
//! one client thread's connections on one connection thread, which the kernel's scheduler
//! then keeps beside it. With memaslap's 2 threads × 25 connections on 2 cores this took
//! ephemeral 90 % get from 0.96× to 1.40× memcached's throughput (docs/benchmarks.md).
//!
//! A client that opens every connection from one thread and uses them from many (a pool)
//! would otherwise put them all on one connection thread; a thread already holding
//! [`IMBALANCE_MAX`] more connections than the least loaded one gets no more until the others
//! catch up. Placement happens once, at accept: a connection never moves between threads.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// How many more connections than the least loaded thread a thread may hold before a new
/// connection that would go to it by its CPU goes to the least loaded one instead. Client
/// threads started together do not connect in lock step: with a bound of 4, memaslap's
/// 2 × 25 connections came out 27/24 in 2 of 3 starts (part of the gain lost), with 16 they
/// came out 25/26 in every start.
pub const IMBALANCE_MAX: u64 = 16;

/// How connections are spread over the connection threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Placement {
    /// In turn, whatever the connection.
    RoundRobin,
    /// By the CPU its packets arrive on, within [`IMBALANCE_MAX`].
    #[default]
    IncomingCpu,
    /// As `IncomingCpu`, and each thread bound to one CPU (the scheduler may no longer move
    /// a connection thread off a core that something else keeps busy).
    Pinned,
}

impl Placement {
    pub fn as_str(self) -> &'static str {
        match self {
            Placement::RoundRobin => "round-robin",
            Placement::IncomingCpu => "incoming-cpu",
            Placement::Pinned => "pinned",
        }
    }
}

/// Picks a connection thread for each new connection, and counts each thread's connections.
#[derive(Debug)]
pub struct Placer {
    placement: Placement,
    /// The CPUs this process may run on, ascending; thread `i` belongs to `cpus[i % len]`.
    cpus: Vec<usize>,
    /// Open connections per thread.
    load: Vec<AtomicU64>,
    next: AtomicUsize,
}

impl Placer {
    /// A placer over `threads` connection threads (at least one).
    pub fn new(placement: Placement, threads: usize) -> Placer {
        Self::with_cpus(placement, threads.max(1), allowed_cpus())
    }

    fn with_cpus(placement: Placement, threads: usize, cpus: Vec<usize>) -> Placer {
        assert!(threads > 0, "at least one connection thread");
        Placer {
            placement,
            cpus,
            load: (0..threads).map(|_| AtomicU64::new(0)).collect(),
            next: AtomicUsize::new(0),
        }
    }

    pub fn placement(&self) -> Placement {
        self.placement
    }

    pub fn threads(&self) -> usize {
        self.load.len()
    }

    /// The CPU thread `i` is to be bound to, if any.
    pub fn pin_of(&self, i: usize) -> Option<usize> {
        (self.placement == Placement::Pinned && !self.cpus.is_empty())
            .then(|| self.cpus[i % self.cpus.len()])
    }

    /// Open connections of each thread.
    pub fn load(&self) -> Vec<u64> {
        self.load
            .iter()
            .map(|l| l.load(Ordering::Relaxed))
            .collect()
    }

    /// Places a connection whose packets arrive on `incoming_cpu` (None: unknown) and counts
    /// it on the thread returned; [`Placer::closed`] uncounts it.
    pub fn place(&self, incoming_cpu: Option<usize>) -> usize {
        let load = self.load();
        let preferred = match self.placement {
            Placement::RoundRobin => None,
            Placement::IncomingCpu | Placement::Pinned => {
                incoming_cpu.and_then(|cpu| thread_of_cpu(&self.cpus, load.len(), cpu))
            }
        };
        let i = choose(&load, preferred, || {
            self.next.fetch_add(1, Ordering::Relaxed)
        });
        self.load[i].fetch_add(1, Ordering::Relaxed);
        i
    }

    /// A connection of thread `i` closed.
    pub fn closed(&self, i: usize) {
        let was = self.load[i].fetch_sub(1, Ordering::Relaxed);
        debug_assert!(
            was > 0,
            "thread {i} closed more connections than it was given"
        );
    }
}

/// The thread for a new connection: `preferred` unless it holds [`IMBALANCE_MAX`] more than
/// the least loaded thread (then that one); with no preference, the next in turn.
fn choose(load: &[u64], preferred: Option<usize>, next_in_turn: impl FnOnce() -> usize) -> usize {
    let Some(p) = preferred else {
        return next_in_turn() % load.len();
    };
    let (least, least_load) = load
        .iter()
        .copied()
        .enumerate()
        .min_by_key(|&(_, l)| l)
        .expect("at least one thread");
    if load[p] >= least_load + IMBALANCE_MAX {
        least
    } else {
        p
    }
}

/// Thread for `cpu` when thread `i` belongs to `cpus[i % cpus.len()]`: the first thread of
/// that CPU (None when `cpu` is not one this process may use).
fn thread_of_cpu(cpus: &[usize], threads: usize, cpu: usize) -> Option<usize> {
    let pos = cpus.iter().position(|&c| c == cpu)?;
    Some(pos % threads)
}

/// The CPUs the process may run on (empty if unknown).
fn allowed_cpus() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    {
        use nix::sched::{sched_getaffinity, CpuSet};
        use nix::unistd::Pid;
        if let Ok(set) = sched_getaffinity(Pid::from_raw(0)) {
            return (0..CpuSet::count())
                .filter(|&c| set.is_set(c).unwrap_or(false))
                .collect();
        }
    }
    Vec::new()
}

/// Binds the calling thread to `cpu`. Failure only costs locality, so it is logged.
pub fn pin_current_thread(cpu: usize) {
    #[cfg(target_os = "linux")]
    {
        use nix::sched::{sched_setaffinity, CpuSet};
        use nix::unistd::Pid;
        let mut set = CpuSet::new();
        let pinned = set
            .set(cpu)
            .and_then(|()| sched_setaffinity(Pid::from_raw(0), &set));
        if let Err(e) = pinned {
            tracing::warn!(cpu, error = %e, "could not bind a connection thread to its CPU");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cpu;
}

/// The CPU a socket's packets arrive on (`SO_INCOMING_CPU`), if the kernel says.
pub fn incoming_cpu(stream: &std::net::TcpStream) -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        socket2::SockRef::from(stream).cpu_affinity().ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = stream;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_maps_to_the_thread_it_belongs_to() {
        let cpus = [0, 1, 4, 5];
        assert_eq!(thread_of_cpu(&cpus, 4, 4), Some(2));
        assert_eq!(thread_of_cpu(&cpus, 2, 4), Some(0), "fewer threads: wraps");
        assert_eq!(thread_of_cpu(&cpus, 4, 3), None, "not ours");
    }

    #[test]
    fn the_preferred_thread_wins_until_it_is_too_far_ahead() {
        let never = || unreachable!("no turn taken when a thread is preferred");
        assert_eq!(choose(&[0, 0], Some(1), never), 1);
        let (a, b) = (3, 3 + IMBALANCE_MAX);
        assert_eq!(
            choose(&[a, b - 1], Some(1), never),
            1,
            "less than the bound ahead"
        );
        assert_eq!(
            choose(&[a, b], Some(1), never),
            0,
            "the bound ahead: the least loaded"
        );
        assert_eq!(choose(&[5, 1, 1 + IMBALANCE_MAX], Some(2), never), 1);
        assert_eq!(choose(&[5, 5], None, || 3), 1, "no preference: in turn");
    }

    #[test]
    fn one_connecting_cpu_still_uses_every_thread() {
        let p = Placer::with_cpus(Placement::IncomingCpu, 2, vec![0, 1]);
        let n = 4 * IMBALANCE_MAX;
        for _ in 0..n {
            p.place(Some(0));
        }
        let [a, b] = p.load()[..] else { panic!() };
        assert_eq!(a + b, n);
        assert!(a.abs_diff(b) <= IMBALANCE_MAX, "{a} vs {b}");
        assert!(
            b >= (n - IMBALANCE_MAX) / 2,
            "{b} of {n} on the other thread"
        );
    }

    #[test]
    fn connections_from_two_cpus_stay_apart_and_closing_uncounts() {
        let p = Placer::with_cpus(Placement::IncomingCpu, 2, vec![0, 1]);
        for _ in 0..25 {
            assert_eq!(p.place(Some(0)), 0);
            assert_eq!(p.place(Some(1)), 1);
        }
        assert_eq!(p.load(), [25, 25]);
        p.closed(1);
        assert_eq!(p.load(), [25, 24]);
        assert_eq!(p.place(Some(7)), 0, "an unknown CPU: in turn");
        assert_eq!(p.place(None), 1);
    }

    #[test]
    fn round_robin_ignores_the_cpu_and_only_pinned_pins() {
        let rr = Placer::with_cpus(Placement::RoundRobin, 3, vec![0, 1]);
        let picks: Vec<usize> = (0..6).map(|_| rr.place(Some(0))).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
        assert_eq!(rr.pin_of(0), None);
        let pinned = Placer::with_cpus(Placement::Pinned, 3, vec![2, 5]);
        assert_eq!(
            (0..3).map(|i| pinned.pin_of(i)).collect::<Vec<_>>(),
            [Some(2), Some(5), Some(2)]
        );
        assert_eq!(pinned.place(Some(5)), 1);
    }
}
