//! Every integration test of this crate in one test binary (`cargo test -p sluice-engine --test it`),
//! one module per former test file: each test binary links the crate and its dependencies
//! again, and CI builds them all. Filter by module: `--test it MODULE::`.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

mod common;

mod dgm;
mod disk_hints;
mod drop_vbucket;
mod dropped_collection;
mod flush_interval;
mod flusher_backlog;
mod flusher_visits;
mod seeded_uuids;
mod stream_source;
mod sync_write_warmup;
mod system_events;
mod unclean_restart;
mod write_failure;
