//! The login a client command (`watch`, `kv`) connects with.

use clap::Args;

#[derive(Args, Debug)]
pub struct LoginArgs {
    /// Bucket to use.
    #[arg(long, env = "SLUICE_BUCKET", default_value = "default")]
    pub bucket: String,
    #[arg(long, env = "SLUICE_USERNAME", default_value = "Administrator")]
    pub username: String,
    #[arg(
        long,
        env = "SLUICE_PASSWORD",
        default_value = "password",
        hide_env_values = true
    )]
    pub password: String,
}
