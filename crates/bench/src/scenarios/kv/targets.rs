//! Where the load goes. A [`Target`] is an address plus how to bootstrap a connection there,
//! and owns the process behind it when the bench started one.

use sluice_client::{Client, ConnectOptions, TlsConnect};
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tempfile::TempDir;

use crate::error::BenchError;
use crate::harness::process::{free_port, loopback_addr, ChildProcess};
use crate::scenarios::kv::args::{BucketTypeArg, KvArgs};

/// How long a started server gets to accept connections and serve its bucket.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

pub struct Target {
    /// "sluice" or "memcached": the row name in the report.
    pub name: &'static str,
    pub addr: SocketAddr,
    pub options: ConnectOptions,
    /// The admin address of a Sluice the bench started (where it makes collections).
    pub admin: Option<SocketAddr>,
    /// The server process and its data directory, when the bench started it.
    owned: Option<(ChildProcess, TempDir)>,
}

/// How the bench starts `sluice server`.
#[derive(Debug, Clone)]
pub struct ServerSpec {
    pub bucket: String,
    pub bucket_type: BucketTypeArg,
    pub memory_quota_mb: u64,
    /// The index service's block cache (`--index-memory-quota-mb`); `None`: the server's
    /// default.
    pub index_memory_quota_mb: Option<u64>,
    pub vbuckets: u16,
    pub username: String,
    pub password: String,
    /// Serve (and connect) over TLS with a certificate the bench makes.
    pub tls: bool,
}

impl Target {
    /// Stops the process the bench started, if any.
    pub async fn stop(self) -> Result<(), BenchError> {
        self.stop_saving_log(None).await
    }

    /// Stops the process the bench started, if any, and then copies its log to `save_to`
    /// (the log lives in the server's temporary directory, which goes away with it).
    pub async fn stop_saving_log(self, save_to: Option<&Path>) -> Result<(), BenchError> {
        if let Some((process, dir)) = self.owned {
            let log = process.log().to_path_buf();
            process.stop().await?;
            if let Some(dest) = save_to {
                std::fs::copy(&log, dest)?;
            }
            drop(dir);
        }
        Ok(())
    }

    /// The pid of the server the bench started.
    pub fn pid(&self) -> Option<u32> {
        self.owned.as_ref().and_then(|(p, _)| p.pid())
    }

    /// An error if the server the bench started has exited.
    pub fn check_running(&mut self) -> Result<(), BenchError> {
        match self.owned.as_mut() {
            Some((p, _)) => p.check_running(),
            None => Ok(()),
        }
    }
}

/// Sluice: the server at `--connect`, or one the bench starts from its own executable
/// (the `sluice` binary, whose `server` subcommand this is).
pub async fn sluice(args: &KvArgs) -> Result<Target, BenchError> {
    if let Some(addr) = &args.connect {
        return Ok(Target {
            name: "sluice",
            addr: loopback_addr(addr)?,
            options: ConnectOptions::sluice(
                &args.login.username,
                &args.login.password,
                &args.login.bucket,
            ),
            admin: None,
            owned: None,
        });
    }
    start_sluice(&ServerSpec {
        bucket: args.login.bucket.clone(),
        bucket_type: args.bucket_type,
        memory_quota_mb: args.memory_quota_mb,
        index_memory_quota_mb: None,
        vbuckets: args.vbuckets,
        username: args.login.username.clone(),
        password: args.login.password.clone(),
        tls: args.tls,
    })
    .await
}

