//! `sluice bench query` (issue 26's performance section): Sluice's index + query service
//! beside PostgreSQL 15 on the same ~1 KiB JSON documents, the same machine, the same run.
//! - `args`        — `QueryArgs`, the command line;
//! - `docs`        — the data set: document `i` from the seed and `i` alone;
//! - `kv_sets`     — pipelined KV sets (Sluice's load and writer batches);
//! - `n1ql`        — a kept-alive HTTP client of `POST /query/service`;
//! - `sluice_side` — the started server, its load, its indexes, its clients and writers;
//! - `pg_side`     — PostgreSQL's table, COPY load, indexes, clients and writers (the
//!   server itself: `harness::pg_peer`);
//! - `closed_loop` — a query phase: C clients, one query outstanding each;
//! - `writer`      — the background writer at a fixed rate;
//! - `freshness`   — the ack-to-visible prober (Sluice);
//! - `run`         — `run_query`: setup, runs alternating the systems, the report;
//! - `report`      — medians, ratios, report.md and results.json;
//! - `error`       — `RunQueryError`, what `run_query` fails with.

pub mod args;
pub mod closed_loop;
pub mod docs;
pub mod error;
pub mod freshness;
pub mod kv_sets;
pub mod n1ql;
pub mod pg_side;
pub mod report;
pub mod run;
pub mod sluice_side;
pub mod writer;
