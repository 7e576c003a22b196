//! `sluice cluster up`: a local cluster of N node processes on 127.0.0.1, each with its own
//! ports and data directory, formed into one cluster and kept running until Ctrl-C.
//!
//! Node `i` lives in `DIR/node-i`, with KV on `base + 10·i` and admin HTTP on
//! `base + 10·i + 1`, and (unless `--no-tls`) the same over TLS on `+ 7` and `+ 8`, with
//! certificates from a cluster CA in `DIR/tls/` (`cluster_tls`). The first start of a directory creates the cluster on node 0, joins
//! the others to it (`--join`) and places the still empty bucket on all of them. A later run
//! on the same directory restarts the same nodes, on the same ports, with their data.
//! `DIR/cluster.json` lists each node's id, ports, addresses, data directory, pid and the
//! arguments it was started with (so a fault harness can restart a node it killed).
//!
//! `--proxied` is for fault testing: node `i` listens on 127.0.1.(10+i), connects to its
//! peers from that address, and advertises 127.0.0.(10+i), where a fault-injecting proxy
//! (`tests/interop/fault_proxy.py`) must already forward to it. The proxy then sees which
//! node every connection comes from, so it can cut a node off from its peers and not from
//! clients.

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use sluice_client::admin_http::{self, AdminAnswer};
use sluice_client::Credentials;
use sluice_cluster::{Service, Services};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// How long a node may take to answer `/health` after it was started.
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the nodes may take to stop after SIGTERM before they are killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);
const PORT_STRIDE: u16 = 10;
/// Node i's TLS KV and TLS admin ports: base + 10·i + these.
const KV_TLS_OFFSET: u16 = 7;
const ADMIN_TLS_OFFSET: u16 = 8;

#[derive(Subcommand)]
pub enum ClusterCommand {
    /// Start (or restart) a local cluster of node processes on 127.0.0.1 and keep it running
    /// until Ctrl-C, which stops every node cleanly.
    Up(UpArgs),
}

#[derive(Clone, Copy, ValueEnum)]
pub enum BucketTypeArg {
    Couchbase,
    Ephemeral,
}

