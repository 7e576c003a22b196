//! What the load runs against and how it is watched: the servers and clusters the bench
//! starts (or reaches), the peers beside them, and what is read from them around a phase.
//! - `login_args`    — the bucket and credentials every scenario logs in with;
//! - `process`       — child processes (own server, memcached): spawn, wait for the port,
//!   SIGTERM;
//! - `local_cluster` — `sluice cluster up` as a child process, for the cluster scenarios;
//!   `cluster_args` — the options that start it or name an existing one;
//! - `redis_peer`    — Redis primary + replica processes; `resp` — the RESP2 codec;
//! - `pg_peer`       — a PostgreSQL 15 server (initdb, postgres) in a temporary directory;
//! - `proc_stats`, `rss_sampler` — a process's CPU and RSS from /proc;
//! - `memory_stats`  — the bucket's quota use and residency;
//! - `node_probe`    — STAT figures summed over the nodes, and their CPU, around a phase;
//! - `settle`        — waiting for the flusher and for a quiet server.

pub mod certs;
pub mod cluster_args;
pub mod local_cluster;
pub mod login_args;
pub mod memory_stats;
pub mod node_probe;
pub mod pg_peer;
pub mod proc_stats;
pub mod process;
pub mod redis_peer;
pub mod resp;
pub mod rss_sampler;
pub mod settle;
