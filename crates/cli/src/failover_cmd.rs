//! `sluice failover NODE`: fail a node over by hand, through any member's admin port.

use clap::Args;
use serde_json::json;
use sluice_client::admin_http;
use std::time::Duration;

/// A failover needs the metadata leader and a quorum: a few seconds at most when healthy.
const HTTP_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Args)]
pub struct FailoverArgs {
    /// The id of the node to fail over (see `GET /api/v1/cluster` or `cluster.json`).
    pub node: u32,
    /// Admin address (host:port) of any member of the cluster.
    #[arg(long, default_value = "127.0.0.1:8091")]
    pub admin: String,
    /// Fail over even if some vbuckets have no copy on another node (their data is lost), or
    /// no copy known complete (a replica that did not answer, or is part-way through a disk
    /// snapshot, is then promoted: acknowledged writes may be lost).
    #[arg(long)]
    pub allow_data_loss: bool,
    #[command(flatten)]
    pub login: crate::login_args::AdminLogin,
}

pub fn run(args: FailoverArgs) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let body = json!({ "node": args.node, "allow_data_loss": args.allow_data_loss });
    let answer = rt.block_on(admin_http::post(
        &args.admin,
        &args.login.credentials(),
        "/api/v1/cluster/failover",
        &body,
        HTTP_TIMEOUT,
    ))?;
    if !answer.ok() {
        let why = answer.body["error"].as_str().unwrap_or("no reason given");
        anyhow::bail!("failover refused ({}): {why}", answer.status);
    }
    let empty = Vec::new();
    let buckets = answer.body["buckets"].as_array().unwrap_or(&empty);
    println!("node {} failed over", args.node);
    for b in buckets {
        let count = |field: &str| b[field].as_array().map_or(0, Vec::len);
        println!(
            "  bucket {}: map rev {}, {} vbuckets promoted ({} past a first replica that was \
             behind), {} lost, {} with no copy known complete",
            b["bucket"].as_str().unwrap_or("?"),
            b["rev"],
            b["promoted"],
            b["promoted_out_of_order"].as_u64().unwrap_or(0),
            count("lost"),
            count("no_safe_copy"),
        );
    }
    Ok(())
}
