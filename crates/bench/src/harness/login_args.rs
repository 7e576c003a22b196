//! The bucket and credentials every `sluice bench` scenario logs in with (and gives the
//! servers it starts).

use clap::Args;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub struct BenchLogin {
    /// Bucket to use (created on the servers the bench starts).
    #[arg(long, default_value = "default")]
    pub bucket: String,

    /// User for SCRAM-SHA512 (also given to the servers the bench starts).
    #[arg(long, default_value = "Administrator", env = "SLUICE_USERNAME")]
    pub username: String,

    /// Password for SCRAM-SHA512. Never written to results.json.
    #[arg(
        long,
        default_value = "password",
        env = "SLUICE_PASSWORD",
        hide_env_values = true
    )]
    // Read back by `bench rerun` (which puts it in), never written.
    #[serde(skip_serializing, default)]
    pub password: String,
}