#[derive(Args)]
pub struct UpArgs {
    /// Number of nodes.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=16))]
    pub nodes: u16,
    /// Replica copies per vbucket (0 to 3; at most nodes − 1 are filled).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=3))]
    pub replicas: u8,
    /// Where the nodes keep their data (`DIR/node-0`, ...) and `cluster.json`.
    #[arg(long, default_value = "./cluster-data")]
    pub data_dir: PathBuf,
    /// Node i serves KV on base + 10·i and admin HTTP on base + 10·i + 1.
    #[arg(long, default_value_t = 12000)]
    pub base_port: u16,
    #[arg(long, value_enum, default_value_t = BucketTypeArg::Couchbase)]
    pub bucket_type: BucketTypeArg,
    /// Memory quota of the bucket on each node, in MiB.
    #[arg(long, default_value_t = 256)]
    pub memory_quota_mb: u64,
    /// Each node's index block cache, in MiB (see `sluice server --help`).
    #[arg(long, default_value_t = sluice_server::INDEX_MEMORY_QUOTA_MB_DEFAULT)]
    pub index_memory_quota_mb: u64,
    /// Number of vbuckets (fixed for the life of the data directory).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub vbuckets: u16,
    /// Each node's `--auto-failover-timeout` (seconds; 0 = only manual failover; otherwise
    /// at least 2, see `sluice server --help`).
    #[arg(long, default_value_t = 120, value_name = "SECS",
          value_parser = crate::server_cmd::auto_failover_secs)]
    pub auto_failover_timeout: u64,
    /// For fault testing: node i listens on 127.0.1.(10+i) and advertises 127.0.0.(10+i),
    /// where a fault-injecting proxy that forwards to it must already listen (see the
    /// module docs and `tests/interop/fault_proxy.py`).
    #[arg(long)]
    pub proxied: bool,
    /// Serve no TLS ports. By default node i also serves KV over TLS on base + 10·i + 7 and
    /// admin HTTP over TLS on base + 10·i + 8, with certificates from a cluster CA made in
    /// `DIR/tls/` (clients trust `DIR/tls/ca.pem`).
    #[arg(long, conflicts_with_all = ["tls_cert", "tls_key", "tls_ca"])]
    pub no_tls: bool,
    /// Serve TLS with this certificate (PEM) on every node instead of the generated ones; it
    /// must name every node's advertised address.
    #[arg(long, requires_all = ["tls_key", "tls_ca"], value_name = "PEM")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, requires_all = ["tls_cert", "tls_ca"], value_name = "PEM")]
    pub tls_key: Option<PathBuf>,
    /// The CA that signed --tls-cert, which clients trust (PEM).
    #[arg(long, requires_all = ["tls_cert", "tls_key"], value_name = "PEM")]
    pub tls_ca: Option<PathBuf>,
    /// Each node's `--cluster-encryption`: by default (`control`) the members' Raft, joins
    /// and rebalance, failover and janitor calls go over TLS, verified against the cluster's
    /// CA; `all` sends their replication and rebalance streams over TLS too; `off` sends
    /// everything in cleartext. With --no-tls, always off.
    #[arg(long, value_enum, default_value = "control")]
    pub cluster_encryption: crate::server_cmd::EncryptionArg,
    /// The services of node N, from 0, as `N=LIST` with LIST as `sluice server --services`
    /// takes it (`kv,index,query`); repeat it for other nodes. A node not named runs every
    /// service. Node 0 creates the cluster and must run kv.
    #[arg(long = "services", value_name = "N=LIST", value_parser = parse_node_services)]
    pub services: Vec<(u16, Services)>,
    /// The cluster's administrator: every node is started with it (through its environment,
    /// not its command line), and this command calls the nodes as it.
    #[command(flatten)]
    pub login: crate::login_args::AdminLogin,
}

/// Where node `i` listens and what it advertises (see `UpArgs::proxied`).
#[derive(Clone)]
struct NodeHosts {
    bind: String,
    advertise: String,
}

impl NodeHosts {
    fn of(args: &UpArgs, i: u16) -> NodeHosts {
        if args.proxied {
            NodeHosts {
                bind: format!("127.0.1.{}", 10 + i),
                advertise: format!("127.0.0.{}", 10 + i),
            }
        } else {
            NodeHosts {
                bind: "127.0.0.1".into(),
                advertise: "127.0.0.1".into(),
            }
        }
    }
}

struct NodeProc {
    index: u16,
    dir: PathBuf,
    hosts: NodeHosts,
    /// The arguments after the binary's path, `--join` included if it was given.
    args: Vec<String>,
    kv_port: u16,
    admin_port: u16,
    /// Its TLS ports (KV, admin) and files, unless `--no-tls`.
    tls: Option<(u16, u16, crate::cluster_tls::NodeTls)>,
    /// The administrator the node was started with, which the admin calls are made as.
    who: Credentials,
    child: Child,
}

impl NodeProc {
    fn admin(&self) -> String {
        format!("{}:{}", self.hosts.advertise, self.admin_port)
    }

    /// Where a joiner calls this node: its TLS admin port when the cluster encrypts its
    /// control traffic (the joiner receives the cluster secret in the answer).
    fn member_addr(&self, encrypted: bool) -> String {
        match &self.tls {
            Some((_, admin_tls, _)) if encrypted => {
                format!("{}:{}", self.hosts.advertise, admin_tls)
            }
            _ => self.admin(),
        }
    }
}

/// Whether the nodes encrypt their control traffic (only when they serve TLS).
fn encrypted(args: &UpArgs) -> bool {
    !args.no_tls && args.cluster_encryption != crate::server_cmd::EncryptionArg::Off
}

pub fn run(cmd: ClusterCommand) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    match cmd {
        ClusterCommand::Up(args) => rt.block_on(up(args)),
    }
}

