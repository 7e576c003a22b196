//! `sluice xdcr …`: cross-cluster replication through any member's admin port: remote
//! cluster references (`remote add|list|remove`), replications (`create`, `pause`,
//! `resume`, `settings`, `delete`) and their progress (`status`), over the Couchbase-shaped REST of
//! the manager's `xdcr::routes`.

use crate::login_args::{AdminTarget, NamedTarget};
use anyhow::Context;
use clap::{Args, Subcommand};
use sluice_client::admin_http::{self, Method};
use std::time::Duration;

const HTTP_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Subcommand)]
pub enum XdcrCommand {
    /// Remote cluster references: add, list, remove.
    #[command(subcommand)]
    Remote(RemoteCommand),
    /// Replicate one of this cluster's buckets to a bucket of a remote cluster.
    Create(CreateArgs),
    /// Pause a replication (its checkpoints are kept).
    Pause(NamedTarget),
    /// Resume a paused replication from its checkpoints.
    Resume(NamedTarget),
    /// Show a replication's settings, changing those given first (the pipelines restart
    /// from their checkpoints; a new --filter re-streams from zero unless --skip-restream).
    Settings(SettingsArgs),
    /// Delete a replication (and its checkpoints).
    Delete(NamedTarget),
    /// Each replication's state and figures, summed over the cluster's nodes.
    Status(AdminTarget),
}

#[derive(Subcommand)]
pub enum RemoteCommand {
    /// Add a reference to another cluster; it is checked against the remote first.
    Add(RemoteArgs),
    /// List the references (never their passwords).
    List(AdminTarget),
    /// Remove a reference no replication uses.
    Remove(NamedTarget),
}

#[derive(Args)]
pub struct RemoteArgs {
    /// The reference's name.
    pub name: String,
    /// `host:port` of any node's admin port on the remote cluster (port 8091 if omitted;
    /// with `--ca-cert`, its TLS admin port, 18091 if omitted).
    #[arg(long)]
    pub hostname: String,
    /// The remote cluster's CA certificate (a PEM file): the remote is then reached over
    /// TLS only, its certificates verified against it (Couchbase's full encryption).
    #[arg(long, value_name = "PEM")]
    pub ca_cert: Option<std::path::PathBuf>,
    /// The user the pipelines log in to the remote as.
    #[arg(long)]
    pub remote_username: String,
    /// Its password (env SLUICE_REMOTE_PASSWORD).
    #[arg(long, env = "SLUICE_REMOTE_PASSWORD", hide_env_values = true)]
    pub remote_password: String,
    #[command(flatten)]
    pub common: AdminTarget,
}

#[derive(Args)]
pub struct CreateArgs {
    /// This cluster's bucket to replicate.
    #[arg(long)]
    pub from_bucket: String,
    /// The remote cluster reference's name.
    #[arg(long)]
    pub to_cluster: String,
    /// The remote cluster's bucket to write to; it must resolve conflicts as the source does.
    #[arg(long)]
    pub to_bucket: String,
    /// Only the documents this filter accepts: an XDCR filtering expression
    /// (`type = "hotel" AND REGEXP_CONTAINS(META().id, "^h")`), or a regular expression on
    /// the key (`^order::`). It cannot be changed later.
    #[arg(long)]
    pub filter: Option<String>,
    /// Create it paused.
    #[arg(long)]
    pub paused: bool,
    #[command(flatten)]
    pub settings: SettingsFlags,
    #[command(flatten)]
    pub common: AdminTarget,
}

/// The settings a replication can be created with and changed to (Couchbase's
/// `filterDeletion`, `filterExpiration`, `filterBypassExpiry`,
/// `optimisticReplicationThreshold`). A flag alone means true.
#[derive(Args)]
pub struct SettingsFlags {
    /// Do not replicate deletions.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub filter_deletion: Option<bool>,
    /// Do not replicate expirations.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub filter_expiration: Option<bool>,
    /// Replicate documents without their expiry.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub bypass_expiry: Option<bool>,
    /// Documents larger than this many bytes are checked against the target with GET_META
    /// before they are sent (default 256).
    #[arg(long, value_name = "BYTES")]
    pub optimistic_threshold: Option<u32>,
}

