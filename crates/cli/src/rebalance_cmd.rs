//! `sluice rebalance`: spread the bucket over the cluster's nodes (taking in joined nodes,
//! leaving out ejected ones), moving data while clients keep working; waits for the end.

use clap::Args;
use serde_json::json;
use sluice_client::admin_http;
use std::time::Duration;

const HTTP_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(200);

#[derive(Args)]
pub struct RebalanceArgs {
    /// Admin address (host:port) of any member of the cluster; the rebalance runs there.
    #[arg(long, default_value = "127.0.0.1:8091")]
    pub admin: String,
    /// Node ids to take out of the cluster (their data moves to the others first).
    #[arg(long, value_name = "ID")]
    pub eject: Vec<u32>,
    #[command(flatten)]
    pub login: crate::login_args::AdminLogin,
}

pub fn run(args: RebalanceArgs) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(rebalance(args))
}

async fn rebalance(args: RebalanceArgs) -> anyhow::Result<()> {
    let path = "/api/v1/cluster/rebalance";
    let body = json!({ "eject": args.eject });
    let who = args.login.credentials();
    let started = admin_http::post(&args.admin, &who, path, &body, HTTP_TIMEOUT).await?;
    if !started.ok() {
        let why = started.body["error"].as_str().unwrap_or("no reason given");
        anyhow::bail!("rebalance refused ({}): {why}", started.status);
    }
    let mut shown = usize::MAX;
    loop {
        tokio::time::sleep(POLL).await;
        let s = admin_http::get(&args.admin, &who, path, HTTP_TIMEOUT)
            .await?
            .body;
        let done = s["moves_done"].as_u64().unwrap_or(0) as usize;
        if done != shown {
            eprintln!("rebalance: {done} of {} vbucket moves", s["moves_total"]);
            shown = done;
        }
        if s["running"] == false {
            if let Some(e) = s["error"].as_str() {
                anyhow::bail!("rebalance failed: {e}");
            }
            println!(
                "rebalanced onto nodes {}: {} vbucket moves in {} ms",
                s["target"], s["moves_total"], s["elapsed_ms"]
            );
            return Ok(());
        }
    }
}
