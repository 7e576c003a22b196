//! `sluice bench replication` (seeds 000/001; it reuses the pacer, latency and tables):
//! replication lag, bytes and latency under stepped set rates, beside Redis on request.
//! - `args`       — `ReplArgs`, the command line; `column` — what else reads the change
//!   streams meanwhile: `background` — external DCP clients, `indexes` — the views
//!   columns' real indexes and their query loop, `xdcr` — a second cluster replicated to;
//! - `values`     — the JSON documents every write carries;
//! - `run`        — `run_replication`: each target in turn, fresh, up the rate ladder;
//! - `target`     — the targets behind one interface: `sluice` (smart client, GET_REPLICA,
//!   STAT lag) and `redis` (RESP, INFO replication lag);
//! - `step`       — one rate: writers, latency sampler and lag monitor side by side;
//! - `measure`    — what a step measures and the lag/bytes arithmetic;
//! - `stages`     — `--breakdown`: the nodes' stage histograms over a step;
//! - `report`     — medians, the lines (issue 4, ours, the seeds'), report.md, results.json;
//! - `error`      — `RunReplicationError`, what `run_replication` fails with.

pub mod args;
pub mod background;
pub mod column;
pub mod durable;
pub mod error;
pub mod indexes;
pub mod measure;
pub mod redis;
pub mod report;
pub mod run;
pub mod sluice;
pub mod stages;
pub mod step;
pub mod target;
pub mod values;
pub mod xdcr;
