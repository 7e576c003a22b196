//! `sluice user set|list|delete`: the cluster's users and their roles, through any member's
//! admin port (`/settings/rbac/users`, which only `admin` may call).

use crate::login_args::{AdminTarget, NamedTarget};
use clap::{Args, Subcommand};
use sluice_client::admin_http::{self, Method};
use std::time::Duration;

const HTTP_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Subcommand)]
pub enum UserCommand {
    /// Create a user or change its roles (and its password, when given).
    Set(SetArgs),
    /// List the users and their roles.
    List(AdminTarget),
    /// Delete a user.
    Delete(NamedTarget),
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
    pub common: AdminTarget,
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
        let answer = common.send(method, &path, &form, HTTP_TIMEOUT).await?;
        match &cmd {
            UserCommand::List(_) => {
                for u in answer.as_array().into_iter().flatten() {
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