async fn up(args: UpArgs) -> anyhow::Result<()> {
    check_services(&args)?;
    let last = u32::from(args.base_port) + u32::from(PORT_STRIDE) * u32::from(args.nodes);
    anyhow::ensure!(
        last <= u32::from(u16::MAX),
        "--base-port leaves no room for {} nodes",
        args.nodes
    );
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("creating {}", args.data_dir.display()))?;
    let mut procs: Vec<NodeProc> = Vec::new();
    let started = start_all(&args, &mut procs).await;
    let outcome = match started {
        Ok(()) => serve(&mut procs).await,
        Err(e) => Err(e),
    };
    stop_all(&mut procs).await;
    outcome
}

async fn start_all(args: &UpArgs, procs: &mut Vec<NodeProc>) -> anyhow::Result<()> {
    for i in 0..args.nodes {
        let join = (i > 0).then(|| procs[0].member_addr(encrypted(args)));
        let p = spawn_node(args, i, join.as_deref())?;
        procs.push(p);
        let p = procs.last_mut().expect("just pushed");
        wait_healthy(p).await?;
        if i == 0 {
            wait_for_map(p).await?;
        }
        eprintln!(
            "node {i} up: KV {}:{}, admin {}",
            p.hosts.advertise,
            p.kv_port,
            p.admin()
        );
    }
    let view = admin_http::get(
        &procs[0].admin(),
        &procs[0].who,
        "/api/v1/cluster",
        HTTP_TIMEOUT,
    )
    .await?;
    let in_map = view.body["map_nodes"].as_array().map_or(0, |a| a.len());
    if in_map < usize::from(args.nodes) {
        place(&procs[0], args.nodes).await?;
        eprintln!("bucket placed on {} nodes", args.nodes);
    }
    write_cluster_json(args, procs).await
}

