//! `sluice user set|list|delete`: the cluster's users and their roles, through any member's
//! admin port (`/settings/rbac/users`, which only `admin` may call).

use clap::{Args, Subcommand};
use sluice_client::admin_http::{self, Body, Method};
use std::time::Duration;

const HTTP_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Subcommand)]
pub enum UserCommand {
    /// Create a user or change its roles (and its password, when given).
    Set(SetArgs),
    /// List the users and their roles.
    List(Common),
    /// Delete a user.
    Delete(DeleteArgs),
}

#[derive(Args)]
pub struct Common {
    /// Admin address (host:port) of any member of the cluster.
    #[arg(long, default_value = "127.0.0.1:8091")]
    pub admin: String,
    #[command(flatten)]
    pub login: crate::login_args::AdminLogin,
}

#[derive(Args)]
pub struct SetArgs {
    /// The user's name.
    pub name: String,
    /// Its roles, comma-separated: admin, cluster_admin, ro_admin, stats_reader,
    /// replication_admin, bucket_admin[B], data_reader[B], data_writer[B],
    /// data_dcp_reader[B] (B a bucket, or * for all).
    #[arg(long)]
    pub roles: String,
    /// Its password (required for a new user; env SLUICE_USER_PASSWORD).
    #[arg(long, env = "SLUICE_USER_PASSWORD", hide_env_values = true)]
    pub user_password: Option<String>,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args)]
pub struct DeleteArgs {
    pub name: String,
    #[command(flatten)]
    pub common: Common,
}

pub fn run(cmd: UserCommand) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let (common, method, path, form) = match &cmd {
            UserCommand::Set(a) => {
                let mut form = vec![("roles", a.roles.as_str())];
                if let Some(p) = &a.user_password {
                    form.push(("password", p.as_str()));
                }
                (&a.common, Method::PUT, user_path(&a.name), form)
            }
            UserCommand::List(c) => (c, Method::GET, "/settings/rbac/users".into(), vec![]),
            UserCommand::Delete(a) => (&a.common, Method::DELETE, user_path(&a.name), vec![]),
        };
        let body = match form.is_empty() {
            true => Body::None,
            false => Body::Form(&form),
        };
        let who = common.login.credentials();
        let answer =
            admin_http::send(None, &common.admin, &who, method, &path, body, HTTP_TIMEOUT).await?;
        if !answer.ok() {
            anyhow::bail!("refused ({}): {}", answer.status, answer.body);
        }
        match &cmd {
            UserCommand::List(_) => {
                for u in answer.body.as_array().into_iter().flatten() {
                    let roles: Vec<String> = u["roles"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|r| match r["bucket_name"].as_str() {
                            Some(b) => format!("{}[{b}]", r["role"].as_str().unwrap_or("?")),
                            None => r["role"].as_str().unwrap_or("?").to_string(),
                        })
                        .collect();
                    println!("{}\t{}", u["id"].as_str().unwrap_or("?"), roles.join(","));
                }
            }
            UserCommand::Set(a) => println!("user {} set", a.name),
            UserCommand::Delete(a) => println!("user {} deleted", a.name),
        }
        Ok(())
    })
}

/// The user's path; a name is a path segment, so it is percent-encoded.
fn user_path(name: &str) -> String {
    let name = admin_http::percent_encode(name);
    format!("/settings/rbac/users/local/{name}")
}
