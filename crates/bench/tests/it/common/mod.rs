//! Test helpers: a real memcached, and a fake Sluice that speaks just enough of the protocol
//! for the bench (the real server is tested in its own crate).
#![allow(dead_code)] // each test file uses a different subset

pub mod fake_sluice;
/// Shared with the client crate's tests: one copy of the memcached launcher.
#[path = "../../../../client/tests/it/common/memcached.rs"]
pub mod memcached;

use clap::Parser;
use sluice_bench::KvArgs;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    kv: KvArgs,
}

/// Parses bench options as the CLI would.
pub fn parse(argv: &[&str]) -> KvArgs {
    let argv = std::iter::once("kv").chain(argv.iter().copied());
    Cli::try_parse_from(argv).unwrap().kv
}