/// Places the (empty) bucket on all `nodes`, once node 0 has applied every admission.
async fn place(first: &NodeProc, nodes: u16) -> anyhow::Result<()> {
    let deadline = Instant::now() + START_TIMEOUT;
    let body = json!({ "nodes": nodes });
    loop {
        let path = "/api/v1/cluster/place";
        let placed =
            admin_http::post(&first.admin(), &first.who, path, &body, HTTP_TIMEOUT).await?;
        if placed.ok() {
            return Ok(());
        }
        // Not every admission is applied on node 0 yet.
        let waiting = placed.body["retry"].as_bool() == Some(true);
        anyhow::ensure!(
            waiting && Instant::now() < deadline,
            "placing the bucket on all nodes failed: {}",
            placed.body
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `--services N=LIST`, as clap reads it.
fn parse_node_services(arg: &str) -> Result<(u16, Services), String> {
    let (n, list) = arg
        .split_once('=')
        .ok_or_else(|| format!("{arg:?} is not N=LIST (e.g. 2=index,query)"))?;
    let n: u16 = n
        .trim()
        .parse()
        .map_err(|_| format!("{n:?} is not a node number"))?;
    let services = Services::parse(list).map_err(|e| e.to_string())?;
    Ok((n, services))
}

/// Each `--services` names a node of the cluster, once, and node 0 runs kv.
fn check_services(args: &UpArgs) -> anyhow::Result<()> {
    let mut named = std::collections::BTreeSet::new();
    for (n, _) in &args.services {
        anyhow::ensure!(
            *n < args.nodes,
            "--services {n}=...: the cluster has nodes 0 to {}",
            args.nodes - 1
        );
        anyhow::ensure!(named.insert(*n), "--services names node {n} twice");
    }
    let first = node_services(args, 0);
    anyhow::ensure!(
        first.has(Service::Kv),
        "node 0 creates the cluster and holds its bucket first, so it must run kv (it is given {first})"
    );
    Ok(())
}

/// What node `i` runs: its `--services`, or every service.
fn node_services(args: &UpArgs, i: u16) -> Services {
    args.services
        .iter()
        .find(|(n, _)| *n == i)
        .map_or(Services::ALL, |(_, s)| *s)
}

fn spawn_node(args: &UpArgs, i: u16, join: Option<&str>) -> anyhow::Result<NodeProc> {
    let dir = args.data_dir.join(format!("node-{i}"));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let kv_port = args.base_port + PORT_STRIDE * i;
    let admin_port = kv_port + 1;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("server.log"))?;
    let exe = std::env::current_exe().context("locating the sluice binary")?;
    let hosts = NodeHosts::of(args, i);
    let bucket_type = match args.bucket_type {
        BucketTypeArg::Couchbase => "couchbase",
        BucketTypeArg::Ephemeral => "ephemeral",
    };
    let mut argv: Vec<String> = vec![
        "server".into(),
        "--data-dir".into(),
        dir.to_string_lossy().into_owned(),
        "--kv-port".into(),
        kv_port.to_string(),
        "--admin-port".into(),
        admin_port.to_string(),
        "--replicas".into(),
        args.replicas.to_string(),
        "--memory-quota-mb".into(),
        args.memory_quota_mb.to_string(),
        "--index-memory-quota-mb".into(),
        args.index_memory_quota_mb.to_string(),
        "--vbuckets".into(),
        args.vbuckets.to_string(),
        "--auto-failover-timeout".into(),
        args.auto_failover_timeout.to_string(),
        "--bucket-type".into(),
        bucket_type.into(),
    ];
    let tls = match (args.no_tls, &args.tls_cert, &args.tls_key, &args.tls_ca) {
        (true, ..) => None,
        (false, Some(cert), Some(key), Some(ca)) => Some(crate::cluster_tls::given(cert, key, ca)?),
        (false, ..) => Some(crate::cluster_tls::for_node(
            &args.data_dir,
            i,
            &[hosts.advertise.as_str(), hosts.bind.as_str()],
        )?),
    };
    let tls = tls.map(|files| (kv_port + KV_TLS_OFFSET, kv_port + ADMIN_TLS_OFFSET, files));
    if let Some((kv_tls, admin_tls, files)) = &tls {
        argv.extend([
            "--tls-cert".into(),
            files.cert.to_string_lossy().into_owned(),
            "--tls-key".into(),
            files.key.to_string_lossy().into_owned(),
            "--kv-tls-port".into(),
            kv_tls.to_string(),
            "--admin-tls-port".into(),
            admin_tls.to_string(),
        ]);
        if encrypted(args) {
            let level = match args.cluster_encryption {
                crate::server_cmd::EncryptionArg::All => "all",
                _ => "control",
            };
            argv.extend([
                "--cluster-encryption".into(),
                level.into(),
                "--tls-ca".into(),
                files.ca.to_string_lossy().into_owned(),
            ]);
        }
    }
    if args.proxied {
        argv.extend([
            "--bind".into(),
            hosts.bind.clone(),
            "--source-ip".into(),
            hosts.bind.clone(),
            "--advertise-host".into(),
            hosts.advertise.clone(),
        ]);
    }
    // A directory that is already a member restarts without `--join`.
    if let Some(member) = join.filter(|_| !dir.join("node.json").exists()) {
        argv.extend(["--join".into(), member.to_owned()]);
    }
    let services = node_services(args, i);
    if !services.is_all() {
        argv.extend(["--services".into(), services.to_string()]);
    }
    let mut cmd = Command::new(exe);
    cmd.args(&argv)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        // Ctrl-C reaches the nodes through `stop_all`, one SIGTERM each, not the terminal.
        .process_group(0)
        .kill_on_drop(true)
        .env("SLUICE_USERNAME", &args.login.username)
        .env("SLUICE_PASSWORD", &args.login.password);
    let child = cmd.spawn().with_context(|| format!("starting node {i}"))?;
    Ok(NodeProc {
        index: i,
        dir,
        hosts,
        args: argv,
        kv_port,
        admin_port,
        tls,
        who: args.login.credentials(),
        child,
    })
}

async fn wait_healthy(p: &mut NodeProc) -> anyhow::Result<()> {
    wait_for(p, "/health", "become healthy", AdminAnswer::ok).await
}

/// Waits until node 0 shows the cluster's bucket and map. A healthy node answers before its
/// first start has defined the bucket and placed it (those go through Raft, and a busy machine
/// can take a while); deciding whether to place the bucket before then would act on a cluster
/// that is still being created.
async fn wait_for_map(p: &mut NodeProc) -> anyhow::Result<()> {
    wait_for(p, "/api/v1/cluster", "show the cluster's map", |view| {
        view.ok() && view.body["map_nodes"].is_array()
    })
    .await
}

/// Polls `path` on the node until `ready` accepts its answer; fails with the node's log if
/// the node exits or `START_TIMEOUT` passes first (`what` names the wait in that error).
async fn wait_for(
    p: &mut NodeProc,
    path: &str,
    what: &str,
    ready: impl Fn(&AdminAnswer) -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Some(status) = p.child.try_wait()? {
            anyhow::bail!(
                "node {} exited ({status}) while starting; its log:\n{}",
                p.index,
                log_tail(&p.dir)
            );
        }
        if let Ok(answer) = admin_http::get(&p.admin(), &p.who, path, HTTP_TIMEOUT).await {
            if ready(&answer) {
                return Ok(());
            }
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "node {} did not {what} within {START_TIMEOUT:?}; its log:\n{}",
            p.index,
            log_tail(&p.dir)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn log_tail(dir: &Path) -> String {
    tail_before_backtrace(&std::fs::read_to_string(dir.join("server.log")).unwrap_or_default())
}

/// The last 20 lines of a node's log, leaving out the stack backtrace its fatal error or
/// panic may end with (`RUST_BACKTRACE=1`): the backtrace alone fills the tail, and the line that says what
/// went wrong is above it.
fn tail_before_backtrace(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        // `Stack backtrace:` after an error, `stack backtrace:` after a panic.
        .take_while(|l| {
            !l.trim_start()
                .to_ascii_lowercase()
                .starts_with("stack backtrace:")
        })
        .collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

async fn write_cluster_json(args: &UpArgs, procs: &[NodeProc]) -> anyhow::Result<()> {
    let first = &procs[0];
    let view = admin_http::get(&first.admin(), &first.who, "/api/v1/cluster", HTTP_TIMEOUT).await?;
    let mut nodes = Vec::new();
    for p in procs {
        let me = admin_http::get(&p.admin(), &p.who, "/api/v1/cluster", HTTP_TIMEOUT).await?;
        nodes.push(json!({
            "id": me.body["this_node"],
            "host": p.hosts.advertise,
            "bind_host": p.hosts.bind,
            "kv_port": p.kv_port,
            "admin_port": p.admin_port,
            "kv_tls_port": p.tls.as_ref().map(|t| t.0),
            "admin_tls_port": p.tls.as_ref().map(|t| t.1),
            "data_dir": p.dir,
            "services": node_services(args, p.index).iter().map(Service::as_str).collect::<Vec<_>>(),
            "pid": p.child.id(),
            "args": p.args,
        }));
    }
    // Clients bootstrap from the data nodes.
    let data: Vec<&NodeProc> = procs
        .iter()
        .filter(|p| node_services(args, p.index).has(Service::Kv))
        .collect();
    let seeds: Vec<String> = data
        .iter()
        .map(|p| format!("{}:{}", p.hosts.advertise, p.kv_port))
        .collect();
    let tls_seeds: Vec<String> = data
        .iter()
        .filter_map(|p| Some(format!("{}:{}", p.hosts.advertise, p.tls.as_ref()?.0)))
        .collect();
    let ca = procs[0].tls.as_ref().map(|t| t.2.ca.clone());
    let doc = json!({
        "connection_string": format!("couchbase://{}", seeds.join(",")),
        "tls_connection_string": (!tls_seeds.is_empty())
            .then(|| format!("couchbases://{}", tls_seeds.join(","))),
        "ca": ca,
        "bucket": view.body["bucket"],
        "map_rev": view.body["map_rev"],
        "map_nodes": view.body["map_nodes"],
        "username": args.login.username,
        "nodes": nodes,
    });
    let path = args.data_dir.join("cluster.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&doc)?)
        .with_context(|| format!("writing {}", path.display()))?;
    println!("{}", doc["connection_string"].as_str().unwrap_or_default());
    eprintln!(
        "cluster of {} nodes up; {} lists them. Ctrl-C stops every node.",
        procs.len(),
        path.display()
    );
    if let (Some(ca), Some(tls)) = (&ca, doc["tls_connection_string"].as_str()) {
        eprintln!("over TLS: {tls} (trust {})", ca.display());
    }
    // The one-command default keeps working credentials in view (the admin port and every
    // KV login need them); cluster.json records the user name, never the password.
    eprintln!(
        "administrator: {} / {} (--username / --password, or SLUICE_USERNAME / SLUICE_PASSWORD)",
        args.login.username, args.login.password
    );
    Ok(())
}

/// Runs until Ctrl-C / SIGTERM. A node that exits by itself is reported and the others carry
/// on (the cluster fails it over if it is down long enough); once every node has exited
/// there is nothing left to run, which is an error.
async fn serve(procs: &mut [NodeProc]) -> anyhow::Result<()> {
    let stop = crate::server_cmd::stop_signal();
    tokio::pin!(stop);
    let mut exited = vec![false; procs.len()];
    loop {
        tokio::select! {
            _ = &mut stop => return Ok(()),
            _ = tokio::time::sleep(Duration::from_millis(500)) => {
                for (p, gone) in procs.iter_mut().zip(exited.iter_mut()) {
                    if *gone {
                        continue;
                    }
                    if let Some(status) = p.child.try_wait()? {
                        *gone = true;
                        eprintln!(
                            "node {} exited ({status}); the others carry on. Its log ends:\n{}",
                            p.index,
                            log_tail(&p.dir)
                        );
                    }
                }
                anyhow::ensure!(!exited.iter().all(|g| *g), "every node has exited");
            }
        }
    }
}

/// SIGTERM to every node still running (each flushes and stops cleanly), then waits.
async fn stop_all(procs: &mut [NodeProc]) {
    for p in procs.iter() {
        if let Some(pid) = p.child.id() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
    }
    let deadline = tokio::time::Instant::now() + STOP_TIMEOUT;
    for p in procs.iter_mut() {
        match tokio::time::timeout_at(deadline, p.child.wait()).await {
            Ok(Ok(status)) => eprintln!("node {} stopped ({status})", p.index),
            _ => {
                eprintln!("node {} did not stop in time: killing it", p.index);
                let _ = p.child.kill().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::tail_before_backtrace;

    #[test]
    fn a_fatal_errors_backtrace_is_left_out_of_the_tail() {
        let mut log = String::from("INFO starting\n");
        log.push_str("Error: binding the KV port 127.0.0.1:12000: Address already in use\n\n");
        log.push_str("Stack backtrace:\n");
        for i in 0..40 {
            log.push_str(&format!("  {i}: some::frame\n"));
        }
        let tail = tail_before_backtrace(&log);
        assert!(tail.contains("Address already in use"), "{tail}");
        assert!(!tail.contains("some::frame"), "{tail}");
        let panic = "thread 'main' panicked at src/x.rs:1:1:\nboom\nstack backtrace:\n  0: f\n";
        assert_eq!(
            tail_before_backtrace(panic),
            "thread 'main' panicked at src/x.rs:1:1:\nboom"
        );
    }

    #[test]
    fn without_a_backtrace_the_last_twenty_lines() {
        let log: String = (0..30).map(|i| format!("line {i}\n")).collect();
        let tail = tail_before_backtrace(&log);
        assert_eq!(tail.lines().count(), 20);
        assert!(
            tail.starts_with("line 10") && tail.ends_with("line 29"),
            "{tail}"
        );
    }
}
