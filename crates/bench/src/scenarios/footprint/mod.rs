//! `sluice bench footprint` (seed 003): single-node throughput and memory per item. It reuses
//! the in-process engine load, the KV prefill and timed runs, and the memcached target.
//! - `args`   — `FootprintArgs`, the command line;
//! - `run`    — `run_footprint`: a fresh bucket per row; store, memory, phases;
//! - `report` — the rows, memcached ratios, the seed's figures;
//! - `error`  — `RunFootprintError`, what `run_footprint` fails with.

pub mod args;
pub mod error;
pub mod report;
pub mod run;
