//! `sluice bench durability` (issue 23): durable-write latency per level on a local cluster,
//! beside Redis `SET` and `SET` + `WAIT 1 0` on request.
//! - `args`        — `DurabilityArgs`, the command line;
//! - `row`         — what a row measures: the target and the write (level, or Redis command);
//! - `closed_loop` — a row's load: a few connections, one write outstanding each, bounded by
//!   time and count;
//! - `sluice`      — the local cluster and a smart client per loop, writing at a level;
//! - `redis`       — Redis primary + replica and a RESP connection per loop;
//! - `run`         — `run_durability`: runs, targets alternating, rows in turn;
//! - `report`      — medians, ratios to Redis, report.md, results.json and the chart;
//! - `error`       — `RunDurabilityError`, what `run_durability` fails with.

pub mod args;
pub mod closed_loop;
pub mod error;
pub mod redis;
pub mod report;
pub mod row;
pub mod run;
pub mod sluice;
