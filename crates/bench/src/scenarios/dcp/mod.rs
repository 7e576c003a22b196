//! `sluice bench dcp`: DCP drain, catch-up and write-rate measurements (it reuses the KV
//! prefill, load, targets and tables).
//! - `args`           — `DcpArgs`, the command line;
//! - `run`            — `run_dcp`: setups in turn, each a fresh server;
//! - `bucket_setup`   — one setup: start, prefill, settle (persisted, CPU quiet);
//! - `stream_targets` — where a drain ends (each vbucket's high seqno);
//! - `consumer`       — one DCP consumer from seqno 0 to the targets; `wire` — message sizes;
//!   `key_set` — which documents it received;
//! - `drain`, `catch_up`, `write_rate` — the three timed measurements;
//! - `report`         — medians, ratios, results.json, report.md; `tables` — its tables;
//! - `error`          — `RunDcpError`, what `run_dcp` fails with.

pub mod args;
pub mod bucket_setup;
pub mod catch_up;
pub mod consumer;
pub mod drain;
pub mod error;
pub mod key_set;
pub mod report;
pub mod run;
pub mod stream_targets;
pub mod tables;
pub mod wire;
pub mod write_rate;