/// Starts `sluice server` (this executable) on free loopback ports, in a temporary data
/// directory, and waits until a full bootstrap works.
pub async fn start_sluice(spec: &ServerSpec) -> Result<Target, BenchError> {
    let mut options = ConnectOptions::sluice(&spec.username, &spec.password, &spec.bucket);
    let dir = tempfile::Builder::new().prefix("sluice-bench-").tempdir()?;
    let data_dir = dir.path().join("data");
    std::fs::create_dir_all(&data_dir)?;
    let (kv_port, admin_port) = (free_port()?, free_port()?);
    let mut cmd = Command::new(std::env::current_exe()?);
    // Over TLS the load goes to the TLS KV port; the cleartext one stays for nothing else.
    let load_port = match spec.tls {
        true => {
            let certs = crate::harness::certs::make(dir.path())?;
            let tls_port = free_port()?;
            cmd.arg("server")
                .arg("--tls-cert")
                .arg(&certs.cert)
                .arg("--tls-key")
                .arg(&certs.key)
                .args(["--kv-tls-port", &tls_port.to_string()])
                .args(["--admin-tls-port", &free_port()?.to_string()]);
            options.tls = Some(Arc::new(TlsConnect::with_ca_file(&certs.ca, "127.0.0.1")?));
            tls_port
        }
        false => {
            cmd.arg("server");
            kv_port
        }
    };
    cmd.arg("--data-dir")
        .arg(&data_dir)
        .args(["--kv-port", &kv_port.to_string()])
        .args(["--admin-port", &admin_port.to_string()])
        .args(["--bucket-type", spec.bucket_type.as_str()])
        .args(["--memory-quota-mb", &spec.memory_quota_mb.to_string()])
        .args(["--vbuckets", &spec.vbuckets.to_string()])
        .args(["--bucket", &spec.bucket])
        .args(
            spec.index_memory_quota_mb
                .map(|mb| ["--index-memory-quota-mb".to_string(), mb.to_string()])
                .into_iter()
                .flatten(),
        )
        // Credentials through the environment the server reads, not argv (visible in `ps`).
        .env("SLUICE_USERNAME", &spec.username)
        .env("SLUICE_PASSWORD", &spec.password);
    let mut process = ChildProcess::spawn("sluice server", cmd, &dir.path().join("server.log"))?;
    let addr: SocketAddr = ([127, 0, 0, 1], load_port).into();
    process.wait_for_port(addr, READY_TIMEOUT).await?;
    // The port may open before the bucket is served: ready means a full bootstrap works.
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        process.check_running()?;
        match Client::connect(addr, options.clone()).await {
            Ok(_) => break,
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(last) => {
                return Err(BenchError::NeverServed {
                    waited: READY_TIMEOUT,
                    log: process.log().to_path_buf(),
                    last,
                })
            }
        }
    }
    Ok(Target {
        name: if spec.tls { "sluice (TLS)" } else { "sluice" },
        addr,
        options,
        admin: Some(([127, 0, 0, 1], admin_port).into()),
        owned: Some((process, dir)),
    })
}

/// An existing memcached (`--target-memcached`).
pub fn existing_memcached(addr: &str) -> Result<Target, BenchError> {
    Ok(Target {
        name: "memcached",
        addr: loopback_addr(addr)?,
        options: ConnectOptions::plain(),
        admin: None,
        owned: None,
    })
}

/// A memcached started like the baseline's: `-t 2 -m 2048 -c 1024 -U 0` on loopback.
pub async fn start_memcached(args: &KvArgs) -> Result<Target, BenchError> {
    start_memcached_tls(&args.memcached_bin, 2048, args.tls).await
}

/// memcached as the baselines run it (2 threads, 1024 connections), with `-m memory_mb`.
pub async fn start_memcached_with(bin: &Path, memory_mb: u64) -> Result<Target, BenchError> {
    start_memcached_tls(bin, memory_mb, false).await
}

/// [`start_memcached_with`], over TLS (`-Z`, with a certificate the bench makes) if `tls`.
async fn start_memcached_tls(bin: &Path, memory_mb: u64, tls: bool) -> Result<Target, BenchError> {
    let dir = tempfile::Builder::new()
        .prefix("sluice-bench-mc-")
        .tempdir()?;
    let port = free_port()?;
    let mut cmd = Command::new(bin);
    let mut options = ConnectOptions::plain();
    if tls {
        let certs = crate::harness::certs::make(dir.path())?;
        let pem = |p: &Path| p.to_string_lossy().into_owned();
        cmd.arg("-Z").args([
            "-o",
            &format!(
                "ssl_chain_cert={},ssl_key={}",
                pem(&certs.cert),
                pem(&certs.key)
            ),
        ]);
        options.tls = Some(Arc::new(TlsConnect::with_ca_file(&certs.ca, "127.0.0.1")?));
    }
    cmd.args(["-u", "root", "-l", "127.0.0.1", "-p", &port.to_string()])
        .args([
            "-t",
            "2",
            "-m",
            &memory_mb.to_string(),
            "-c",
            "1024",
            "-U",
            "0",
        ]);
    let mut process = ChildProcess::spawn("memcached", cmd, &dir.path().join("memcached.log"))?;
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    process.wait_for_port(addr, READY_TIMEOUT).await?;
    Ok(Target {
        name: if tls { "memcached (TLS)" } else { "memcached" },
        addr,
        options,
        admin: None,
        owned: Some((process, dir)),
    })
}
