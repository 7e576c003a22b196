//! Durable writes (SyncWrites) on a vbucket's active node: when each is committed or aborted.
//!
//! A SyncWrite becomes a *prepare* with its own seqno, invisible to readers until it is
//! committed. Replicas acknowledge, cumulatively, how far they hold the vbucket: applied in
//! memory and persisted. A write is committed once a majority of the chain holds it at its
//! level, and aborted if its deadline passes first. Majority is `len / 2 + 1` of the chain,
//! empty slots included, with the active always one of the copies:
//!
//! | level                           | the active counts        | a replica counts once it has |
//! |---------------------------------|--------------------------|------------------------------|
//! | `Majority`                      | at once                  | applied the seqno            |
//! | `MajorityAndPersistOnMaster`    | once it persisted it     | applied the seqno            |
//! | `PersistToMajority`             | once it persisted it     | persisted the seqno          |
//!
//! Ordering: commits happen in prepare order (a satisfied write waits for every earlier one
//! to be resolved, so one event may commit a run of them); aborts at the deadline may happen
//! out of order, and may unblock later satisfied writes in the same step.
//!
//! Layout:
//! - `chain` — the chain's majority and whether its placed nodes can reach it;
//! - `active` — the active's monitor: events in, commits and aborts out, no I/O or clock.

pub mod active;
pub mod chain;

pub use active::{ActiveMonitor, AddError, Outcome, ReplicaAck, Resolution};
pub use chain::{Chain, Impossible};
