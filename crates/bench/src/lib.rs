//! The load generators behind `sluice bench`: one scenario per subcommand.
//!
//! Layout (each folder's `mod.rs` says what lives in it):
//! - `scenarios/` — one folder per scenario, each with its `args`, `run` and `report`:
//!   `kv` ([`run_kv`]), `dcp` ([`run_dcp`]), `replication` ([`run_replication`], seeds
//!   000/001), `clients` ([`run_clients`], seed 002), `parallel` ([`run_parallel`], seed 004),
//!   `footprint` ([`run_footprint`], seed 003), `durability` ([`run_durability`], issue 23)
//!   and `query` ([`run_query`], issue 26: the query service beside PostgreSQL);
//! - `load/`      — the load itself: workload, open-loop pacer, one connection's loop, timed
//!   runs, prefill, latency, the in-process engine load;
//! - `harness/`   — what the load runs against and how it is watched: child processes (our
//!   server, memcached, Redis, `sluice cluster up`), the RESP codec, the login and cluster
//!   options, /proc and STAT readings, settling;
//! - `report/`    — tables, the progress bar, charts, the output directory (report.md,
//!   results.json, config.json) and `sluice bench rerun` ([`run_rerun`]);
//! - `error`      — what can go wrong below the top level; each scenario's `error` has what
//!   its `run_*` fails with (typed, naming the step, the lower error kept as the source).
//!
//! Feature `charts` (off here, on by default in the `sluice` binary): reports draw their charts
//! as PNG files with plotters. Without it plotters is not linked, and the reports say their
//! charts were not drawn.
#![deny(unsafe_code)]

mod error;
mod harness;
mod load;
mod report;
mod scenarios;

pub use error::BenchError;
pub use harness::login_args::BenchLogin;
pub use harness::redis_peer::RedisPersistence;
pub use report::rerun::{run_rerun, RerunArgs, RerunError};
pub use scenarios::clients::args::{ClientCase, ClientsArgs};
pub use scenarios::clients::error::RunClientsError;
pub use scenarios::clients::run::run_clients;
pub use scenarios::dcp::args::{DcpArgs, Scenario, Setup};
pub use scenarios::dcp::error::RunDcpError;
pub use scenarios::dcp::run::run_dcp;
pub use scenarios::durability::args::{DurabilityArgs, DurabilityPeer};
pub use scenarios::durability::error::RunDurabilityError;
pub use scenarios::durability::run::run_durability;
pub use scenarios::footprint::args::{FootprintArgs, Mode as FootprintMode};
pub use scenarios::footprint::error::RunFootprintError;
pub use scenarios::footprint::run::run_footprint;
pub use scenarios::kv::args::{BucketTypeArg, KvArgs, Peer};
pub use scenarios::kv::error::RunKvError;
pub use scenarios::kv::run::run_kv;
pub use scenarios::parallel::args::ParallelArgs;
pub use scenarios::parallel::error::RunParallelError;
pub use scenarios::parallel::run::run_parallel;
pub use scenarios::query::args::QueryArgs;
pub use scenarios::query::error::RunQueryError;
pub use scenarios::query::run::run_query;
pub use scenarios::replication::args::{ReplArgs, ReplPeer};
pub use scenarios::replication::error::RunReplicationError;
pub use scenarios::replication::run::run_replication;
