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
