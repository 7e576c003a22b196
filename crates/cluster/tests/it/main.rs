//! Every integration test of this crate in one test binary (`cargo test -p sluice-cluster --test it`),
//! one module per former test file: each test binary links the crate and its dependencies
//! again, and CI builds them all. Filter by module: `--test it MODULE::`.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

mod common;

mod failover;
mod golden;
mod placement;
mod rebalance;
