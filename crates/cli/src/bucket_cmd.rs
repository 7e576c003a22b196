//! `sluice bucket create|list|delete`: the cluster's buckets, through any member's admin
//! port (`/pools/default/buckets`, Couchbase's REST API; `cluster_admin` or `admin`).

use crate::kv_cmd::LevelArg;
use crate::login_args::{AdminTarget, NamedTarget};
use clap::{Args, Subcommand, ValueEnum};
use sluice_client::admin_http::{self, Method};
use std::time::Duration;

/// A create waits for every node to serve the bucket (up to 20 s on the server).
const HTTP_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Subcommand)]
pub enum BucketCommand {
    /// Create a bucket, placed on every active node.
    Create(CreateArgs),
    /// List the buckets: name, type, quota per node, replicas, durability minimum, conflict
    /// resolution.
    List(AdminTarget),
    /// Delete a bucket: its data and files go on every node.
    Delete(NamedTarget),
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum TypeArg {
    /// Durable: every write reaches disk.
    Couchbase,
    /// Memory only.
    Ephemeral,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ConflictArg {
    Seqno,
    Lww,
}

#[derive(Args)]
pub struct CreateArgs {
    /// The bucket's name (letters, digits and `_ . % -`; not starting with `.`).
    pub name: String,
    /// Memory quota on each node, in MiB (at least 100).
    #[arg(long, default_value_t = 256)]
    pub ram_quota_mb: u64,
    /// Replica copies of each vbucket (0-3).
    #[arg(long, default_value_t = 1)]
    pub replicas: u8,
    #[arg(long = "type", value_enum, default_value = "couchbase")]
    pub bucket_type: TypeArg,
    /// Every write to the bucket is made at least this durable (a plain write becomes a
    /// SyncWrite); none by default. An ephemeral bucket's is at most majority.
    #[arg(long, value_enum)]
    pub durability_min: Option<LevelArg>,
    /// How versions written by other clusters (`*_WITH_META`) are judged, fixed for the
    /// bucket's life: seqno (revisions first) or lww (last write wins: CAS first).
    #[arg(long, value_enum, default_value = "seqno")]
    pub conflict_resolution: ConflictArg,
    #[command(flatten)]
    pub common: AdminTarget,
}

pub fn run(cmd: BucketCommand) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let quota;
        let replicas;
        let (common, method, path, form) = match &cmd {
            BucketCommand::Create(a) => {
                quota = a.ram_quota_mb.to_string();
                replicas = a.replicas.to_string();
                let kind = match a.bucket_type {
                    TypeArg::Couchbase => "couchbase",
                    TypeArg::Ephemeral => "ephemeral",
                };
                let durability_min = a.durability_min.map_or("none", |l| l.level().name());
                let form = vec![
                    ("name", a.name.as_str()),
                    ("ramQuotaMB", quota.as_str()),
                    ("replicaNumber", replicas.as_str()),
                    ("bucketType", kind),
                    ("durabilityMinLevel", durability_min),
                    (
                        "conflictResolutionType",
                        match a.conflict_resolution {
                            ConflictArg::Seqno => "seqno",
                            ConflictArg::Lww => "lww",
                        },
                    ),
                ];
                (&a.common, Method::POST, BUCKETS.to_string(), form)
            }
            BucketCommand::List(c) => (c, Method::GET, BUCKETS.to_string(), vec![]),
            BucketCommand::Delete(a) => (&a.common, Method::DELETE, bucket_path(&a.name), vec![]),
        };
        let answer = common.send(method, &path, &form, HTTP_TIMEOUT).await?;
        match &cmd {
            BucketCommand::List(_) => {
                for b in answer.as_array().into_iter().flatten() {
                    let mb = b["quota"]["rawRAM"].as_u64().unwrap_or(0) >> 20;
                    println!(
                        "{}\t{}\t{mb} MiB\t{} replicas\tdurability {}\tconflicts {}",
                        b["name"].as_str().unwrap_or("?"),
                        b["bucketType"].as_str().unwrap_or("?"),
                        b["replicaNumber"],
                        b["durabilityMinLevel"].as_str().unwrap_or("?"),
                        b["conflictResolutionType"].as_str().unwrap_or("?"),
                    );
                }
            }
            BucketCommand::Create(a) => match answer["served"].as_bool() {
                Some(false) => println!(
                    "bucket {} created; some nodes do not serve it yet (see their logs)",
                    a.name
                ),
                _ => println!("bucket {} created", a.name),
            },
            BucketCommand::Delete(a) => println!("bucket {} deleted", a.name),
        }
        Ok(())
    })
}

const BUCKETS: &str = "/pools/default/buckets";

/// The bucket's path; a name is a path segment, so it is percent-encoded.
fn bucket_path(name: &str) -> String {
    format!("{BUCKETS}/{}", admin_http::percent_encode(name))
}
