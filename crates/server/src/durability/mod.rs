//! SyncWrites on this node's active vbuckets: the runtime around `sluice_dcp::durability`'s
//! [`ActiveMonitor`], which decides; the engine holds the prepares and carries out each
//! commit and abort.
//!
//! ```text
//!   exec (durable write) ── bucket.store(.., durability) ──► prepare at seqno p
//!        │ track(vb, p, level, deadline) ─► monitor.add ─┐
//!   producer (DCP_SEQNO_ACKNOWLEDGED) ─► ack ─► monitor.ack ─┤  resolutions, in order
//!   waiter at its deadline / ticker ─► expire, tick ─────────┤  ─► bucket.commit / abort
//!   ticker: local persistence, chain changes, state ─────────┘  ─► the waiter's answer
//! ```
//!
//! One monitor per active vbucket, created by the first durable write or ack after the
//! vbucket became active here (under its failover-log uuid at that moment: a new branch
//! starts a new monitor, so acks from before a failover never vouch for the new history).
//! A vbucket that stops being active here drops its monitor: its writers are told the
//! outcome is unknown (the prepares stay in the engine, for whoever becomes active).
//!
//! Lock order: this registry, then a vbucket (through the engine). The engine never calls
//! back here.

mod registry;
mod ticker;
mod wait;

pub use registry::{DurabilityMonitor, TrackError, WriteOutcome};
pub use ticker::run as run_ticker;
pub use wait::{wait, wait_persisted, DurableWrite};
