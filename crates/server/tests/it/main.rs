//! Every integration test of this crate in one test binary (`cargo test -p sluice-server --test it`),
//! one module per former test file: each test binary links the crate and its dependencies
//! again, and CI builds them all. Filter by module: `--test it MODULE::`.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

mod common;

mod admin_auth;
mod cluster_agent;
mod cluster_encryption;
mod cluster_join;
mod cluster_map_push;
mod dcp;
mod document_api;
mod durability;
mod failover;
mod failover_promotion;
mod fencing;
mod internal_identity;
mod placement;
mod rebalance;
mod replication;
mod replication_stages;
mod tls;
mod users;
mod wire;
mod write_stall;
