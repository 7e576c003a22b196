//! The login a client command (`watch`, `kv`) connects with, and the one an admin command
//! calls the admin port as.

use clap::Args;

#[derive(Args, Debug)]
pub struct LoginArgs {
    /// Bucket to use.
    #[arg(long, env = "SLUICE_BUCKET", default_value = "default")]
    pub bucket: String,
    #[command(flatten)]
    pub user: AdminLogin,
}

/// The administrator an admin command (`failover`, `rebalance`, `cluster up`) calls the
/// admin port as (HTTP Basic), a client command connects as, and `sluice server` admits.
#[derive(Args, Debug, Clone)]
pub struct AdminLogin {
    /// Administrator user name.
    #[arg(long, env = "SLUICE_USERNAME", default_value = "Administrator")]
    pub username: String,
    /// Administrator password.
    #[arg(
        long,
        env = "SLUICE_PASSWORD",
        default_value = "password",
        hide_env_values = true
    )]
    pub password: String,
}

impl AdminLogin {
    pub fn credentials(&self) -> sluice_client::Credentials {
        sluice_client::Credentials::new(&self.username, &self.password)
    }
}

/// Which member an admin command calls, and as whom.
#[derive(Args, Debug)]
pub struct AdminTarget {
    /// Admin address (host:port) of any member of the cluster.
    #[arg(long, default_value = "127.0.0.1:8091")]
    pub admin: String,
    #[command(flatten)]
    pub login: AdminLogin,
}

/// An admin command on one named thing (a user, a bucket).
#[derive(Args, Debug)]
pub struct NamedTarget {
    pub name: String,
    #[command(flatten)]
    pub common: AdminTarget,
}

impl AdminTarget {
    /// `method path` on the member (a form body unless `form` is empty): the answer's body,
    /// or an error with the reasons a refusal gave.
    pub async fn send(
        &self,
        method: sluice_client::admin_http::Method,
        path: &str,
        form: &[(&str, &str)],
        timeout: std::time::Duration,
    ) -> anyhow::Result<serde_json::Value> {
        use sluice_client::admin_http::{self, Body};
        let body = match form.is_empty() {
            true => Body::None,
            false => Body::Form(form),
        };
        let who = self.login.credentials();
        let answer = admin_http::send(
            &Default::default(),
            &self.admin,
            &who,
            method,
            path,
            body,
            timeout,
        )
        .await?;
        if !answer.ok() {
            anyhow::bail!("refused ({}): {}", answer.status, refusal(&answer.body));
        }
        Ok(answer.body)
    }
}

/// A refusal's reasons: Couchbase's `{"errors": {field: why}}`, its `error`, or the body.
fn refusal(body: &serde_json::Value) -> String {
    match body["errors"].as_object() {
        Some(errors) => errors
            .iter()
            .map(|(field, why)| {
                let why = why.as_str().unwrap_or("?");
                // `_` is Couchbase's key for a reason that is not about one field.
                match field.as_str() {
                    "_" => why.to_string(),
                    _ => format!("{field}: {why}"),
                }
            })
            .collect::<Vec<_>>()
            .join("; "),
        None => body["error"]
            .as_str()
            .map_or(body.to_string(), str::to_string),
    }
}
