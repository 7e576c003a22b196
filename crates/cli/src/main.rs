//! The `sluice` binary. Subcommands:
//! - `server` — run one node (`server_cmd`);
//! - `bucket` — the cluster's buckets: create, list, delete (`bucket_cmd`);
//! - `collection` — a bucket's scopes and collections: list, create, drop (`collection_cmd`);
//! - `cluster up` — a local cluster of node processes (`cluster_cmd`);
//! - `failover` — fail a node over by hand (`failover_cmd`);
//! - `kv` — get / set / delete one document through the smart client (`kv_cmd`);
//! - `rebalance` — move data onto joined nodes and off ejected ones (`rebalance_cmd`);
//! - `bench`  — load generators and scenarios (`sluice-bench`);
//! - `user`   — the cluster's users and their roles (`user_cmd`);
//! - `xdcr`   — replication to other clusters: remote references, replications, status (`xdcr_cmd`);
//! - `watch`  — follow a bucket's changes (DCP) as JSON lines (`watch_cmd`).

mod bucket_cmd;
mod cluster_cmd;
mod cluster_tls;
mod collection_cmd;
mod failover_cmd;
mod kv_cmd;
mod login_args;
mod rebalance_cmd;
mod server_cmd;
mod user_cmd;
mod watch_cmd;
mod xdcr_cmd;

use clap::{Parser, Subcommand};

/// jemalloc rather than glibc's malloc: see docs/architecture.md ("Memory"). Under many
/// concurrent DCP backfills glibc kept freed memory in per-thread arenas; jemalloc returns
/// it to the OS after a short decay.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read once at start. Streams read values at hundreds of MB/s and free
/// them as soon as they are sent; with the default 10 s decay the freed pages stayed resident
/// (RSS grew by ~30 MB/s during ten backfills). Freed pages go back to the OS after 250 ms,
/// from jemalloc's own background threads.
// SAFETY: jemalloc reads this symbol as a NUL-terminated C string; the array is 'static,
// immutable, NUL-terminated, and a `&[u8; N]` is a plain pointer.
#[allow(unsafe_code)]
#[export_name = "_rjem_malloc_conf"]
pub static MALLOC_CONF: &[u8; 59] = b"background_thread:true,dirty_decay_ms:250,muzzy_decay_ms:0\0";

#[derive(Parser)]
#[command(
    name = "sluice",
    version,
    about = "A replicated key-value store where every change is a stream"
)]
struct Cli {
    /// Log level or filter (error, warn, info, debug, trace, or a tracing filter such as
    /// `sluice_engine=debug`). Logs go to stderr.
    #[arg(long, global = true, env = "SLUICE_LOG", default_value = "info")]
    log: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one Sluice node: KV (Couchbase/memcached binary protocol) and admin HTTP.
    Server(server_cmd::ServerArgs),
    /// Local clusters: `cluster up` starts N nodes on 127.0.0.1 and forms one cluster.
    #[command(subcommand)]
    Cluster(cluster_cmd::ClusterCommand),
    /// Fail a node over: its replicas on other nodes become active, and it leaves the map.
    Failover(failover_cmd::FailoverArgs),
    /// One document through the smart client (routed by the cluster map): get, set (with an
    /// optional durability level) or delete.
    Kv(kv_cmd::KvArgs),
    /// Rebalance: spread the bucket over every node, taking joined nodes in and ejected ones
    /// out, moving vbuckets with their data (DCP takeover) while clients keep working.
    Rebalance(rebalance_cmd::RebalanceArgs),
    /// The cluster's users and their roles: set, list, delete.
    #[command(subcommand)]
    User(user_cmd::UserCommand),
    /// Cross-cluster replication: remote clusters, replications (create, pause, resume,
    /// delete) and their status.
    #[command(subcommand)]
    Xdcr(xdcr_cmd::XdcrCommand),
    /// The cluster's buckets: create, list, delete.
    #[command(subcommand)]
    Bucket(bucket_cmd::BucketCommand),
    /// A bucket's scopes and collections: list, create-scope, drop-scope, create, drop.
    #[command(subcommand)]
    Collection(collection_cmd::CollectionCommand),
    /// Benchmarks: load against Sluice (and peers side by side), with latency histograms.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Follow a bucket's changes (DCP): one JSON line per mutation, deletion or expiration
    /// on stdout, resumable from a position file.
    Watch(watch_cmd::WatchArgs),
}

