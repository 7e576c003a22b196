//! `sluice bench kv`: KV load against our server, an existing one, or in-process, with
//! memcached beside it on request.
//! - `args`    — `KvArgs`, the command line (embedded by the `sluice` CLI); its bucket type,
//!   peer and option parsers are shared with the other scenarios;
//! - `run`     — `run_kv`: starts what is needed, runs every target (alternating run by run),
//!   stops what it started and reports;
//! - `targets` — where the load goes: our own server, an existing one, memcached (also used
//!   by `dcp` and `footprint`);
//! - `report`  — results, medians, ratios, results.json, report.md, the stdout table;
//! - `collections` — `--collections N`: the collections the load spreads its keys over;
//! - `error`   — `RunKvError`, what `run_kv` fails with.

pub mod args;
mod collections;
pub mod error;
pub mod report;
pub mod run;
pub mod targets;
