//! `sluice bench parallel` (seed 004): clients × nodes, every client running the same
//! build-shaped list of operations.
//! - `args`   — `ParallelArgs`, the command line;
//! - `run`    — `run_parallel`: a cluster per node count, a warm-up build, cells;
//! - `build`  — one client's build as a list of operations (pure) and its documents;
//! - `client` — one client running its build, one request at a time;
//! - `report` — seed 004's table with our figures and the seed's beside;
//! - `error`  — `RunParallelError`, what `run_parallel` fails with.

pub mod args;
pub mod build;
pub mod client;
pub mod error;
pub mod report;
pub mod run;
