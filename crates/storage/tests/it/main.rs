//! Every integration test of this crate in one test binary (`cargo test -p sluice-storage --test it`),
//! one module per former test file: each test binary links the crate and its dependencies
//! again, and CI builds them all. Filter by module: `--test it MODULE::`.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

mod common;

mod clean_shutdown;
mod codec_garbage;
mod concurrent_get;
mod keys_with_prefix;
mod on_disk_hints;
mod pending_namespace;
mod poison;
mod purge;
mod reopen;
mod reset_vb;
mod rewrite;
mod roundtrip;
mod snapshot_concurrent;
mod snapshot_isolation;
mod snapshot_stress;
mod throughput;
