//! The load generators behind `sluice bench kv` and `sluice bench dcp`.
//!
//! Layout of `bench kv`:
//! - `args`       — [`KvArgs`], the command line (embedded by the `sluice` CLI);
//! - `run`        — [`run_kv`]: starts what is needed, runs every target, reports;
//! - `targets`    — where the load goes: our own server, an existing one, memcached;
//! - `process`    — child processes (own server, memcached): spawn, wait for the port, SIGTERM;
//! - `workload`   — the key space, the value, the get/set mix and a tiny seeded RNG;
//! - `pacer`      — the open-loop schedule (sans-IO: instants in, instants out);
//! - `load`       — one connection's loop, closed or open;
//! - `measure`    — one timed run over all connections; `prefill` fills the key space first;
//! - `latency`    — hdrhistogram recording and the p50/p95/p99/max summary;
//! - `in_process` — the engine called directly from threads, no sockets;
//! - `progress`   — the stderr progress bar;
//! - `error`      — what can go wrong below the top level (typed; `run_kv` adds context);
//! - `report`, `table` — results, medians, ratios, results.json, report.md, the stdout table;
//! - `connect`    — opening the load's connections; `stop` — ending a timed run early.
//!
//! Layout of `bench dcp` (it reuses the KV prefill, load, targets and tables):
//! - `dcp_args`       — [`DcpArgs`], the command line;
//! - `dcp_run`        — [`run_dcp`]: setups in turn, each a fresh server;
//! - `bucket_setup`   — one setup: start, prefill, settle (persisted, CPU quiet);
//! - `settle`         — waiting for the flusher and for a quiet server;
//! - `stream_targets` — where a drain ends (each vbucket's high seqno);
//! - `consumer`       — one DCP consumer from seqno 0 to the targets; `wire` — message sizes;
//!   `key_set` — which documents it received;
//! - `drain`, `catch_up`, `write_rate` — the three timed measurements;
//! - `proc_stats`, `rss_sampler` — the server's CPU and RSS from /proc; `memory_stats` — the
//!   bucket's quota use and residency;
//! - `dcp_report`     — medians, ratios, results.json, report.md; `dcp_tables` — its tables.
//!
//! Layout of `bench replication` (seeds 000/001; it reuses the pacer, latency and tables):
//! - `repl_args`    — [`ReplArgs`], the command line;
//! - `repl_run`     — [`run_replication`]: each target in turn, fresh, up the rate ladder;
//! - `local_cluster` — the local cluster (`sluice cluster up` as a child process), shared
//!   with `clients` and `parallel`;
//! - `repl_target`  — the targets behind one interface: `repl_sluice` (smart client,
//!   GET_REPLICA, STAT lag) and `repl_redis` (RESP, INFO replication lag);
//! - `redis_peer`   — Redis primary + replica processes; `resp` — the RESP2 codec;
//! - `repl_step`    — one rate: writers, latency sampler and lag monitor side by side;
//! - `repl_measure` — what a step measures and the lag/bytes arithmetic;
//! - `repl_report`  — medians, the lines (issue 4, ours, the seeds'), report.md, results.json.
//!
//! Layout of `bench clients` (seed 002):
//! - `clients_args`   — [`ClientsArgs`], the command line and its cases;
//! - `clients_run`    — [`run_clients`]: a cluster per case, warm-up, write and read phases;
//! - `clients_phase`  — one phase: users started over the ramp-up, each a fresh client;
//! - `clients_report` — JMeter's table, where the time goes, the seed beside us;
//! - `node_probe`     — STAT figures summed over the nodes, and their CPU, around a phase.
//!
//! Layout of `bench parallel` (seed 004):
//! - `parallel_args`   — [`ParallelArgs`], the command line;
//! - `parallel_run`    — [`run_parallel`]: a cluster per node count, a warm-up build, cells;
//! - `parallel_build`  — one client's build as a list of operations (pure) and its documents;
//! - `parallel_client` — one client running its build, one request at a time;
//! - `parallel_report` — seed 004's table with our figures and the seed's beside.
//!
//! Layout of `bench footprint` (seed 003; it reuses the in-process engine load, the KV
//! prefill and timed runs, and the memcached target):
//! - `footprint_args`   — [`FootprintArgs`], the command line;
//! - `footprint_run`    — [`run_footprint`]: a fresh bucket per row; store, memory, phases;
//! - `footprint_report` — the rows, memcached ratios, the seed's figures.
#![deny(unsafe_code)]

mod args;
mod bucket_setup;
mod catch_up;
mod chart;
mod chart_png;
mod clients_args;
mod clients_phase;
mod clients_report;
mod clients_run;
mod cluster_args;
mod connect;
mod consumer;
mod dcp_args;
mod dcp_report;
mod dcp_run;
mod dcp_tables;
mod drain;
mod error;
mod footprint_args;
mod footprint_report;
mod footprint_run;
mod in_process;
mod key_set;
mod latency;
mod load;
mod local_cluster;
mod login_args;
mod measure;
mod memory_stats;
mod node_probe;
mod pacer;
mod parallel_args;
mod parallel_build;
mod parallel_client;
mod parallel_report;
mod parallel_run;
mod prefill;
mod proc_stats;
mod process;
mod progress;
mod redis_peer;
mod repl_args;
mod repl_background;
mod repl_column;
mod repl_measure;
mod repl_redis;
mod repl_report;
mod repl_run;
mod repl_sluice;
mod repl_step;
mod repl_target;
mod report;
mod rerun;
mod resp;
mod rss_sampler;
mod run;
mod scenario_out;
mod settle;
mod stop;
mod stream_targets;
mod table;
mod targets;
mod wire;
mod workload;
mod write_rate;

pub use args::{BucketTypeArg, KvArgs, Peer};
pub use clients_args::{ClientCase, ClientsArgs};
pub use clients_run::run_clients;
pub use dcp_args::{DcpArgs, Scenario, Setup};
pub use dcp_run::run_dcp;
pub use footprint_args::{FootprintArgs, Mode as FootprintMode};
pub use footprint_run::run_footprint;
pub use login_args::BenchLogin;
pub use parallel_args::ParallelArgs;
pub use parallel_run::run_parallel;
pub use redis_peer::RedisPersistence;
pub use repl_args::{ReplArgs, ReplPeer};
pub use repl_run::run_replication;
pub use rerun::{run_rerun, RerunArgs};
pub use run::run_kv;
