//! `sluice bench clients` (seed 002): many short-lived users, each a fresh client making one
//! request, started over a ramp-up.
//! - `args`   — `ClientsArgs`, the command line and its cases;
//! - `run`    — `run_clients`: a cluster per case, warm-up, write and read phases;
//! - `phase`  — one phase: users started over the ramp-up, each a fresh client;
//! - `report` — JMeter's table, where the time goes, the seed beside us;
//! - `error`  — `RunClientsError`, what `run_clients` fails with.

pub mod args;
pub mod error;
pub mod phase;
pub mod report;
pub mod run;