#[derive(Subcommand)]
enum BenchCommand {
    /// KV load: get/set mix over the binary protocol, closed or open loop, optionally
    /// against memcached in the same run, or the engine in-process.
    Kv(sluice_bench::KvArgs),
    /// DCP: one consumer's drain rate against the node's write rate (in memory and larger
    /// than memory), and many consumers catching up from seqno 0 at once. Starts its own
    /// servers.
    Dcp(sluice_bench::DcpArgs),
    /// Replication (seeds 000/001): stepped open-loop set rates on a local 2-node cluster
    /// with 1 replica; replication latency, items remaining and bytes/s per rate, and the
    /// highest rate meeting each line. `--vs redis` runs Redis primary + replica the same way.
    Replication(sluice_bench::ReplArgs),
    /// Clients (seed 002): N users × M servers × ramp-up, each user a fresh smart client
    /// making one request; a write phase, then a read phase over the same keys, reported as
    /// JMeter's table (count, average, min, max, error %, throughput). Starts a local
    /// cluster of M nodes per case.
    Clients(sluice_bench::ClientsArgs),
    /// Parallel builds (seed 004): every client creates, reads, updates and deletes a tree of
    /// small documents, one request at a time; clients × nodes, reporting time to finish,
    /// average sum of client latency and CPU per node. Starts a local cluster per node count.
    Parallel(sluice_bench::ParallelArgs),
    /// Footprint (seed 003): update and GET ops/s and memory per item, in-process and over
    /// local sockets, ephemeral and couchbase buckets, small and large quotas; `--vs
    /// memcached` runs memcached beside the socket rows with the same memory limit.
    Footprint(sluice_bench::FootprintArgs),
    /// Durable writes (issue 23): write latency at each durability level on a local 3-node
    /// cluster with 1 replica; `--vs redis` adds Redis SET and SET + WAIT 1 0 beside it.
    Durability(sluice_bench::DurabilityArgs),
    /// Queries (issue 26): Sluice's index + query service beside PostgreSQL 15 on the same
    /// documents: point lookups, range pages, request_plus under writes, index freshness.
    Query(sluice_bench::QueryArgs),
    /// Runs a scenario again with the options an earlier run saved in DIR/config.json, into
    /// a new output directory.
    Rerun(sluice_bench::RerunArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // The storage engine's own INFO lines (one per flush/compaction) drown ours: keep its
    // warnings unless the user names it in the filter.
    let filter = if cli.log.contains("lsm_tree") || cli.log.contains("fjall") {
        cli.log.clone()
    } else {
        format!("{},lsm_tree=warn,fjall=warn", cli.log)
    };
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(filter)?)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    match cli.command {
        Command::Server(args) => server_cmd::run(args),
        Command::Cluster(cmd) => cluster_cmd::run(cmd),
        Command::Failover(args) => failover_cmd::run(args),
        Command::Kv(args) => {
            if !kv_cmd::run(args)? {
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Rebalance(args) => rebalance_cmd::run(args),
        Command::User(cmd) => user_cmd::run(cmd),
        Command::Xdcr(cmd) => xdcr_cmd::run(cmd),
        Command::Bucket(cmd) => bucket_cmd::run(cmd),
        Command::Collection(cmd) => collection_cmd::run(cmd),
        Command::Watch(args) => watch_cmd::run(args),
        Command::Bench(BenchCommand::Kv(args)) => bench(sluice_bench::run_kv(args)),
        Command::Bench(BenchCommand::Dcp(args)) => bench(sluice_bench::run_dcp(args)),
        Command::Bench(BenchCommand::Replication(args)) => {
            bench(sluice_bench::run_replication(args))
        }
        Command::Bench(BenchCommand::Clients(args)) => bench(sluice_bench::run_clients(args)),
        Command::Bench(BenchCommand::Parallel(args)) => bench(sluice_bench::run_parallel(args)),
        Command::Bench(BenchCommand::Footprint(args)) => bench(sluice_bench::run_footprint(args)),
        Command::Bench(BenchCommand::Durability(args)) => bench(sluice_bench::run_durability(args)),
        Command::Bench(BenchCommand::Query(args)) => bench(sluice_bench::run_query(args)),
        Command::Bench(BenchCommand::Rerun(args)) => bench(sluice_bench::run_rerun(args)),
    }
}

/// Runs a benchmark on a multi-threaded runtime of its own. Ctrl-C or SIGTERM drops the
/// run, and with it the servers it started (each stops when dropped): an interrupted bench
/// leaves no process behind. The bench's typed error becomes `anyhow`'s with its sources,
/// so the "Caused by" lines name every step.
fn bench<E>(run: impl std::future::Future<Output = Result<(), E>>) -> anyhow::Result<()>
where
    anyhow::Error: From<E>,
{
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(async {
            tokio::select! {
                done = run => Ok(done?),
                () = server_cmd::stop_signal() => {
                    Err(anyhow::anyhow!("interrupted; the processes it started are stopped"))
                }
            }
        })
}