impl SettingsFlags {
    /// The form fields of the flags given.
    fn form(&self) -> Vec<(&'static str, String)> {
        let mut form = Vec::new();
        let flags = [
            ("filterDeletion", self.filter_deletion),
            ("filterExpiration", self.filter_expiration),
            ("filterBypassExpiry", self.bypass_expiry),
        ];
        for (key, value) in flags {
            if let Some(v) = value {
                form.push((key, v.to_string()));
            }
        }
        if let Some(t) = self.optimistic_threshold {
            form.push(("optimisticReplicationThreshold", t.to_string()));
        }
        form
    }
}

#[derive(Args)]
pub struct SettingsArgs {
    /// The replication's id (`REMOTE_UUID/FROM_BUCKET/TO_BUCKET`).
    pub name: String,
    /// A new filter expression ("" for none). The replication then streams every vbucket
    /// again from zero, so what the new filter lets through reaches the target.
    #[arg(long)]
    pub filter: Option<String>,
    /// With --filter: go on from the checkpoints instead; the new filter meets later
    /// changes only (Couchbase's filterSkipRestream).
    #[arg(long, requires = "filter")]
    pub skip_restream: bool,
    #[command(flatten)]
    pub settings: SettingsFlags,
    #[command(flatten)]
    pub common: AdminTarget,
}

pub fn run(cmd: XdcrCommand) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        match cmd {
            XdcrCommand::Remote(RemoteCommand::Add(a)) => {
                let ca =
                    match &a.ca_cert {
                        Some(f) => Some(std::fs::read_to_string(f).with_context(|| {
                            format!("reading the CA certificate {}", f.display())
                        })?),
                        None => None,
                    };
                let mut form = vec![
                    ("name", a.name.as_str()),
                    ("hostname", a.hostname.as_str()),
                    ("username", a.remote_username.as_str()),
                    ("password", a.remote_password.as_str()),
                ];
                if let Some(pem) = &ca {
                    form.extend([("demandEncryption", "1"), ("certificate", pem.as_str())]);
                }
                let path = "/pools/default/remoteClusters";
                let r = a
                    .common
                    .send(Method::POST, path, &form, HTTP_TIMEOUT)
                    .await?;
                println!("remote {} added: cluster {}", a.name, text(&r["uuid"]));
            }
            XdcrCommand::Remote(RemoteCommand::List(c)) => {
                let path = "/pools/default/remoteClusters";
                let list = c.send(Method::GET, path, &[], HTTP_TIMEOUT).await?;
                for r in list.as_array().into_iter().flatten() {
                    println!(
                        "{}\t{}\tuser {}\tcluster {}\tencryption {}",
                        text(&r["name"]),
                        text(&r["hostname"]),
                        text(&r["username"]),
                        text(&r["uuid"]),
                        text(&r["secureType"])
                    );
                }
            }
            XdcrCommand::Remote(RemoteCommand::Remove(a)) => {
                let path = format!(
                    "/pools/default/remoteClusters/{}",
                    admin_http::percent_encode(&a.name)
                );
                a.common
                    .send(Method::DELETE, &path, &[], HTTP_TIMEOUT)
                    .await?;
                println!("remote {} removed", a.name);
            }
            XdcrCommand::Create(a) => {
                let mut form = vec![
                    ("fromBucket", a.from_bucket.as_str()),
                    ("toCluster", a.to_cluster.as_str()),
                    ("toBucket", a.to_bucket.as_str()),
                    ("replicationType", "continuous"),
                ];
                if let Some(f) = &a.filter {
                    form.push(("filterExpression", f.as_str()));
                }
                if a.paused {
                    form.push(("pauseRequested", "true"));
                }
                let settings = a.settings.form();
                form.extend(settings.iter().map(|(k, v)| (*k, v.as_str())));
                let path = "/controller/createReplication";
                let r = a
                    .common
                    .send(Method::POST, path, &form, HTTP_TIMEOUT)
                    .await?;
                println!("{}", text(&r["id"]));
            }
            XdcrCommand::Pause(a) => set_paused(&a, true).await?,
            XdcrCommand::Resume(a) => set_paused(&a, false).await?,
            XdcrCommand::Settings(a) => {
                let path = format!(
                    "/settings/replications/{}",
                    admin_http::percent_encode(&a.name)
                );
                let settings = a.settings.form();
                let mut form: Vec<(&str, &str)> =
                    settings.iter().map(|(k, v)| (*k, v.as_str())).collect();
                if let Some(f) = &a.filter {
                    form.push(("filterExpression", f.as_str()));
                    if a.skip_restream {
                        form.push(("filterSkipRestream", "true"));
                    }
                }
                let method = if form.is_empty() {
                    Method::GET
                } else {
                    Method::POST
                };
                let r = a.common.send(method, &path, &form, HTTP_TIMEOUT).await?;
                println!("{}", serde_json::to_string_pretty(&r)?);
            }
            XdcrCommand::Delete(a) => {
                let path = format!(
                    "/controller/cancelXDCR/{}",
                    admin_http::percent_encode(&a.name)
                );
                a.common
                    .send(Method::DELETE, &path, &[], HTTP_TIMEOUT)
                    .await?;
                println!("replication {} deleted", a.name);
            }
            XdcrCommand::Status(c) => {
                let tasks = c
                    .send(Method::GET, "/pools/default/tasks", &[], HTTP_TIMEOUT)
                    .await?;
                for t in tasks.as_array().into_iter().flatten() {
                    if t["type"] != "xdcr" {
                        continue;
                    }
                    print_status(t);
                }
            }
        }
        Ok(())
    })
}

