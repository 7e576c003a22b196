//! The load generator behind `sluice bench kv`.
//!
//! Layout:
//! - `args`       — [`KvArgs`], the command line (embedded by the `sluice` CLI);
//! - `run`        — [`run_kv`]: starts what is needed, runs every target, reports;
//! - `targets`    — where the load goes: our own server, an existing one, memcached;
//! - `process`    — child processes (own server, memcached): spawn, wait for the port, SIGTERM;
//! - `workload`   — the key space, the value, the get/set mix and a tiny seeded RNG;
//! - `pacer`      — the open-loop schedule (sans-IO: instants in, instants out);
//! - `load`       — one connection's loop, closed or open;
//! - `measure`    — one timed run over all connections; `prefill` fills the key space first;
//! - `latency`    — hdrhistogram recording and the p50/p95/p99/max summary;
//! - `in_process` — the engine called directly from threads, no sockets;
//! - `progress`   — the stderr progress bar;
//! - `error`      — what can go wrong below the top level (typed; `run_kv` adds context);
//! - `report`, `table` — results, medians, ratios, results.json, report.md, the stdout table.
#![deny(unsafe_code)]

mod args;
mod error;
mod in_process;
mod latency;
mod load;
mod measure;
mod pacer;
mod prefill;
mod process;
mod progress;
mod report;
mod run;
mod table;
mod targets;
mod workload;

pub use args::{BucketTypeArg, KvArgs, Peer};
pub use run::run_kv;
