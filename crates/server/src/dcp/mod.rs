//! DCP on the server: producer connections that stream a bucket's vbuckets to clients.
//!
//! - `registry` — every open DCP connection by name (a reused name kicks the old one off),
//!   with the statistics STAT `dcp` / `dcpagg` and `/metrics` report;
//! - `wake`     — the engine's change listener for one connection;
//! - `producer` — the connection loop: client frames in, stream messages out, backfills,
//!   cursors, flow control and noops. The decisions are `sluice_dcp`'s; this is the I/O.
//! - `open`     — DCP_OPEN on an ordinary connection, which then becomes a producer;
//! - `replication` — the consumer side: follow another node's vbuckets into local replicas
//!   (the I/O around `sluice_dcp::passive`, which decides retries, rollbacks and acks), and
//!   `replication/apply` puts each change into the replica vbucket;
//! - `replication_stats` — what each feed applied, and its replication latency;
//! - `stages` — where a replicated write's time goes, stage by stage (both sides).

pub mod open;
pub mod producer;
pub mod registry;
pub mod replication;
pub mod replication_stats;
pub mod stages;
pub mod wake;

pub use registry::DcpRegistry;