/// Pauses or resumes replication `a.name`.
async fn set_paused(a: &NamedTarget, paused: bool) -> anyhow::Result<()> {
    let path = format!(
        "/settings/replications/{}",
        admin_http::percent_encode(&a.name)
    );
    let word = if paused { "true" } else { "false" };
    let form = [("pauseRequested", word)];
    a.common
        .send(Method::POST, &path, &form, HTTP_TIMEOUT)
        .await?;
    let done = if paused { "paused" } else { "resumed" };
    println!("replication {} {done}", a.name);
    Ok(())
}

fn text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// One replication's line and figures.
fn print_status(t: &serde_json::Value) {
    let n = |k: &str| t[k].as_u64().unwrap_or(0);
    println!(
        "{}  {}  {} -> {}",
        text(&t["id"]),
        text(&t["status"]),
        text(&t["source"]),
        text(&t["target"])
    );
    if let Some(f) = t["filterExpression"].as_str().filter(|f| !f.is_empty()) {
        println!("  filter            {f}");
    }
    println!("  changes left      {}", n("changesLeft"));
    println!(
        "  docs written      {}  (lost conflict resolution at the target: {}; not sent, \
         the target's metadata newer: {})",
        n("docsWritten"),
        n("docsFailedCrTarget"),
        n("docsFailedCrSource")
    );
    println!(
        "  docs received     {}  (filtered: {})",
        n("docsReceivedFromDcp"),
        n("docsFiltered")
    );
    println!("  bytes written     {}", n("dataReplicated"));
    println!(
        "  latency p50/p99   {} / {} µs (largest over the nodes)",
        n("latencyP50UsMax"),
        n("latencyP99UsMax")
    );
    let ms = n("checkpointUnixMs");
    if ms > 0 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        println!(
            "  checkpoint age    {:.1} s",
            now.saturating_sub(ms) as f64 / 1000.0
        );
    }
    println!(
        "  last start        {} vbuckets resumed from checkpoints (seqnos {})",
        n("resumedVbuckets"),
        n("resumedSeqnos")
    );
    if n("nodesMissing") > 0 {
        println!(
            "  (figures of {} node(s) missing: they did not answer)",
            n("nodesMissing")
        );
    }
    for e in t["errors"].as_array().into_iter().flatten() {
        println!("  error             {}", text(e));
    }
}
